"""Tenants share the cluster first, then each one's jobs are the policy's: the shares by weight in equal-share
progress on several GPU types, guarantees and caps in every round, an idle tenant's share lent, rounding paid
back over rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import shockwave
from shockwave import api
from shockwave.core.cluster import ClusterSpec
from shockwave.policies.tenants.shares import Demand, fair_shares, rounded
from shockwave.workload_model.tenants import Tenant

WEIGHTS_1_2_3 = (
    '[tenants.a]\nweight = 1\n[tenants.b]\nweight = 2\n[tenants.c]\nweight = 3\n[jobs]\nassign = "round_robin"\n'
)


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "fifo"])
def test_three_tenants_weighted_1_2_3_get_their_share_of_progress_on_three_types(tmp_path: Path, policy: str) -> None:
    """Heavy load (36 jobs at once on 4 V100s, 4 P100s and 4 K80s, Gavel's throughputs, a trace the test draws):
    while all three tenants have jobs waiting, each one's share of the equal-share progress made is its weight's
    share within 5%, whatever the policy among its own jobs."""
    trace = tmp_path / "static.trace"
    made = shockwave("trace", "generate", "--style", "gavel", "--throughputs", "gavel", "--jobs", 36, "--static",
                     "--seed", 11, "--output", trace)  # fmt: skip
    assert made.returncode == 0, made.stderr
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(WEIGHTS_1_2_3)
    result = api.simulate(trace, policy, cluster="v100:4,p100:4,k80:4", throughputs="gavel", tenants=tenants)
    rows = {row["tenant"]: row for row in result.tenants}  # type: ignore[attr-defined]
    assert result.contended_rounds > 100  # type: ignore[attr-defined]
    for name, weight in (("a", 1), ("b", 2), ("c", 3)):
        assert rows[name]["entitled_share"] == pytest.approx(weight / 6)
        assert rows[name]["contended_share"] / rows[name]["entitled_share"] == pytest.approx(1.0, abs=0.05)
        assert sum(rows[name]["gpu_seconds_by_type"].values()) == pytest.approx(rows[name]["gpu_seconds"])


CLUSTER = ClusterSpec.parse("v100:4,k80:4")


def demand(gpus: int, v100: float = 2.0, k80: float = 0.5) -> Demand:
    return Demand(gpus, {"v100": gpus, "k80": gpus}, {"v100": v100, "k80": k80})


def test_guarantees_come_first_then_weights_and_a_cap_holds() -> None:
    tenants = {
        "a": Tenant("a", 1.0, guarantees={"v100": 2}),
        "b": Tenant("b", 3.0, max_gpus=3),
    }
    shares = fair_shares(tenants, {"a": demand(8), "b": demand(8)}, CLUSTER)
    assert shares["a"]["v100"] >= 2 - 1e-9
    assert sum(shares["b"].values()) == pytest.approx(3.0)  # its cap, though its weight would give it more
    assert sum(shares["a"].values()) == pytest.approx(5.0)  # the rest: nothing is left idle


def test_an_idle_tenant_lends_its_share_and_takes_it_back() -> None:
    tenants = {"a": Tenant("a", 1.0), "b": Tenant("b", 1.0)}
    alone = fair_shares(tenants, {"a": demand(8), "b": demand(0)}, CLUSTER)
    assert sum(alone["a"].values()) == pytest.approx(8.0) and sum(alone["b"].values()) == 0
    back = fair_shares(tenants, {"a": demand(8), "b": demand(8)}, CLUSTER)
    assert sum(back["b"].values()) > 2


def test_rounding_is_paid_back_over_rounds() -> None:
    """Two V100s shared 2:1 are 1.33 and 0.67 GPUs: over three rounds the whole GPUs add up to 4 and 2."""
    cluster = ClusterSpec.parse("v100:2")
    shares = {"a": {"v100": 4 / 3}, "b": {"v100": 2 / 3}}
    owed: dict[str, dict[str, float]] = {"a": {}, "b": {}}
    total = {"a": 0, "b": 0}
    for _ in range(3):
        whole = rounded(shares, owed, cluster)
        assert sum(w["v100"] for w in whole.values()) == 2
        for name in shares:
            total[name] += whole[name]["v100"]
            owed[name]["v100"] = owed[name].get("v100", 0.0) + shares[name]["v100"] - whole[name]["v100"]
    assert total == {"a": 4, "b": 2}


def test_simulate_takes_a_tenants_file_and_refuses_a_gang_over_a_cap(tmp_path: Path) -> None:
    trace = tmp_path / "two-gpu.trace"
    made = shockwave("trace", "generate", "--style", "shockwave", "--jobs", 4, "--gpu-mix", "0,1,0,0", "-o", trace)
    assert made.returncode == 0, made.stderr
    capped = tmp_path / "capped.toml"
    capped.write_text('[tenants.a]\nmax_gpus = 1\n[jobs]\ndefault = "a"\n')
    refused = shockwave("simulate", "--trace", trace, "--gpus", 4, "--policy", "max_min_fairness", "--tenants", capped)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "capped.toml: field 'tenants.a.max_gpus': job 0 asks for 2 GPUs" in refused.stderr
    shared = tmp_path / "shared.toml"
    shared.write_text('[tenants.a]\n[tenants.b]\n[jobs]\nassign = "round_robin"\n')
    ran = shockwave("simulate", "--trace", trace, "--gpus", 4, "--policy", "max_min_fairness", "--tenants", shared)
    assert ran.returncode == 0 and "contended share" in ran.stdout
