"""The tenants file: every refusal names the file, the tenant and the field; a trace's jobs get their tenants."""

from __future__ import annotations

from pathlib import Path

import pytest

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.workload_model.job import Job
from shockwave.workload_model.tenants import read_tenants


def tenants(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tenants.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("", "tenants"),
        ("[tenants.a]\nweight = 0\n", "tenants.a.weight"),
        ('[tenants.a]\nweight = "2"\n', "tenants.a.weight"),
        ("[tenants.a]\nmax_gpus = 0\n", "tenants.a.max_gpus"),
        ("[tenants.a]\nmax_gpus = 1\nguarantee = { v100 = 2 }\n", "tenants.a.guarantee"),
        ("[tenants.a]\ncolour = 1\n", "tenants.a.colour"),
        ("[tenants.Alice]\n[tenants.alice]\n", "tenants.alice"),
        ('[tenants."a/b"]\n', "tenants.a/b"),
        ('[tenants.a]\n[jobs]\n"0-3" = "b"\n', "jobs.0-3"),
        ('[tenants.a]\n[jobs]\ndefault = "b"\n', "jobs.default"),
        ('[tenants.a]\n[jobs]\nassign = "random"\n', "jobs.assign"),
        ("[teams.a]\n", "teams"),
    ],
)
def test_a_bad_tenants_file_is_refused_naming_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tenants(tmp_path, text)
    with pytest.raises(InputError) as refused:
        read_tenants(path)
    assert refused.value.field == field and refused.value.path == str(path)


def test_guarantees_must_fit_the_cluster(tmp_path: Path) -> None:
    file = read_tenants(
        tenants(tmp_path, "[tenants.a]\nguarantee = { v100 = 3 }\n[tenants.b]\nguarantee = { v100 = 2 }\n")
    )
    with pytest.raises(InputError, match="guaranteed 5 v100 GPUs together; the cluster has 4"):
        file.require_cluster(ClusterSpec.parse("v100:4"))
    with pytest.raises(InputError) as refused:
        file.require_cluster(ClusterSpec.parse("k80:8"))
    assert refused.value.field == "tenants.a.guarantee.v100"


def test_a_traces_jobs_get_their_tenants_and_a_gang_over_a_cap_is_refused(tmp_path: Path) -> None:
    file = read_tenants(
        tenants(tmp_path, '[tenants.a]\n[tenants.b]\nmax_gpus = 2\n[jobs]\n"1-2" = "b"\ndefault = "a"\n')
    )
    jobs = [Job(model="ResNet-18", batch_size=32, scale_factor=g, total_steps=10, arrival=0.0) for g in (4, 1, 2)]
    assert [job.tenant for job in file.assigned(jobs)] == ["a", "b", "b"]
    with pytest.raises(InputError, match="job 1 asks for 4 GPUs, more than tenant b's max_gpus = 2") as refused:
        file.assigned([jobs[1], jobs[0]])
    assert refused.value.field == "tenants.b.max_gpus"
    robin = read_tenants(tenants(tmp_path, '[tenants.x]\n[tenants.y]\n[jobs]\nassign = "round_robin"\n'))
    assert [robin.tenant_of(i) for i in range(4)] == ["x", "y", "x", "y"]
