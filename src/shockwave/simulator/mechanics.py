"""The simulator's modelling choices, each a named parameter (spec §3, §1.5b, §9).

`reference` reproduces the published Shockwave artifact, quirks included (120 s rounds); `gavel` the reference Gavel
simulator (GAVEL_SPEC.md §4: its driver's 360 s rounds, no restart cost, allocations recomputed at most every 1920
s, execution times measured across an idle gap, FIFO as its code behaves). `corrected` fixes the artifact's known
defects and is what new studies should use: it keeps running when the cluster is briefly empty (§9 item 11),
converts progress exactly at a batch-size switch instead of rounding a partial epoch up (item 9), uses the profile's
Accordion rule at run time (item 8), and never force-completes a job that runs long (item 12). `sia` is the Sia
artifact's simulator (benchmarks/sia_spec.md §3, §7): `corrected` on a fixed clock of whole rounds of its 60 s,
gangs placed by its first-fit scan (but those of policies that place gangs whole, `Policy.places_gangs_whole`) and
run at the speed of their real placement, each epoch's end on a whole second, and Gavel's policies on its port of
Gavel's round robin. Sia's workloads (`--trace-format sia`) are simulated with it unless another preset is named.

`Mechanics` is a frozen pydantic dataclass: every parameter is checked for its type whenever one is built, also by
`dataclasses.replace`, so a preset changed by a flag cannot carry a string where the simulator does arithmetic.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic.dataclasses import dataclass

from shockwave.core.errors import InputError
from shockwave.policies.gavel.mechanism import ROUND_ROBINS

MAX_SECONDS = 365 * 24 * 3600.0
"""Longest round, restart cost or reallocation interval accepted (the reference uses 120 s, 20 s and 1000 s)."""
MAX_ROUNDS = 1_000_000
"""Most rounds a simulation may need (the canonical trace needs about 200 at 120 s, 22,000 at 1 s)."""


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
    finish_past_last_step: bool = False
    """A job whose batch-size switch rounded its progress past its last step is finished at once; the reference
    keeps it in the schedule, making no progress, until `max_failed_rounds` empty rounds give it up."""
    consolidate_gangs: bool = False
    """Place a new gang on the fullest server that fits it whole (matters with --gpus-per-server > 1)."""
    restart_cost_by_gang: tuple[tuple[int, float], ...] = ()
    """(gang size, seconds) pairs overriding restart_cost_s: a real run's start-up grows with the gang."""
    switch_cost_by_gang: tuple[tuple[int, float], ...] = ()
    """(gang size, seconds) a replayed job loses to a batch-size switch within a round (a real job checkpoints, exits
    and starts again at the new size); a gang size not listed loses its restart cost."""
    reference_policy_quirks: bool = False
    """Policies that declare `reference_quirks` behave as the reference Gavel's code does (GAVEL_SPEC §7 item 1)."""
    stale_round_start_after_idle: bool = False
    """After the cluster sat idle until an arrival, the next round's execution times are measured from the end of
    the last round that ran, gap included (the reference Gavel simulator's quirk, GAVEL_SPEC §7 item 5): it inflates
    the time records that set priorities, and the utilisation."""
    round_grid: bool = False
    """Rounds start on multiples of round_seconds and last their whole length even when every job in one finished
    sooner; an arrival waits for the next multiple (Sia's simulator steps a fixed clock, deciding every round)."""
    whole_second_epochs: bool = False
    """An epoch that ends within a round takes a whole number of seconds, as Sia's simulator steps a job (it rounds
    the time to each epoch's end): a job of one-second epochs gains or loses up to half of each. Applies to jobs
    whose throughput model knows their epochs (Sia's applications)."""
    placed_speed: bool = False
    """A rigid job whose throughput model times placements runs at the speed of the GPUs it was given (a gang split
    over more servers synchronises slower) and restarts when its GPUs per server change (Sia's simulator); other
    jobs are unaffected."""
    gavel_round_robin: str = "gavel"
    """How Gavel's mechanism turns time fractions into rounds: "gavel", its own (GAVEL_SPEC §4.3), or "sia", the
    port in Sia's artifact (`shockwave.policies.gavel.mechanism`), which recomputes its allocation every round, so
    min_realloc_interval_s does not apply to it."""
    realloc_when_cluster_empty: bool = False
    """When the last active job leaves, a recompute that is due happens at once, over no jobs, and the next one waits
    `min_realloc_interval_s` from there: the reference Gavel simulator runs its scheduling step even with no job
    active (GAVEL_SPEC §4.2), so a job arriving soon after the cluster emptied waits for the next recompute."""

    def restart_cost(self, gang: int) -> float:
        return next((cost for size, cost in self.restart_cost_by_gang if size == gang), self.restart_cost_s)

    def switch_cost(self, gang: int) -> float:
        return next((cost for size, cost in self.switch_cost_by_gang if size == gang), self.restart_cost(gang))

    def __post_init__(self) -> None:
        """Times are finite and at most a year (NaN fails every comparison): an infinite round or restart cost
        would reach the simulator's integer arithmetic as a traceback, not an answer."""
        year = f"at most a year ({MAX_SECONDS:.0f})"
        if not 0 < self.round_seconds <= MAX_SECONDS:
            raise InputError(f"--round-seconds must be > 0 and {year}, got {self.round_seconds}")
        restart_costs = [("--restart-seconds", self.restart_cost_s)]
        restart_costs += [("--restart-seconds-by-gang", cost) for _, cost in self.restart_cost_by_gang]
        restart_costs += [("--switch-seconds-by-gang", cost) for _, cost in self.switch_cost_by_gang]
        for flag, seconds in restart_costs:
            if not 0 <= seconds <= MAX_SECONDS:
                raise InputError(f"{flag}: a restart cost must be >= 0 seconds and {year}, got {seconds}")
        for flag, by_gang in (
            ("--restart-seconds-by-gang", self.restart_cost_by_gang),
            ("--switch-seconds-by-gang", self.switch_cost_by_gang),
        ):
            if any(gang < 1 for gang, _ in by_gang):
                raise InputError(f"{flag}: gang sizes must be >= 1, got {by_gang}")
        if not 0 <= self.min_realloc_interval_s <= MAX_SECONDS:
            raise InputError(f"--realloc-seconds must be >= 0 and {year}, got {self.min_realloc_interval_s}")
        if self.gavel_round_robin not in ROUND_ROBINS:
            raise InputError(
                f"gavel_round_robin must be one of {', '.join(ROUND_ROBINS)}, got {self.gavel_round_robin!r}"
            )
        if self.switch_delay_rounds not in (0, 1):
            raise InputError("switch_delay_rounds must be 0 or 1")

    def require_rounds(self, makespan_lower_bound_s: float) -> None:
        """Refuse a round far shorter than the trace's timescale: no schedule ends before the lower bound, so the
        simulation would take more than MAX_ROUNDS rounds and run for hours instead of failing."""
        rounds = makespan_lower_bound_s / self.round_seconds
        if rounds > MAX_ROUNDS:
            raise InputError(
                f"--round-seconds {self.round_seconds:g} is too short for this trace: it needs at least {rounds:.3g} "
                f"rounds (the makespan is at least {makespan_lower_bound_s:.0f} s); at most {MAX_ROUNDS} are simulated"
            )

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
        switch_cost_by_gang: dict[int, float] | None = None,
    ) -> Mechanics:
        """The preset with a measured restart cost or another reallocation interval (e.g. to match a real run)."""
        changes: dict[str, object] = {}
        if restart_cost_s is not None:
            changes["restart_cost_s"] = restart_cost_s
        if restart_cost_by_gang:
            changes["restart_cost_by_gang"] = tuple(sorted(restart_cost_by_gang.items()))
        if switch_cost_by_gang:
            changes["switch_cost_by_gang"] = tuple(sorted(switch_cost_by_gang.items()))
        if min_realloc_interval_s is not None:
            changes["min_realloc_interval_s"] = min_realloc_interval_s
        return replace(self, **changes)


