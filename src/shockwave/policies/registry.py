"""Policy names (the reference's, plus short aliases) to fresh policy objects."""

from __future__ import annotations

from collections.abc import Callable

from shockwave.core.policy import Policy
from shockwave.errors import InputError
from shockwave.policies.gavel.allox import AlloX
from shockwave.policies.gavel.fifo import FifoPolicy
from shockwave.policies.gavel.finish_time_fairness import FinishTimeFairness
from shockwave.policies.gavel.gandiva_fair import GandivaFair
from shockwave.policies.gavel.max_min_fairness import MaxMinFairness
from shockwave.policies.gavel.max_sum_throughput import MaxSumThroughput
from shockwave.policies.gavel.mechanism import GavelPolicy
from shockwave.policies.gavel.min_total_duration import MinTotalDuration
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.policy import ShockwavePolicy

Factory = Callable[[float], Policy]

POLICIES: dict[str, Factory] = {
    "shockwave": lambda interval: ShockwavePolicy(),
    "max_min_fairness": lambda interval: GavelPolicy(MaxMinFairness(), min_realloc_interval_s=interval),
    "finish_time_fairness": lambda interval: GavelPolicy(FinishTimeFairness(), min_realloc_interval_s=interval),
    "min_total_duration": lambda interval: GavelPolicy(MinTotalDuration(), min_realloc_interval_s=interval),
    "max_sum_throughput_perf": lambda interval: GavelPolicy(MaxSumThroughput(), min_realloc_interval_s=interval),
    "allox": lambda interval: GavelPolicy(AlloX(), min_realloc_interval_s=interval),
    "gandiva_fair": lambda interval: GavelPolicy(GandivaFair(), min_realloc_interval_s=interval),
    "fifo": lambda interval: FifoPolicy(min_realloc_interval_s=interval),
}

ALIASES = {
    "gavel": "max_min_fairness",
    "themis": "finish_time_fairness",
    "ossp": "min_total_duration",
    "mst": "max_sum_throughput_perf",
    "max_sum_throughput": "max_sum_throughput_perf",
}


def canonical_name(name: str) -> str:
    name = ALIASES.get(name, name)
    if name not in POLICIES:
        known = ", ".join([*POLICIES, *(f"{a} (= {t})" for a, t in ALIASES.items())])
        raise InputError(f"unknown policy {name!r}; known policies: {known}")
    return name


def make_policy(
    name: str, *, min_realloc_interval_s: float = 1000.0, shockwave_config: ShockwaveConfig | None = None
) -> Policy:
    """A fresh policy; Gavel-style ones recompute at most every `min_realloc_interval_s` simulated seconds."""
    name = canonical_name(name)
    if name == "shockwave" and shockwave_config is not None:
        return ShockwavePolicy(shockwave_config)
    return POLICIES[name](min_realloc_interval_s)
