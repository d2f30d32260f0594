"""Batch-size switches: `rescale_to_batch_size` (spec §1.5b steps 3-4) and `rates_after_switch`, by hand.

Iterations per epoch are ceil(dataset size / batch size), written out here rather than asked of the catalog:
ResNet-18 (CIFAR-10, 50,000 samples): bs 32 -> ceil(1562.5) = 1563, bs 64 -> ceil(781.25) = 782,
bs 128 -> ceil(390.625) = 391. LM (Wikitext-2, 59,675): bs 5 -> 11,935, bs 80 -> ceil(745.9375) = 746.
"""

from __future__ import annotations

import pytest

from shockwave.core.cluster import ClusterSpec
from shockwave.core.loop import rates_after_switch
from shockwave.core.state import JobState, rescale_to_batch_size
from shockwave.workload_model.catalog import FAMILIES
from shockwave.workload_model.profile import build_profile
from shockwave.workload_model.throughput import TableThroughputs, load_throughputs
from shockwave.workload_model.trace import catalog_job

RN18_IPE = {32: 1563, 64: 782, 128: 391}
LM_IPE = {5: 11935, 80: 746}


def make_job(model: str, batch_size: int, total_steps: int, steps_done: int = 0, gang: int = 1) -> JobState:
    spec = catalog_job(model, batch_size, gang, total_steps, "static", 0.0).job()
    job = JobState.admit(0, spec, build_profile(spec, load_throughputs(None)), rates={"v100": 10.0})
    job.steps_done = steps_done
    return job


def test_the_catalog_datasets_are_the_ones_used_here() -> None:
    assert FAMILIES["ResNet-18"].dataset_size == 50000 and FAMILIES["LM"].dataset_size == 59675
    assert make_job("ResNet-18", 32, 1563).iterations_per_epoch == RN18_IPE[32]


# -- rescale_to_batch_size -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("round_up", "done"), [(True, 1564), (False, 1000)])
def test_resnet18_32_to_64(round_up: bool, done: int) -> None:
    # 10 epochs: 15,630 steps at bs 32 -> ceil(15630 / 2) = 7815 at bs 64, ceil(7815 / 782) = 10 epochs: kept.
    # 2000 steps done = 1 epoch + 437 steps.
    # round up: ceil(2000 / 1563) = 2 epochs x 782 = 1564.  exact: 782 + floor(437 / 1563 x 782 = 218.6) = 1000.
    job = make_job("ResNet-18", 32, 15630, steps_done=2000)
    rescale_to_batch_size(job, 64, round_up_progress=round_up)
    assert (job.total_steps, job.steps_done, job.batch_size) == (7815, done, 64)
    assert job.batch_size_changes == 1 and job.initial_batch_size == 32
    assert job.iterations_per_epoch == RN18_IPE[64]


@pytest.mark.parametrize("round_up", [True, False])
def test_a_partial_last_epoch_keeps_the_epoch_count(round_up: bool) -> None:
    # 1564 steps at bs 32 = 2 epochs (the second of 1 step). ceil(1564 / 2) = 782 at bs 64 is 1 epoch: the count
    # changed, so the total becomes 782 x 2 = 1564
    job = make_job("ResNet-18", 32, 1564)
    rescale_to_batch_size(job, 64, round_up_progress=round_up)
    assert (job.total_steps, job.steps_done) == (1564, 0)


@pytest.mark.parametrize(("round_up", "done"), [(True, 3126), (False, 2344)])
def test_resnet18_back_down_64_to_32(round_up: bool, done: int) -> None:
    # 3 epochs: 2346 steps at bs 64 -> 2346 x 2 = 4692 at bs 32 = ceil(3.0019) = 4 epochs: the count changed, so the
    # total is 1563 x 3 = 4689. 1173 done = 1.5 epochs.
    # round up: ceil(1173 / 782) = 2 x 1563 = 3126.  exact: 1563 + floor(391 / 782 x 1563 = 781.5) = 2344.
    job = make_job("ResNet-18", 64, 2346, steps_done=1173)
    rescale_to_batch_size(job, 32, round_up_progress=round_up)
    assert (job.total_steps, job.steps_done, job.batch_size) == (4689, done, 32)


@pytest.mark.parametrize("round_up", [True, False])
def test_progress_on_an_epoch_boundary_converts_the_same_in_both_modes(round_up: bool) -> None:
    # 4 epochs at bs 32 (6252 steps) -> 3126 at bs 64 (= 4 x 782 - 2: ceil(3126 / 782) = 4, kept); 3 epochs done:
    # 4689 steps -> 3 x 782 = 2346 either way. Then 64 -> 128: ceil(3126 / 2) = 1563 (ceil(1563 / 391) = 4, kept);
    # progress 2346 = 3 epochs at 782 -> 3 x 391 = 1173.
    job = make_job("ResNet-18", 32, 6252, steps_done=4689)
    rescale_to_batch_size(job, 64, round_up_progress=round_up)
    assert (job.total_steps, job.steps_done) == (3126, 2346)
    rescale_to_batch_size(job, 128, round_up_progress=round_up)
    assert (job.total_steps, job.steps_done, job.batch_size, job.batch_size_changes) == (1563, 1173, 128, 2)


