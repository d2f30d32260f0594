"""The built-in throughput model: answers every size the workload asks for on v100, p100 and k80, behaves physically,
matches the tables it was fitted to (tacc for v100, Gavel's simulation table for p100 and k80)."""

from __future__ import annotations

import importlib.util
import itertools
import math
import statistics
from pathlib import Path
from types import ModuleType

import pytest

from conftest import ROOT, require_reference
from shockwave.workload_model.builtin_throughput import CONSTANTS, V100_CONSTANTS, BuiltinThroughputs
from shockwave.workload_model.catalog import FAMILIES, ModelFamily, generator_templates
from shockwave.workload_model.throughput import UnknownThroughput, knows, load_throughputs

MODEL = BuiltinThroughputs()
GENERATED = sorted({t.family.name for t in generator_templates()})
TYPES = ("v100", "p100", "k80")


def _fit_script() -> ModuleType:
    """benchmarks/fit_throughput_model.py: its reader and fit are what the shipped constants came from."""
    path = ROOT / "benchmarks" / "fit_throughput_model.py"
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


@pytest.mark.parametrize("gpu_type", TYPES)
@pytest.mark.parametrize("name", GENERATED)
def test_answers_every_batch_and_gang_the_workload_uses(name: str, gpu_type: str) -> None:
    fam = FAMILIES[name]
    for bs in _batch_sizes(fam):
        for gpus in (*_gangs(fam), *((16, 32, 64) if fam.distributable else ())):
            rate = MODEL.throughput(name, bs, gpus, gpu_type)
            assert math.isfinite(rate) and rate > 0, (name, bs, gpus)


@pytest.mark.parametrize("gpu_type", TYPES)
def test_every_generated_family_has_constants(gpu_type: str) -> None:
    assert set(GENERATED) <= set(CONSTANTS[gpu_type])
    assert knows(MODEL, "LM", 160, 3, gpu_type) and knows(MODEL, "ResNet-18", 16, 16, gpu_type)
    assert knows(MODEL, "Transformer", 256, 64, gpu_type)  # Gavel's largest batch and the msr traces' largest gang


def test_v100_numbers_are_those_fitted_to_tacc() -> None:
    """Adding types left V100 alone: 1 GPU of ResNet-18 at batch 32 is 1000 / (9.21 + 34.3 * 0.5 ** 1.08) it/s."""
    assert CONSTANTS["v100"] is V100_CONSTANTS
    assert MODEL.throughput("ResNet-18", 32, 1) == pytest.approx(1000 / (9.21 + 34.3 * 0.5**1.08), rel=1e-12)
    assert MODEL.throughput("ResNet-18", 32, 1, "v100") == MODEL.throughput("ResNet-18", 32, 1)


def test_k80_is_the_slowest() -> None:
    """K80 is slower than P100 and V100 on every template and gang. P100 vs V100 has no such order: V100 is fitted
    to tacc's V100s, P100 to Gavel's, and tacc's own table has its P100 faster than its V100 in 32 of 77 entries
    (Transformer at batch 128: 3.07 vs 1.15 it/s)."""
    for t in generator_templates():
        for gpus in _gangs(t.family):
            k80, p100, v100 = (MODEL.throughput(t.family.name, t.batch_size, gpus, g) for g in ("k80", "p100", "v100"))
            assert k80 < min(p100, v100), (t.family.name, t.batch_size, gpus)


def test_is_the_default_throughput_model() -> None:
    tm = load_throughputs(None)
    assert isinstance(tm, BuiltinThroughputs) and tm.name == "builtin"


# (b) physical shape: guaranteed by a, s >= 0, c > 0 and 0.5 <= p <= 1.5 (see the module docstring)


@pytest.mark.parametrize("gpu_type", TYPES)
def test_constants_respect_the_bounds_the_guarantees_rest_on(gpu_type: str) -> None:
    for k in CONSTANTS[gpu_type].values():
        assert k["c"] > 0 and 0.5 <= k["p"] <= 1.5
        assert min(k["a"], k["s0"], k["s_intra"], k["s_inter"]) >= 0


@pytest.mark.parametrize("gpu_type", TYPES)
@pytest.mark.parametrize("name", GENERATED)
def test_iterations_get_slower_as_the_batch_grows(name: str, gpu_type: str) -> None:
    fam = FAMILIES[name]
    for gpus in _gangs(fam):
        rates = [MODEL.throughput(name, bs, gpus, gpu_type) for bs in _sweep(fam)]
        assert all(b < a for a, b in itertools.pairwise(rates)), (name, gpus)


@pytest.mark.parametrize("gpu_type", TYPES)
@pytest.mark.parametrize("name", GENERATED)
def test_samples_per_second_rise_then_fall_at_most_once(name: str, gpu_type: str) -> None:
    fam = FAMILIES[name]
    for gpus in _gangs(fam):
        sps = [bs * MODEL.throughput(name, bs, gpus, gpu_type) for bs in _sweep(fam)]
        peak = sps.index(max(sps))
        assert all(a <= b for a, b in itertools.pairwise(sps[: peak + 1])), (name, gpus)
        assert all(a >= b for a, b in itertools.pairwise(sps[peak:])), (name, gpus)
        # Inside the catalog range samples/s stays near its peak: measured worst is v100 Recommendation at 8192, 79%
        # of its peak near 1825 (the tacc table itself has 8192 at 78% of 2048); p100 and k80 stay above 80%.
        inside = [
            bs * MODEL.throughput(name, bs, gpus, gpu_type) for bs in range(fam.min_batch_size, fam.max_batch_size + 1)
        ]
        assert min(inside[inside.index(max(inside)) :]) >= 0.75 * max(inside), (name, gpus)


