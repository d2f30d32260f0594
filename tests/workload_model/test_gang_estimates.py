"""A throughput table that answers gangs beyond it (TableWithFallback): what it estimates, from what, and what not."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CANONICAL_TRACE, require_reference
from shockwave.workload_model.builtin_throughput import BuiltinThroughputs
from shockwave.workload_model.throughput import (
    TableThroughputs,
    TableWithFallback,
    UnknownThroughput,
    estimates_among,
    knows,
    load_throughputs,
)
from shockwave.workload_model.trace import read_trace

BUILTIN = BuiltinThroughputs()
RATES = {
    ("v100", "ResNet-18", 64, 1): 20.0,
    ("v100", "ResNet-18", 64, 2): 38.0,
    ("v100", "ResNet-18", 64, 8): 120.0,
    ("v100", "Transformer", 256, 2): 5.0,
    ("k80", "ResNet-50", 128, 1): 0.5,
    ("v100", "Recommendation", 512, 1): 23.0,
    ("k80", "A3C", 4, 1): 3.0,
}
ZEROS = frozenset({("k80", "ResNet-50", 128, 2), ("k80", "ResNet-50", 128, 4), ("k80", "CycleGAN", 1, 1)})


def model() -> TableWithFallback:
    return TableWithFallback(TableThroughputs(dict(RATES), "t.json", ZEROS), BUILTIN)


def ratio(name: str, bs: int, gpus: int, anchor: int, gpu_type: str = "v100") -> float:
    return BUILTIN.throughput(name, bs, gpus, gpu_type) / BUILTIN.throughput(name, bs, anchor, gpu_type)


def test_listed_rates_are_the_tables_and_not_estimates() -> None:
    tm = model()
    for (gpu_type, name, bs, gpus), rate in RATES.items():
        assert tm.throughput(name, bs, gpus, gpu_type) == rate
    assert tm.estimated == () and tm.name == "t.json"


@pytest.mark.parametrize(
    ("gpus", "anchor"),
    [(16, 8), (64, 8), (4, 2), (3, 2), (7, 2), (12, 8)],
)
def test_a_gang_beyond_the_table_scales_the_nearest_listed_gang_below(gpus: int, anchor: int) -> None:
    tm = model()
    rate = tm.throughput("ResNet-18", 64, gpus)
    assert rate == pytest.approx(RATES[("v100", "ResNet-18", 64, anchor)] * ratio("ResNet-18", 64, gpus, anchor))
    (estimate,) = tm.estimated
    assert (estimate.model, estimate.batch_size, estimate.gpus, estimate.gpu_type) == ("ResNet-18", 64, gpus, "v100")
    assert estimate.rate == rate
    assert estimate.basis == f"the table's {anchor}-GPU rate x the builtin model's ratio {gpus}/{anchor}"


def test_a_gang_below_every_listed_one_scales_the_smallest() -> None:
    """Transformer at batch 256 is listed on 2 GPUs only: 1 GPU is scaled down from it."""
    tm = model()
    assert tm.throughput("Transformer", 256, 1) == pytest.approx(5.0 * ratio("Transformer", 256, 1, 2))


def test_a_family_that_does_not_train_distributed_keeps_its_one_gpu_rate() -> None:
    tm = model()
    assert tm.throughput("Recommendation", 512, 8) == 23.0
    assert tm.throughput("A3C", 4, 32, "k80") == 3.0
    assert {e.basis for e in tm.estimated} == {"the table's 1-GPU rate: does not train distributed"}
    assert [(e.model, e.gpus) for e in tm.estimated] == [("A3C", 32), ("Recommendation", 8)]


@pytest.mark.parametrize(
    ("name", "bs", "gpus", "gpu_type"),
    [
        ("ResNet-50", 128, 2, "k80"),  # listed as 0: cannot run there
        ("ResNet-50", 128, 8, "k80"),  # any gang of a job listed as 0 at some gang, even above a listed rate
        ("ResNet-50", 128, 3, "k80"),
        ("CycleGAN", 1, 4, "k80"),  # its 1-GPU rate is a listed 0
        ("ResNet-18", 128, 4, "v100"),  # a batch size the table lacks
        ("ResNet-18", 64, 2, "p100"),  # a GPU type the table lacks
        ("ResNet-18", 64, 2, "a100"),
        ("GPT-9", 64, 2, "v100"),
    ],
)
def test_nothing_else_is_estimated(name: str, bs: int, gpus: int, gpu_type: str) -> None:
    tm = model()
    with pytest.raises(UnknownThroughput, match=r"t\.json has no"):
        tm.throughput(name, bs, gpus, gpu_type)
    assert tm.estimated == ()


def test_a_fallback_that_does_not_know_the_type_estimates_nothing() -> None:
    tm = TableWithFallback(TableThroughputs(dict(RATES), "t.json"), BuiltinThroughputs({"p100": {}}))
    assert not knows(tm, "ResNet-18", 64, 16)
    assert tm.throughput("Recommendation", 512, 2) == 23.0  # needs no fallback


def test_estimates_are_records_a_result_can_hold() -> None:
    tm = model()
    tm.throughput("ResNet-18", 64, 32)
    tm.throughput("ResNet-18", 64, 32)  # asked twice, recorded once
    tm.throughput("Recommendation", 512, 4)
    records = json.loads(json.dumps(tm.estimated_records()))
    assert [(r["model"], r["batch_size"], r["gpus"], r["gpu_type"]) for r in records] == [
        ("Recommendation", 512, 4, "v100"),
        ("ResNet-18", 64, 32, "v100"),
    ]
    assert set(records[0]) == {"model", "batch_size", "gpus", "gpu_type", "rate", "basis"}


@settings(max_examples=200, deadline=None, derandomize=True)
@given(gpus=st.integers(min_value=1, max_value=256), gpu_type=st.sampled_from(["v100", "p100", "k80"]))
def test_an_estimated_gang_never_beats_linear_scaling_of_its_anchor(gpus: int, gpu_type: str) -> None:
    """The built-in model's sync time only grows with the gang, so the estimate keeps per-GPU rates from rising."""
    table = {(gpu_type, "LM", 20, g): 100.0 * g**0.9 for g in (1, 2, 4, 8)}
    tm = TableWithFallback(TableThroughputs(table, "t"), BUILTIN)
    rate = tm.throughput("LM", 20, gpus, gpu_type)
    anchor = max(g for g in (1, 2, 4, 8) if g <= gpus)
    assert math.isfinite(rate) and 0 < rate <= table[(gpu_type, "LM", 20, anchor)] * gpus / anchor * (1 + 1e-12)