@pytest.mark.parametrize(("round_up", "done"), [(True, 1492), (False, 750)])
def test_lm_5_to_80_rounding_up_can_finish_a_job(round_up: bool, done: int) -> None:
    # 2 epochs: 23,870 steps at bs 5 -> ceil(23870 / 16 = 1491.875) = 1492 at bs 80, ceil(1492 / 746) = 2: kept.
    # 12,000 done = 1 epoch + 65 steps.
    # round up: ceil(12000 / 11935) = 2 x 746 = 1492, the whole job (the reference's free progress, spec §9).
    # exact: 746 + floor(65 / 11935 x 746 = 4.06) = 750.
    job = make_job("LM", 5, 23870, steps_done=12000)
    assert job.iterations_per_epoch == LM_IPE[5]
    rescale_to_batch_size(job, 80, round_up_progress=round_up)
    assert (job.total_steps, job.steps_done) == (1492, done)
    assert (job.remaining_steps == 0) is round_up


# -- rates_after_switch --------------------------------------------------------------------------------------------
TABLE = TableThroughputs(
    {
        ("v100", "ResNet-18", 32, 1): 10.0,
        ("v100", "ResNet-18", 64, 1): 6.0,
        ("k80", "ResNet-18", 32, 1): 4.0,
        ("k80", "ResNet-18", 64, 1): 3.0,
        ("k80", "ResNet-18", 128, 1): 2.0,
    },
    name="hand table",
)


def rn18_at(rates: dict[str, float]) -> JobState:
    job = make_job("ResNet-18", 32, 15630)
    job.rates = rates
    return job


def test_without_a_measurement_the_current_rate_is_scaled_by_the_models_ratio() -> None:
    # v100: 5 x 6/10 = 3.0; k80: 2 x 3/4 = 1.5 (the model's absolute rates would be 6 and 3)
    assert rates_after_switch(rn18_at({"v100": 5.0, "k80": 2.0}), 64, TABLE, {}) == {
        "v100": pytest.approx(3.0),
        "k80": pytest.approx(1.5),
    }


def test_a_measured_rate_wins() -> None:
    # k80 measured at bs 64 before: 2.5, not 2 x 3/4; v100 scaled: 5 x 6/10 = 3
    rates = rates_after_switch(rn18_at({"v100": 5.0, "k80": 2.0}), 64, TABLE, {"k80": 2.5})
    assert rates == {"v100": pytest.approx(3.0), "k80": 2.5}


def test_a_measurement_for_a_type_the_job_cannot_use_is_ignored() -> None:
    assert rates_after_switch(rn18_at({"k80": 2.0}), 64, TABLE, {"v100": 9.0}) == {"k80": pytest.approx(1.5)}


def test_a_type_the_model_lacks_the_new_batch_size_on_is_left_out() -> None:
    # bs 128 is known on k80 only: the job runs on there at 2 x 2/4 = 1, and no longer on v100
    assert rates_after_switch(rn18_at({"v100": 5.0, "k80": 2.0}), 128, TABLE, {}) == {"k80": pytest.approx(1.0)}
    # ... unless v100 was measured there: then the job keeps both
    assert rates_after_switch(rn18_at({"v100": 5.0, "k80": 2.0}), 128, TABLE, {"v100": 4.0}) == {
        "v100": 4.0,
        "k80": pytest.approx(1.0),
    }


def test_none_when_the_types_left_cannot_hold_the_gang() -> None:
    # bs 128 is known on k80 only, and the cluster's single k80 cannot hold a gang of 2
    job = make_job("ResNet-18", 32, 15630, gang=2)
    job.rates = {"v100": 5.0, "k80": 2.0}
    table = TableThroughputs(
        {("v100", "ResNet-18", 32, 2): 10.0, ("k80", "ResNet-18", 32, 2): 4.0, ("k80", "ResNet-18", 128, 2): 2.0},
        name="gangs of 2",
    )
    assert rates_after_switch(job, 128, table, {}) == {"k80": pytest.approx(1.0)}
    assert rates_after_switch(job, 128, table, {}, ClusterSpec.parse("v100:4,k80:1")) is None
    assert rates_after_switch(job, 128, table, {}, ClusterSpec.parse("v100:4,k80:2")) == {"k80": pytest.approx(1.0)}


def test_none_when_no_type_knows_the_new_batch_size() -> None:
    assert rates_after_switch(rn18_at({"v100": 5.0}), 128, TABLE, {}) is None


def test_none_when_the_model_lacks_the_current_batch_size() -> None:
    table = TableThroughputs({("v100", "ResNet-18", 64, 1): 6.0}, name="only 64")
    assert rates_after_switch(rn18_at({"v100": 5.0}), 64, table, {}) is None


@pytest.mark.parametrize(
    ("batch_size", "gang", "new_bs"),
    [(32, 1, 64), (32, 1, 16), (48, 1, 64), (64, 1, 256), (128, 1, 48), (64, 2, 128), (16, 4, 48), (128, 1, 32)],
)
def test_in_a_simulation_the_result_is_exactly_the_models_rate(batch_size: int, gang: int, new_bs: int) -> None:
    # the current rate is the model's, so rate / before == 1.0 exactly and the product is the model's own number.
    # (rate * after / before would round differently for several of these pairs, e.g. 32 -> 16 and 48 -> 64.)
    tm = load_throughputs(None)
    job = make_job("ResNet-18", batch_size, 10 * 1563, gang=gang)
    job.rates = {"v100": tm.throughput("ResNet-18", batch_size, gang, "v100")}
    rates = rates_after_switch(job, new_bs, tm, {})
    assert rates == {"v100": tm.throughput("ResNet-18", new_bs, gang, "v100")}
