"""Profiles: epochs, per-epoch batch sizes and T_iso against the published artifact and hand examples."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shockwave.workload_model.adaptation import accordion_profile, gns_profile
from shockwave.workload_model.catalog import FAMILIES
from shockwave.workload_model.profile import build_profile, repeated_sum
from shockwave.workload_model.throughput import TableThroughputs
from shockwave.workload_model.trace import read_trace


def test_t_iso_matches_published_canonical(canonical_trace: Path, tacc_path: Path, reference: Path) -> None:
    table = TableThroughputs.from_json(tacc_path)
    published = json.loads((reference / "published_canonical.json").read_text())["jobs"]
    jobs = read_trace(canonical_trace, table)
    assert len(jobs) == len(published) == 120
    for i, job in enumerate(jobs):
        profile = build_profile(job, table)
        expected = published[str(i)]
        assert profile.t_isolated == pytest.approx(expected["t_isolated_s"], rel=1e-4, abs=0), i
        assert profile.epochs == expected["profile_epochs"], i
        assert sorted(set(profile.batch_sizes)) == sorted(expected["profile_bs_values"]), i


def test_gns_multi_stage_doubles_and_final_epoch_reverts() -> None:
    lm = FAMILIES["LM"]
    # LM bs10 on 1 GPU doubles at epochs 11, 21, 41 (to 20, 40, 80).
    schedule = gns_profile(lm, 10, 1, 45)
    assert schedule[:11] == [10] * 11
    assert schedule[11:21] == [20] * 10
    assert schedule[21:41] == [40] * 20
    assert schedule[41:44] == [80] * 3
    assert schedule[44] == 10  # the reference's last-epoch quirk


def test_gns_single_stage_keeps_final_epoch_and_caps_at_max() -> None:
    lm = FAMILIES["LM"]
    assert gns_profile(lm, 40, 1, 14) == [40] * 11 + [80] * 3
    assert gns_profile(lm, 40, 1, 11) == [40] * 11  # not past the first switch: never adapts
    assert gns_profile(FAMILIES["Transformer"], 32, 1, 50) == [32] * 50
    assert max(gns_profile(FAMILIES["ResNet-18"], 16, 1, 100)) == 256


def test_accordion_first_30_percent_and_regimes() -> None:
    r18 = FAMILIES["ResNet-18"]
    schedule = accordion_profile(r18, 32, 200)
    assert schedule[:61] == [32] * 61  # epochs <= 0.3 * 200 are critical
    assert schedule[61:150] == [256] * 89
    assert schedule[150:160] == [32] * 10
    assert schedule[160:] == [256] * 40
    rec = accordion_profile(FAMILIES["Recommendation"], 4096, 100)
    assert rec[60:70] == [4096] * 10 and rec[70] == 8192  # profile keeps the [60,70) window
    assert accordion_profile(FAMILIES["Transformer"], 16, 20) == [16] * 20


def _one_by_one(total: float, value: float, times: int) -> float:
    for _ in range(times):
        total += value
    return total


@given(
    st.one_of(st.just(0.0), st.floats(0, 1e16)),
    st.one_of(
        st.floats(1e-6, 1e5),
        st.builds(lambda m, e: m * 2.0**e, st.sampled_from([0.5, 0.25, 1.5, 3.0, 0.1]), st.integers(-12, 12)),
        st.builds(lambda x, k: math.ulp(x) * k, st.floats(1, 1e6), st.sampled_from([0.5, 1.5, 2.5, 7.25, 40.0])),
    ),
    st.integers(0, 5000),
)
def test_repeated_sum_is_the_one_by_one_sum_bit_for_bit(total: float, value: float, times: int) -> None:
    """Jumping through a binade adds what each rounded addition would, ties to even included."""
    assert repeated_sum(total, value, times) == _one_by_one(total, value, times)