@pytest.mark.parametrize("gpu_type", TYPES)
def test_samples_per_second_never_fall_without_a_superlinear_exponent(gpu_type: str) -> None:
    for name, k in CONSTANTS[gpu_type].items():
        if k["p"] <= 1:
            fam = FAMILIES[name]
            for gpus in _gangs(fam):
                sps = [bs * MODEL.throughput(name, bs, gpus, gpu_type) for bs in _sweep(fam)]
                assert sps == sorted(sps), (name, gpus)


@pytest.mark.parametrize("gpu_type", TYPES)
def test_gangs_scale_at_most_linearly(gpu_type: str) -> None:
    """Sync time only grows with the gang, so per-GPU rate never rises; a bigger gang need not be faster at all
    (LM at batch 5 runs 134 it/s on 1 GPU and 126 on 2 in the tacc table, and the model agrees)."""
    for name in GENERATED:
        fam = FAMILIES[name]
        gangs = (*_gangs(fam), *((16, 32, 64) if fam.distributable else ()))
        for bs in _batch_sizes(fam):
            rates = [(g, MODEL.throughput(name, bs, g, gpu_type)) for g in gangs]
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
    refit = BuiltinThroughputs({"v100": fit.fit(entries)})
    for m, b, g in entries:
        assert refit.throughput(m, b, g) == pytest.approx(MODEL.throughput(m, b, g), rel=0.01), (m, b, g)


# Median / worst relative error vs Gavel's simulation_throughputs.json (printed by the fit script): p100 2.8% / 20.5%
# (ResNet-18 at batch 128 on 1 GPU), k80 4.1% / 50.6% (ResNet-18 at batch 16: that family's small batches and its
# memory cliff between batch 64 and 128 pull the one curve apart; every other k80 family is within 16.5%).
WORST_VS_GAVEL = {
    "p100": {"LM": 0.04, "Recommendation": 0.07, "ResNet-18": 0.21, "ResNet-50": 0.11, "Transformer": 0.10},
    "k80": {"LM": 0.17, "Recommendation": 0.03, "ResNet-18": 0.51, "ResNet-50": 0.06, "Transformer": 0.10},
}
MEDIAN_VS_GAVEL = {"p100": 0.03, "k80": 0.045}


@pytest.fixture(scope="module")
def gavel_table() -> Path:
    return require_reference("gavel", "simulation_throughputs.json")


@pytest.mark.parametrize("gpu_type", sorted(WORST_VS_GAVEL))
def test_matches_gavels_table_on_p100_and_k80(gavel_table: Path, gpu_type: str) -> None:
    fit = _fit_script()
    errors = fit.relative_errors(MODEL, fit.read_entries(gavel_table, gpu_type), gpu_type)
    assert set(errors) == set(WORST_VS_GAVEL[gpu_type])
    for name, e in errors.items():
        assert max(e) < WORST_VS_GAVEL[gpu_type][name], name
    overall = [x for e in errors.values() for x in e]
    assert statistics.median(overall) < MEDIAN_VS_GAVEL[gpu_type]


@pytest.mark.parametrize("gpu_type", sorted(WORST_VS_GAVEL))
def test_shipped_p100_and_k80_constants_are_what_the_fit_script_produces(gavel_table: Path, gpu_type: str) -> None:
    fit = _fit_script()
    entries = fit.read_entries(gavel_table, gpu_type)
    refit = BuiltinThroughputs({gpu_type: fit.fit(entries)})
    assert set(refit.constants[gpu_type]) == set(CONSTANTS[gpu_type])  # A3C and CycleGAN (one batch size) not fitted
    for m, b, g in entries:
        if m in CONSTANTS[gpu_type]:
            expected = MODEL.throughput(m, b, g, gpu_type)
            assert refit.throughput(m, b, g, gpu_type) == pytest.approx(expected, rel=0.01), (m, b, g)


# (d) errors


@pytest.mark.parametrize("model", ["A3C", "CycleGAN", "GPT-17", ""])
def test_unknown_models_are_unknown(model: str) -> None:
    with pytest.raises(UnknownThroughput):
        MODEL.throughput(model, 4, 1)


@pytest.mark.parametrize("gpu_type", ["a100", "v100_unconsolidated", "V100", ""])
def test_other_gpu_types_are_unknown(gpu_type: str) -> None:
    with pytest.raises(UnknownThroughput, match="knows v100, p100, k80 GPUs"):
        MODEL.throughput("ResNet-18", 32, 1, gpu_type)


@pytest.mark.parametrize("gpu_type", TYPES)
def test_non_distributable_families_run_on_one_gpu_only(gpu_type: str) -> None:
    assert MODEL.throughput("Recommendation", 512, 1, gpu_type) > 0
    for gpus in (2, 4, 8):
        with pytest.raises(UnknownThroughput):
            MODEL.throughput("Recommendation", 512, gpus, gpu_type)


@pytest.mark.parametrize(("batch_size", "gpus"), [(0, 1), (-32, 1), (32, 0), (32, -2)])
def test_non_positive_sizes_are_rejected(batch_size: int, gpus: int) -> None:
    with pytest.raises(ValueError):
        MODEL.throughput("ResNet-18", batch_size, gpus)
