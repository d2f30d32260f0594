"""OpenBLAS's kernels pinned on import, so a CPU's own kernels do not change the numbers."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shockwave.policies.solvers import blas

HASWELL_FLAGS = "flags\t\t: fpu sse2 avx fma avx2 avx512f\n"


@pytest.fixture
def cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def with_flags(text: str, machine: str = "x86_64") -> None:
        info = tmp_path / "cpuinfo"
        info.write_text(text)
        monkeypatch.setattr(blas, "CPU_INFO", info)
        monkeypatch.setattr(blas.platform, "machine", lambda: machine)
        monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)

    return with_flags


def test_a_cpu_with_avx2_and_fma_gets_the_pinned_kernels(cpu) -> None:
    cpu("processor\t: 0\n" + HASWELL_FLAGS)
    blas.pin()
    assert os.environ["OPENBLAS_CORETYPE"] == "Haswell"


@pytest.mark.parametrize(
    ("flags", "machine"),
    [("flags\t\t: fpu sse2 avx\n", "x86_64"), ("flags\t\t: fpu avx2\n", "x86_64"), (HASWELL_FLAGS, "aarch64")],
)
def test_a_cpu_that_cannot_run_them_is_left_alone(cpu, flags: str, machine: str) -> None:
    cpu(flags, machine)
    blas.pin()
    assert "OPENBLAS_CORETYPE" not in os.environ


def test_unreadable_flags_and_the_users_choice_are_left_alone(cpu, tmp_path: Path, monkeypatch) -> None:
    cpu(HASWELL_FLAGS)
    monkeypatch.setattr(blas, "CPU_INFO", tmp_path / "missing")
    blas.pin()
    assert "OPENBLAS_CORETYPE" not in os.environ
    cpu(HASWELL_FLAGS)
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Zen")
    blas.pin()
    assert os.environ["OPENBLAS_CORETYPE"] == "Zen"


def test_other_kernels_loaded_are_logged_once(cpu, monkeypatch, caplog) -> None:
    cpu(HASWELL_FLAGS)
    monkeypatch.setattr(blas, "kernels", lambda: "SkylakeX")
    blas.check.cache_clear()
    with caplog.at_level(logging.WARNING):
        blas.check()
        blas.check()
    blas.check.cache_clear()
    assert [r.getMessage() for r in caplog.records] == [
        "OpenBLAS runs its SkylakeX kernels, not Haswell: results may differ in the last bits from other machines' "
        "(import shockwave before scipy, or set OPENBLAS_CORETYPE=Haswell)"
    ]


def _fresh(script: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    return subprocess.run(
        [sys.executable, "-c", script], env={**clean, **env}, capture_output=True, text=True, check=True
    ).stdout


KERNELS = "import shockwave, scipy.optimize\nfrom shockwave.policies.solvers import blas\nprint(blas.kernels())"
FIT = (
    "import shockwave, dataclasses\n"
    "from shockwave.workload_model.sia.fit import fit\n"
    "data = tuple(sorted((n, r, b, 0.02 + 4e-4 * b + (0.01 + 0.002 * r) * (n > 1) + 0.004 * r, 0.01 * r)\n"
    "    for n, r in ((1, 1), (1, 2), (1, 4), (2, 8), (3, 24)) for b in (16.0, 64.0)))\n"
    "print([v.hex() for v in dataclasses.astuple(fit(data))])\n"
)


@pytest.mark.skipif(not blas.runs_pinned(), reason="this CPU lacks AVX2 or FMA (or is not x86): nothing is pinned")
def test_import_pins_the_kernels_and_the_fit_follows_them() -> None:
    """In a fresh interpreter `import shockwave` comes before scipy loads OpenBLAS: it runs the pinned kernels, and
    the goodput fit is the one those kernels give, whatever this CPU's own kernels would (AVX-512 ones differ)."""
    assert _fresh(KERNELS).strip() == "Haswell"
    assert _fresh(FIT) == _fresh(FIT, OPENBLAS_CORETYPE="Haswell")


def test_results_record_the_kernels() -> None:
    import scipy.optimize  # noqa: F401  (the fit's OpenBLAS, loaded as a run with Sia's jobs loads it)

    from shockwave.results.provenance import provenance

    assert provenance()["versions"]["blas"] == blas.kernels() != "none loaded"
