"""`themis`: Themis's arbiter on the round loop: lease periods, the fairness filter, the PA auction, leftovers.

Time is cut into lease periods of `lease_rounds` = max(1, round(lease_s / round_seconds)) rounds, the first starting
at the first round with an active job. At the start of each period every lease has expired, so every GPU is free:

1. Filter. Every active job's rho is estimated (`rho.py`); the ceil((1 - f) N) jobs with the highest rho (ties: the
   earlier job) bid, f the fairness knob (0 <= f < 1): f = 0 auctions among all jobs (the most efficient), f near 1
   among the few furthest from fair (the fairest). The default f = 0.8 is the value Themis's evaluation uses.
2. Auction. Each bidder values its gang on each type by how many times the lease would improve its rho; the PA
   mechanism (`auction.py`) picks the allocation maximising the product of valuations and keeps for each winner the
   fraction c_i of it. A winner holds its gang from the period's first round for k_i = round(c_i x lease_rounds + d_i)
   rounds (d_i the rounding left over from its earlier wins, so that over many leases it holds c_i of them on
   average; k_i may be 0), then the gang returns to the pool.
3. Leftovers, work-conserving. Every round, GPUs no lease holds (not won, withheld by PA, freed by a job that
   finished, or not fitting any bidder's gang) go to jobs without a lease: first those that did not bid (the f
   fraction, and jobs that arrived since), then the bidders that lost, then winners whose lease ended; highest rho
   first within each group, each on its fastest type with room. Such a lease runs to the end of the period.

Every lease ends at the end of its period, so no job holds GPUs past the next auction. The default lease, 600 s, is
five of the default 120 s rounds; a shorter lease re-auctions more often, and preempts more. On several GPU types
bundles are per type (a gang never spans types), valuations use the job's rate on each type, and leftovers take the
fastest type with room.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict

from shockwave.core.errors import InputError
from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.themis.auction import Bid, partial_allocation
from shockwave.policies.themis.rho import current_rho, isolated_rate, lease_values

DEFAULT_LEASE_S = 600.0
DEFAULT_FAIRNESS_KNOB = 0.8

BIDDER, WINNER = "bidder", "winner"


@dataclass
class AuctionStats:
    __pydantic_config__ = ConfigDict(extra="forbid")  # a journal's copy has no field it does not keep
    auctions: int = 0
    bidders: int = 0
    """Summed over auctions."""
    winners: int = 0
    gpus_won: int = 0
    """GPUs in the winners' bundles, before the PA fraction."""
    gpu_rounds_withheld: int = 0
    """GPU-rounds of won bundles PA withheld, summed: what went to leftovers as the winners' hidden payment."""
    fraction_sum: float = 0.0
    """Sum of the winners' c_i."""
    milp_auctions: int = 0
    """Auctions too large for the dynamic program, solved with HiGHS."""

    def summary(self) -> dict[str, Any]:
        return {
            "auctions": self.auctions,
            "mean_bidders": self.bidders / self.auctions if self.auctions else 0.0,
            "mean_winners": self.winners / self.auctions if self.auctions else 0.0,
            "mean_fraction": self.fraction_sum / self.winners if self.winners else 0.0,
            "gpus_won": self.gpus_won,
            "gpu_rounds_withheld": self.gpu_rounds_withheld,
            "milp_auctions": self.milp_auctions,
        }


