"""The run summary's header names the cluster as it was given."""

from __future__ import annotations

from shockwave.results.report import gpus_of


def test_one_type_is_a_count_and_several_types_are_their_pools() -> None:
    assert gpus_of({"gpus": 32, "cluster": "v100:32"}) == "32 GPUs"
    assert gpus_of({"gpus": 32, "cluster": None}) == "32 GPUs"
    several = {"gpus": 64, "cluster": "aws:24:4,rtx:24:8,dgx-ext:16:8"}
    assert gpus_of(several) == "aws 24, rtx 24, dgx-ext 16 GPUs"
