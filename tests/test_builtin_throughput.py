"""The built-in throughput model: answers every size the workload asks for, behaves physically, matches the tables."""

from __future__ import annotations

import importlib.util
import itertools
import math
import statistics
from pathlib import Path
from types import ModuleType

import pytest

from shockwave.workload_model.builtin_throughput import V100_CONSTANTS, BuiltinThroughputs
from shockwave.workload_model.catalog import FAMILIES, ModelFamily, generator_templates
from shockwave.workload_model.throughput import UnknownThroughput, knows, load_throughputs

MODEL = BuiltinThroughputs()
GENERATED = sorted({t.family.name for t in generator_templates()})


def _fit_script() -> ModuleType:
    """benchmarks/fit_throughput_model.py: its reader and fit are what the shipped constants came from."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "fit_throughput_model.py"
    spec = importlib.util.spec_from_file_location("fit_throughput_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gangs(fam: ModelFamily) -> tuple[int, ...]:
    return (1, 2, 4, 8) if fam.distributable else (1,)


def _batch_sizes(fam: ModelFamily) -> list[int]:
    """Template sizes, the family bounds and every power of two between: what traces and adaptation ask for."""
    powers = [2**k for k in range(20) if fam.min_batch_size <= 2**k <= fam.max_batch_size]
    return sorted({*fam.template_batch_sizes, fam.min_batch_size, fam.max_batch_size, *powers})


def _sweep(fam: ModelFamily) -> range:
    """Every integer batch size from half the family minimum to twice its maximum."""
    return range(max(1, fam.min_batch_size // 2), 2 * fam.max_batch_size + 1)


# (a) coverage


@pytest.mark.parametrize("name", GENERATED)
def test_answers_every_batch_and_gang_the_workload_uses(name: str) -> None:
    fam = FAMILIES[name]
    for bs in _batch_sizes(fam):
        for gpus in _gangs(fam):
            rate = MODEL.throughput(name, bs, gpus)
            assert math.isfinite(rate) and rate > 0, (name, bs, gpus)


def test_every_generated_family_has_constants() -> None:
    assert set(GENERATED) <= set(V100_CONSTANTS)
    assert knows(MODEL, "LM", 160, 3) and knows(MODEL, "ResNet-18", 16, 16)


def test_is_the_default_throughput_model() -> None:
    tm = load_throughputs(None)
    assert isinstance(tm, BuiltinThroughputs) and tm.name == "builtin"


# (b) physical shape: guaranteed by a, s >= 0, c > 0 and 0.5 <= p <= 1.5 (see the module docstring)


def test_constants_respect_the_bounds_the_guarantees_rest_on() -> None:
    for k in V100_CONSTANTS.values():
        assert k["c"] > 0 and 0.5 <= k["p"] <= 1.5
        assert min(k["a"], k["s0"], k["s_intra"], k["s_inter"]) >= 0


@pytest.mark.parametrize("name", GENERATED)
def test_iterations_get_slower_as_the_batch_grows(name: str) -> None:
    fam = FAMILIES[name]
    for gpus in _gangs(fam):
        rates = [MODEL.throughput(name, bs, gpus) for bs in _sweep(fam)]
        assert all(b < a for a, b in itertools.pairwise(rates)), (name, gpus)


@pytest.mark.parametrize("name", GENERATED)
def test_samples_per_second_rise_then_fall_at_most_once(name: str) -> None:
    fam = FAMILIES[name]
    for gpus in _gangs(fam):
        sps = [bs * MODEL.throughput(name, bs, gpus) for bs in _sweep(fam)]
        peak = sps.index(max(sps))
        assert all(a <= b for a, b in itertools.pairwise(sps[: peak + 1])), (name, gpus)
        assert all(a >= b for a, b in itertools.pairwise(sps[peak:])), (name, gpus)
        # Inside the catalog range samples/s stays near its peak: measured worst is Recommendation at 8192, 79% of
        # its peak near 1825 (the tacc table itself has 8192 at 78% of 2048).
        inside = [bs * MODEL.throughput(name, bs, gpus) for bs in range(fam.min_batch_size, fam.max_batch_size + 1)]
        assert min(inside[inside.index(max(inside)) :]) >= 0.75 * max(inside), (name, gpus)


def test_samples_per_second_never_fall_without_a_superlinear_exponent() -> None:
    for name, k in V100_CONSTANTS.items():
        if k["p"] <= 1:
            fam = FAMILIES[name]
            for gpus in _gangs(fam):
                sps = [bs * MODEL.throughput(name, bs, gpus) for bs in _sweep(fam)]
                assert sps == sorted(sps), (name, gpus)


def test_gangs_scale_at_most_linearly() -> None:
    """Sync time only grows with the gang, so per-GPU rate never rises; a bigger gang need not be faster at all
    (LM at batch 5 runs 134 it/s on 1 GPU and 126 on 2 in the tacc table, and the model agrees)."""
    for name in GENERATED:
        fam = FAMILIES[name]
        for bs in _batch_sizes(fam):
            rates = [(g, MODEL.throughput(name, bs, g)) for g in _gangs(fam)]
            for (g1, r1), (g2, r2) in itertools.pairwise(rates):
                assert r2 <= r1 * g2 / g1, (name, bs, g1, g2)


# (c) agreement with the public tables

# Worst relative errors measured vs tacc with the shipped constants (LM 8.6%, Recommendation 5.2%, ResNet-18 10.6%,
# ResNet-50 39.5% at an outlier: bs 32 on 2 GPUs measures 6.97 it/s, barely above 1 GPU; Transformer 12.5%).
WORST_VS_TACC = {"LM": 0.10, "Recommendation": 0.06, "ResNet-18": 0.12, "ResNet-50": 0.40, "Transformer": 0.14}


def test_matches_the_fitted_tacc_table(tacc_path: Path) -> None:
    fit = _fit_script()
    errors = fit.relative_errors(MODEL, fit.read_v100(tacc_path))
    assert set(errors) == set(WORST_VS_TACC)
    for name, e in errors.items():
        assert statistics.median(e) < 0.10, name
        assert max(e) < WORST_VS_TACC[name], name
    overall = [x for e in errors.values() for x in e]
    assert len(overall) == 77 and statistics.median(overall) < 0.05


def test_wisr_error_is_of_the_order_the_tables_disagree(tacc_path: Path, wisr_path: Path) -> None:
    """wisr is not fitted: it differs from tacc by 43% at the median; the model is 37% off it (worst 69%)."""
    fit = _fit_script()
    errors = fit.relative_errors(MODEL, fit.read_v100(wisr_path))
    overall = [x for e in errors.values() for x in e]
    assert statistics.median(overall) < 0.40 and max(overall) < 0.75
    tables_median, _ = fit.disagreement(fit.read_v100(tacc_path), fit.read_v100(wisr_path))
    assert statistics.median(overall) < tables_median


def test_shipped_constants_are_what_the_fit_script_produces(tacc_path: Path) -> None:
    fit = _fit_script()
    entries = fit.read_v100(tacc_path)
    refit = BuiltinThroughputs(fit.fit(entries))
    for m, b, g in entries:
        assert refit.throughput(m, b, g) == pytest.approx(MODEL.throughput(m, b, g), rel=0.01), (m, b, g)


# (d) errors


@pytest.mark.parametrize("model", ["A3C", "CycleGAN", "GPT-17", ""])
def test_unknown_models_are_unknown(model: str) -> None:
    with pytest.raises(UnknownThroughput):
        MODEL.throughput(model, 4, 1)


def test_only_v100_is_known() -> None:
    with pytest.raises(UnknownThroughput):
        MODEL.throughput("ResNet-18", 32, 1, "k80")
    assert MODEL.throughput("ResNet-18", 32, 1, "v100") == MODEL.throughput("ResNet-18", 32, 1)


def test_non_distributable_families_run_on_one_gpu_only() -> None:
    assert MODEL.throughput("Recommendation", 512, 1) > 0
    for gpus in (2, 4, 8):
        with pytest.raises(UnknownThroughput):
            MODEL.throughput("Recommendation", 512, gpus)


@pytest.mark.parametrize(("batch_size", "gpus"), [(0, 1), (-32, 1), (32, 0), (32, -2)])
def test_non_positive_sizes_are_rejected(batch_size: int, gpus: int) -> None:
    with pytest.raises(ValueError):
        MODEL.throughput("ResNet-18", batch_size, gpus)