class ThemisPolicy(Policy):
    """Themis: partial-allocation auctions of leases among the jobs furthest from finish-time fair."""

    name = "themis"
    plans_gpu_types = True
    kept = ("period_start", "leases", "roles", "carry", "stats")
    period_start: int | None
    """Round index where the current lease period began (None before the first)."""
    leases: dict[int, tuple[str, int]]
    """Job -> (GPU type, round index its lease ends before)."""
    roles: dict[int, str]
    """The current period's bidders and winners (others did not bid)."""
    carry: dict[int, float]
    """Each job's rounding left over from the PA fractions of its wins, in rounds (in [-0.5, 0.5))."""
    stats: AuctionStats

    def __init__(self, lease_s: float = DEFAULT_LEASE_S, fairness_knob: float = DEFAULT_FAIRNESS_KNOB) -> None:
        if not (lease_s > 0 and math.isfinite(lease_s)):
            raise InputError(f"policy 'themis': lease_s must be a positive number of seconds, got {lease_s!r}")
        if not 0.0 <= fairness_knob < 1.0:
            raise InputError(f"policy 'themis': fairness_knob must be in [0, 1), got {fairness_knob!r}")
        self.lease_s, self.fairness_knob = lease_s, fairness_knob
        self.period_start = None
        self.leases = {}
        self.roles = {}
        self.carry = {}
        self.stats = AuctionStats()

    def lease_rounds(self, view: SchedulerView) -> int:
        return max(1, round(self.lease_s / view.round_seconds))

    # -- what happened -----------------------------------------------------------------------------------------------
    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        self.leases.pop(job.id, None)
        self.roles.pop(job.id, None)
        self.carry.pop(job.id, None)

    def summary(self) -> dict[str, Any]:
        return {
            "themis": {"lease_s": self.lease_s, "fairness_knob": self.fairness_knob, **self.stats.summary()},
        }

    # -- deciding ----------------------------------------------------------------------------------------------------
    def plan(self, view: SchedulerView) -> RoundPlan:
        if not view.jobs:
            return RoundPlan()
        now_round = view.round_index
        r_iso = {j: isolated_rate(job, view.cluster, len(view.jobs)) for j, job in view.jobs.items()}
        rhos = {j: current_rho(job, view.now, r_iso[j]) for j, job in view.jobs.items()}
        if self.period_start is None or now_round >= self.period_start + self.lease_rounds(view):
            self._auction(view, rhos, r_iso)
        assert self.period_start is not None
        period_end = self.period_start + self.lease_rounds(view)
        self.leases = {  # a lease also ends when its job switched to a batch size it cannot run there
            j: lease
            for j, lease in self.leases.items()
            if j in view.jobs and now_round < lease[1] and view.jobs[j].rate(lease[0]) > 0
        }
        free = {pool.gpu_type: pool.gpus for pool in view.cluster.pools}
        assignments: list[Assignment] = []
        holders = sorted(self.leases, key=lambda j: (self.roles.get(j) != WINNER, -rhos[j], j))
        for job_id in holders:
            gpu_type, _ = self.leases[job_id]
            gang = view.jobs[job_id].scale_factor
            free[gpu_type] -= gang
            assignments.append(Assignment((job_id,), gpu_type, gang))
        group = {None: 0, BIDDER: 1, WINNER: 2}
        waiting = sorted(
            (j for j in view.jobs if j not in self.leases), key=lambda j: (group[self.roles.get(j)], -rhos[j], j)
        )
        for job_id in waiting:
            job = view.jobs[job_id]
            fits = [t for t in view.cluster.types if free[t] >= job.scale_factor and job.rate(t) > 0]
            if not fits:
                continue
            gpu_type = max(fits, key=job.rate)  # ties: the cluster's order
            free[gpu_type] -= job.scale_factor
            self.leases[job_id] = (gpu_type, period_end)
            assignments.append(Assignment((job_id,), gpu_type, job.scale_factor))
        return RoundPlan(tuple(assignments))

    def _auction(self, view: SchedulerView, rhos: dict[int, float], r_iso: dict[int, float]) -> None:
        """A new lease period: every lease has expired; the 1-f fraction furthest from fair bids for all GPUs
        (`rhos` and `r_iso`: each job's rho and isolated rate now)."""
        lease_rounds = self.lease_rounds(view)
        self.period_start = view.round_index
        self.leases, self.roles = {}, {}
        free = {pool.gpu_type: pool.gpus for pool in view.cluster.pools}
        ranked = sorted(view.jobs, key=lambda j: (-rhos[j], j))
        count = min(len(ranked), math.ceil((1.0 - self.fairness_knob) * len(ranked) - 1e-9))
        bids = []
        for job_id in ranked[:count]:
            job = view.jobs[job_id]
            self.roles[job_id] = BIDDER
            values = lease_values(job, view.now, r_iso[job_id], lease_rounds * view.round_seconds, free)
            if values:
                bids.append(Bid(job_id, job.scale_factor, values))
        outcome = partial_allocation(bids, free)
        self.stats.auctions += 1
        self.stats.bidders += count
        self.stats.milp_auctions += outcome.method == "milp"
        for job_id, gpu_type in outcome.won.items():
            fraction = outcome.fractions[job_id]
            share = fraction * lease_rounds + self.carry.get(job_id, 0.0)
            rounds = min(lease_rounds, max(0, math.floor(share + 0.5)))
            self.carry[job_id] = share - rounds
            self.roles[job_id] = WINNER
            gang = view.jobs[job_id].scale_factor
            self.stats.winners += 1
            self.stats.gpus_won += gang
            self.stats.fraction_sum += fraction
            self.stats.gpu_rounds_withheld += gang * (lease_rounds - rounds)
            if rounds > 0:
                self.leases[job_id] = (gpu_type, self.period_start + rounds)