PRESETS = {
    "reference": Mechanics(name="reference"),
    "gavel": Mechanics(
        name="gavel",
        round_seconds=360.0,
        restart_cost_s=0.0,
        min_realloc_interval_s=1920.0,
        stop_when_cluster_empty=False,
        deadline_factor=None,
        finish_past_last_step=True,
        stale_round_start_after_idle=True,
        realloc_when_cluster_empty=True,
        reference_policy_quirks=True,
    ),
    "corrected": Mechanics(
        name="corrected",
        round_up_progress_at_switch=False,
        stop_when_cluster_empty=False,
        accordion_profile_rule=True,
        deadline_factor=None,
        consolidate_gangs=True,
        finish_past_last_step=True,
    ),
}
PRESETS["sia"] = replace(
    PRESETS["corrected"].with_round_seconds(60.0),
    name="sia",
    consolidate_gangs=False,
    round_grid=True,
    whole_second_epochs=True,
    placed_speed=True,
    gavel_round_robin="sia",
)


def preset(name: str | None, trace_format: str = "auto") -> Mechanics:
    """The named preset; None: the one the trace format is simulated with unless another is named (Sia's workloads
    with Sia's simulator, every other trace with `corrected`)."""
    if name is None:
        name = "sia" if trace_format == "sia" else "corrected"
    try:
        return PRESETS[name]
    except KeyError:
        raise InputError(f"unknown mechanics {name!r}; choose one of {', '.join(PRESETS)}") from None