def test_load_throughputs_estimates_gangs_unless_told_not_to(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"v100": {"('ResNet-18 (batch size 64)', 8)": {"null": 120.0}}}))
    assert isinstance(load_throughputs(path), TableWithFallback)
    assert knows(load_throughputs(path), "ResNet-18", 64, 16)
    strict = load_throughputs(path, estimate_gangs=False)
    assert isinstance(strict, TableThroughputs) and not knows(strict, "ResNet-18", 64, 16)


def test_a_listed_zero_is_kept_apart_from_an_absent_entry(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"k80": {"('ResNet-50 (batch size 128)', 2)": {"null": 0}}}))
    table = TableThroughputs.from_json(path)
    assert table.zeros == {("k80", "ResNet-50", 128, 2)}
    assert dict(table.gangs("ResNet-50", 128, "k80")) == {2: 0.0}
    assert table.entries("k80") == {}


# -- against the reference tables -----------------------------------------------------------------------------------


def test_shockwaves_canonical_trace_needs_no_estimate_from_its_table() -> None:
    """The published numbers rest on tacc's table alone: estimation changes nothing for them."""
    tacc = load_throughputs(require_reference("throughputs", "tacc_throughputs.json"))
    jobs = read_trace(require_reference("traces", CANONICAL_TRACE), tacc)
    assert estimates_among(tacc, {(j.model, j.batch_size, j.scale_factor) for j in jobs}, ["v100"]) == ()


def test_gavels_table_estimates_the_msr_gangs_on_every_type() -> None:
    gavel = load_throughputs(require_reference("gavel", "simulation_throughputs.json"))
    jobs = read_trace(require_reference("gavel", "traces", "msr_seed0", "2869ce.trace"), gavel)
    wanted = {(j.model, j.batch_size, j.scale_factor) for j in jobs}
    estimated = estimates_among(gavel, wanted, ["v100", "p100", "k80"])
    assert {e.gpus for e in estimated} == {2, 4, 8, 16, 32}  # 2-8 only for families that do not train distributed
    assert all(e.gpus > 8 for e in estimated if e.model in ("LM", "ResNet-18", "ResNet-50", "Transformer"))
    assert not knows(gavel, "ResNet-50", 128, 32, "k80")  # Gavel lists it as 0 on 2-8 K80s: no estimate beyond
    for e in estimated:
        assert e.rate > 0 and math.isfinite(e.rate)
