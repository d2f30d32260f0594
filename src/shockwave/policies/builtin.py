"""The policies this package ships, by name: the reference artifacts' names (Gavel's, Shockwave's, Themis's), each a
policy class or an allocator on Gavel's round mechanism (`registry` builds either)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shockwave.policies.gavel import (
    allox,
    cost,
    finish_time_fairness,
    gandiva,
    gandiva_fair,
    isolated,
    max_sum_throughput,
    min_total_duration,
    strategy_proof,
    water_filling,
)
from shockwave.policies.gavel import max_min_fairness as mmf
from shockwave.policies.gavel.fifo import FifoPackedPolicy, FifoPerfPolicy, FifoPolicy
from shockwave.policies.pollux.policy import PolluxPolicy
from shockwave.policies.shockwave.policy import ShockwavePolicy
from shockwave.policies.sia.policy import SiaPolicy
from shockwave.policies.themis.policy import ThemisPolicy

BUILTIN: dict[str, Callable[..., Any]] = {
    "shockwave": ShockwavePolicy,
    "max_min_fairness": mmf.MaxMinFairness,
    "max_min_fairness_perf": mmf.MaxMinFairnessPerf,
    "max_min_fairness_packed": mmf.MaxMinFairnessPacked,
    "max_min_fairness_water_filling": water_filling.MaxMinFairnessWaterFilling,
    "max_min_fairness_water_filling_perf": water_filling.MaxMinFairnessWaterFillingPerf,
    "max_min_fairness_strategy_proof": strategy_proof.MaxMinFairnessStrategyProof,
    "max_min_fairness_strategy_proof_perf": strategy_proof.MaxMinFairnessStrategyProofPerf,
    "finish_time_fairness": finish_time_fairness.FinishTimeFairness,
    "finish_time_fairness_perf": finish_time_fairness.FinishTimeFairnessPerf,
    "finish_time_fairness_packed": finish_time_fairness.FinishTimeFairnessPacked,
    "min_total_duration": min_total_duration.MinTotalDuration,
    "min_total_duration_perf": min_total_duration.MinTotalDurationPerf,
    "min_total_duration_packed": min_total_duration.MinTotalDurationPacked,
    "max_sum_throughput_perf": max_sum_throughput.MaxSumThroughput,
    "max_sum_throughput_normalized_by_cost_perf": cost.MaxSumThroughputNormalizedByCost,
    "max_sum_throughput_normalized_by_cost_perf_SLOs": cost.MaxSumThroughputNormalizedByCostSLOs,
    "max_sum_throughput_normalized_by_cost_packed_SLOs": cost.MaxSumThroughputNormalizedByCostPackedSLOs,
    "allox": allox.AlloX,
    "gandiva_fair": gandiva_fair.GandivaFair,
    "gandiva": gandiva.Gandiva,
    "isolated": isolated.Isolated,
    "proportional": isolated.Proportional,
    "themis": ThemisPolicy,
    "sia": SiaPolicy,
    "pollux": PolluxPolicy,
    "fifo": FifoPolicy,
    "fifo_perf": FifoPerfPolicy,
    "fifo_packed": FifoPackedPolicy,
}
"""The built-in policies, each a policy or an allocator; plug-ins are found when named (`policy_info`)."""
