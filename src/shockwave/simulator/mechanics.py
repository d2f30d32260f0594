"""The simulator's modelling choices, each a named parameter (spec §3, §1.5b, §9).

`reference` reproduces the published artifact, quirks included. `corrected` fixes its known defects and is what new
studies should use: it keeps running when the cluster is briefly empty (§9 item 11), converts progress exactly at a
batch-size switch instead of rounding a partial epoch up (item 9), uses the profile's Accordion rule at run time
(item 8), and never force-completes a job that runs long (item 12).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shockwave.errors import InputError


@dataclass(frozen=True)
class Mechanics:
    name: str
    round_seconds: float = 120.0
    restart_cost_s: float = 20.0
    """Lost by a job that did not run in the previous round, on its first (almost) full round."""
    restart_cost_margin_s: float = 5.0
    """A round counts as full when the job ran longer than round_seconds minus this margin."""
    min_realloc_interval_s: float = 1000.0
    """Gavel policies recompute their allocation at most this often (simulated seconds)."""
    switch_delay_rounds: int = 1
    """Batch-size requests take effect after this many further executed rounds (0 or 1)."""
    round_up_progress_at_switch: bool = True
    stop_when_cluster_empty: bool = True
    accordion_profile_rule: bool = False
    deadline_factor: float | None = 1.5
    """A job that has run this many times its T_iso is completed as is (None: never)."""
    max_failed_rounds: int = 5
    consolidate_gangs: bool = False
    """Place a new gang on the fullest server that fits it whole (matters with --gpus-per-server > 1)."""
    restart_cost_by_gang: tuple[tuple[int, float], ...] = ()
    """(gang size, seconds) pairs overriding restart_cost_s: a real run's start-up grows with the gang."""

    def restart_cost(self, gang: int) -> float:
        return next((cost for size, cost in self.restart_cost_by_gang if size == gang), self.restart_cost_s)

    def __post_init__(self) -> None:
        if not self.round_seconds > 0:
            raise InputError(f"--round-seconds must be > 0, got {self.round_seconds}")
        if self.switch_delay_rounds not in (0, 1):
            raise InputError("switch_delay_rounds must be 0 or 1")

    def with_round_seconds(self, seconds: float) -> Mechanics:
        """Another round length; the "almost a full round" margin keeps its share of the round (5 s of 120 s)."""
        return replace(
            self, round_seconds=seconds, restart_cost_margin_s=self.restart_cost_margin_s * seconds / self.round_seconds
        )

    def with_overrides(
        self,
        restart_cost_s: float | None = None,
        min_realloc_interval_s: float | None = None,
        restart_cost_by_gang: dict[int, float] | None = None,
    ) -> Mechanics:
        """The preset with a measured restart cost or another reallocation interval (e.g. to match a real run)."""
        changes: dict[str, object] = {}
        for seconds in [restart_cost_s, *(restart_cost_by_gang or {}).values()]:
            if seconds is not None and not seconds >= 0:
                raise InputError(f"a restart cost must be >= 0 seconds, got {seconds}")
        if restart_cost_s is not None:
            changes["restart_cost_s"] = restart_cost_s
        if restart_cost_by_gang:
            changes["restart_cost_by_gang"] = tuple(sorted(restart_cost_by_gang.items()))
        if min_realloc_interval_s is not None:
            if min_realloc_interval_s < 0:
                raise InputError(f"--realloc-seconds must be >= 0, got {min_realloc_interval_s}")
            changes["min_realloc_interval_s"] = min_realloc_interval_s
        return replace(self, **changes)


PRESETS = {
    "reference": Mechanics(name="reference"),
    "corrected": Mechanics(
        name="corrected",
        round_up_progress_at_switch=False,
        stop_when_cluster_empty=False,
        accordion_profile_rule=True,
        deadline_factor=None,
        consolidate_gangs=True,
    ),
}


def preset(name: str) -> Mechanics:
    try:
        return PRESETS[name]
    except KeyError:
        raise InputError(f"unknown mechanics {name!r}; choose one of {', '.join(PRESETS)}") from None
