"""Any policy, shared between tenants: the tenants' shares first (`shares.py`), then the policy among each tenant's
jobs, with caps and guarantees holding in every round; the simulator, the runtime and the service build the same
wrapper (`shockwave.assembly.inputs`), so the same code decides in all three.

Each round the wrapped policy plans as it would alone (most deserving first, the plan contract). Then, tenant by
tenant, its planned assignments are kept in that order while they fit the tenant's whole GPUs of that type for the
round and its cap. A tenant left with GPUs of its own share runs its other jobs there: those the policy planned but
that did not fit (first, on any type of its share they can run on), then the others, least served first (the
fewest GPU-seconds so far). GPUs nobody's share uses are lent: to the assignments that did not fit, in the plan's
order, then to any job that fits, least served first, caps always holding. A lent GPU goes back to its tenant at the
next round it has a job for it (the job on it is preempted at the round's boundary, as Kueue reclaims borrowed
quota). A pair of jobs sharing GPUs is kept only where both are one tenant's.

What the tenants received is kept as plain data (journaled with the policy): GPU-seconds per type and equal-share
progress (GPU-seconds weighted by `progress_per_gpu_second`) per tenant, over the whole run and over the rounds in
which every tenant had jobs waiting (`contended`): the share a tenant's weight entitles it to is measured there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.tenants.shares import Demand, Shares, fair_shares, progress_per_gpu_second, rounded
from shockwave.workload_model.tenants import Tenant, Tenants

CALIBRATION_PRIOR_S = 600.0
"""Progress-seconds a tenant's calibration starts from on both sides: ten GPU-minutes of evidence before it moves
(3600 left a tenant of two GPUs mostly at its prior: 9.5% over its share on one trace, 2.6% at 600)."""
CALIBRATION_HALF_LIFE_S = 900.0
"""The evidence halves every 15 minutes: the jobs a policy runs for a tenant change as its queue does (a fifo
tenant's oldest jobs now, others later), and the calibration follows the ones running now. Measured on 36 jobs
shared 1:2:3 on three types: cumulative evidence left fifo's middle tenant 5.9% over its share; halving every
~13 minutes of 120-s rounds, within 1%."""
DEFICIT_ROUNDS = 10.0
"""The progress a tenant is behind its weight's share (over contended rounds) that doubles its weight, in rounds of
the whole cluster's GPU-seconds: the shares' own error (a tenant's jobs worth more or less than its calibrated value,
rounding) is integrated and paid back, so the share of progress converges on the weight's. Measured on 36 jobs
shared 1:2:3 on 4+4+4 GPUs, four fresh seeds x three policies: without it the worst tenant was 7.2% off its share."""
DEFICIT_BOOST = (0.5, 2.0)
"""The most a deficit (or surplus) may scale a tenant's weight by."""
OWED_LIMIT = 2.0
"""Most GPUs rounding may owe (or have lent) a tenant on a type: a share its jobs' gangs cannot use is not banked."""


class TenantSharing(Policy):
    """`inner` with the cluster shared between `tenants()` (a callable, so a reloaded file takes effect at the next
    round)."""

    kept = (
        "inner",
        "owed",
        "believed",
        "made",
        "evidence_at",
        "gpu_seconds",
        "progress",
        "contended_progress",
        "contended_rounds",
        "deficit",
        "round_gains",
    )
    inner: Policy
    owed: dict[str, dict[str, float]]
    """Tenant -> type -> GPUs rounding owes it (negative: it was given more than its share)."""
    believed: dict[str, float]
    """Tenant -> the progress its GPUs were worth by its jobs' average value (`Demand.value`) ..."""
    made: dict[str, float]
    """... and what its jobs really made of them: their ratio calibrates the tenant's value."""
    evidence_at: float | None
    """When `believed` and `made` were last decayed (CALIBRATION_HALF_LIFE_S)."""
    gpu_seconds: dict[str, dict[str, float]]
    progress: dict[str, float]
    contended_progress: dict[str, float]
    contended_rounds: int
    deficit: dict[str, float]
    """Tenant -> equal-share progress it is behind its weight's share of the contended rounds' (negative: ahead)."""
    round_gains: dict[str, float]
    """What each tenant gained in the last round, while it is contended (settled into `deficit` at the next)."""

    def __init__(self, inner: Policy, tenants: Callable[[], Tenants]) -> None:
        self.inner, self.tenants = inner, tenants
        self.name = inner.name
        self.plans_gpu_types = inner.plans_gpu_types
        self.places_gangs_whole = inner.places_gangs_whole
        self.owed: dict[str, dict[str, float]] = {}
        self.believed: dict[str, float] = {}
        self.made: dict[str, float] = {}
        self.evidence_at: float | None = None
        self.gpu_seconds: dict[str, dict[str, float]] = {}
        self.progress: dict[str, float] = {}
        self.contended_progress: dict[str, float] = {}
        self.contended_rounds = 0
        self.deficit: dict[str, float] = {}
        self.round_gains: dict[str, float] = {}
        self._round: dict[int, tuple[str, float]] = {}
        """Each job the last plan ran: its GPU type (what its next `round_executed` ran on) and the value per
        GPU-second its tenant's share was counted at there."""
        self._contended = False

    # -- the round -------------------------------------------------------------------------------------------------
    def plan(self, view: SchedulerView) -> RoundPlan:
        wanted = self.inner.plan(view)
        tenants = self.tenants()
        self._decay(view.now)
        mine: dict[str, list[JobState]] = {name: [] for name in tenants.tenants}
        for job in view.jobs.values():
            mine.setdefault(job.spec.tenant or "", []).append(job)
        demands = {
            name: Demand.of(jobs, view.cluster).calibrated(self._calibration(name))
            for name, jobs in mine.items()
            if name in tenants.tenants
        }
        self._settle(tenants, demands)
        scale = DEFICIT_ROUNDS * view.cluster.gpus * view.round_seconds
        low, high = DEFICIT_BOOST
        boost = {name: min(high, max(low, 1.0 + self.deficit.get(name, 0.0) / scale)) for name in tenants.tenants}
        shares = fair_shares(tenants.tenants, demands, view.cluster, boost)
        whole = rounded(shares, self.owed, view.cluster)
        self._owe(shares, whole, demands)
        arbiter = _Arbiter(view, tenants, whole)
        plan = arbiter.arbitrate(wanted)
        self._round = {
            job: (a.gpu_type, demands[view.jobs[job].spec.tenant or ""].value[a.gpu_type])
            for a in plan.assignments
            for job in a.jobs
        }
        self._contended = all(_contends(tenants.tenants[name], demands.get(name), shares[name]) for name in shares)
        self.contended_rounds += self._contended
        return plan

    def _settle(self, tenants: Tenants, demands: Mapping[str, Demand]) -> None:
        """The last contended round's gains against the weights' shares of them, into each tenant's deficit; a tenant
        without jobs owes and is owed nothing."""
        total = sum(self.round_gains.values())
        weights = sum(t.weight for t in tenants.tenants.values())
        if total > 0:
            for name, tenant in tenants.tenants.items():
                entitled = tenant.weight / weights * total
                self.deficit[name] = self.deficit.get(name, 0.0) + entitled - self.round_gains.get(name, 0.0)
        self.round_gains = {}
        for name in list(self.deficit):
            if name not in demands or demands[name].gpus == 0:
                del self.deficit[name]

    def _decay(self, now: float) -> None:
        if self.evidence_at is not None and now > self.evidence_at:
            keep = 0.5 ** ((now - self.evidence_at) / CALIBRATION_HALF_LIFE_S)
            self.made = {name: value * keep for name, value in self.made.items()}
            self.believed = {name: value * keep for name, value in self.believed.items()}
        self.evidence_at = now

    def _calibration(self, name: str) -> float:
        """What the tenant's jobs made of their GPUs over what their average value promised (1 before evidence:
        CALIBRATION_PRIOR_S of progress on each side)."""
        return (self.made.get(name, 0.0) + CALIBRATION_PRIOR_S) / (self.believed.get(name, 0.0) + CALIBRATION_PRIOR_S)

    def _owe(self, shares: Shares, whole: dict[str, dict[str, int]], demands: Mapping[str, Demand]) -> None:
        """What rounding gave each tenant less (or more) than its share, to make up in later rounds; a tenant with
        no jobs is owed nothing."""
        for name, by_type in shares.items():
            if name not in demands or demands[name].gpus == 0:
                self.owed.pop(name, None)
                continue
            owed = self.owed.setdefault(name, {})
            for gpu_type, share in by_type.items():
                value = owed.get(gpu_type, 0.0) + share - whole[name][gpu_type]
                owed[gpu_type] = max(-OWED_LIMIT, min(OWED_LIMIT, value))

    # -- hooks: the wrapped policy hears everything; the accounts are kept here ------------------------------------
    def job_added(self, view: SchedulerView, job: JobState) -> None:
        self.inner.job_added(view, job)

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        self.inner.job_removed(view, job)

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int | float) -> None:
        self.inner.round_executed(view, job, exec_s, steps)
        name, given = job.spec.tenant or "", self._round.get(job.id)
        if given is None or exec_s <= 0:
            return
        gpu_type, counted = given
        gpu_s = job.scale_factor * exec_s
        by_type = self.gpu_seconds.setdefault(name, {})
        by_type[gpu_type] = by_type.get(gpu_type, 0.0) + gpu_s
        gained = gpu_s * progress_per_gpu_second(job, view.cluster).get(gpu_type, 0.0)
        self.progress[name] = self.progress.get(name, 0.0) + gained
        self.made[name] = self.made.get(name, 0.0) + gained
        self.believed[name] = self.believed.get(name, 0.0) + gpu_s * counted / self._calibration(name)
        if self._contended:
            self.contended_progress[name] = self.contended_progress.get(name, 0.0) + gained
            self.round_gains[name] = self.round_gains.get(name, 0.0) + gained

    def round_failed(self, view: SchedulerView, job: JobState) -> None:
        self.inner.round_failed(view, job)

    def cluster_emptied(self, view: SchedulerView) -> None:
        self.inner.cluster_emptied(view)

    def summary(self) -> dict[str, Any]:
        tenants = self.tenants().tenants
        weights = sum(t.weight for t in tenants.values())
        contended = sum(self.contended_progress.values())
        rows = [
            {
                "tenant": name,
                "weight": tenant.weight,
                "entitled_share": tenant.weight / weights,
                "gpu_seconds_by_type": dict(sorted(self.gpu_seconds.get(name, {}).items())),
                "gpu_seconds": sum(self.gpu_seconds.get(name, {}).values()),
                "progress_s": self.progress.get(name, 0.0),
                "contended_share": self.contended_progress.get(name, 0.0) / contended if contended > 0 else None,
            }
            for name, tenant in tenants.items()
        ]
        return {**self.inner.summary(), "tenants": rows, "contended_rounds": self.contended_rounds}


def _contends(tenant: Tenant, demand: Demand | None, share: Mapping[str, float]) -> bool:
    """Whether the tenant's fair share (before rounding, so that what rounding gave it does not decide) is below
    what its jobs could use and its cap: the round measures what the weights entitle the tenants to when all do."""
    if demand is None or demand.gpus == 0:
        return False
    room = min(demand.gpus, tenant.max_gpus or demand.gpus)
    return sum(share.values()) < room - 1e-6


class _Arbiter:
    """One round's plan cut to the tenants' whole GPUs and caps, then filled (see the module)."""

    def __init__(self, view: SchedulerView, tenants: Tenants, whole: dict[str, dict[str, int]]) -> None:
        self.view, self.tenants, self.whole = view, tenants.tenants, whole
        self.free = {t: view.cluster.pool(t).gpus for t in view.cluster.types}
        self.held: dict[str, Counter[str]] = {n: Counter() for n in self.tenants}
        self.chosen: list[Assignment] = []
        self.running: set[int] = set()

    def arbitrate(self, wanted: RoundPlan) -> RoundPlan:
        misfits: list[Assignment] = []
        for assignment in wanted.assignments:
            if not self._take(assignment, lend=False):
                misfits.append(assignment)
        for name in self.tenants:  # each tenant's own share: its misfits moved, then its other jobs
            for assignment in misfits:
                if self._tenant(assignment) == name:
                    self._move(assignment, lend=False)
            for job in self._waiting(name):
                self._place(job, lend=False)
        for assignment in misfits:  # lent: the policy's wishes first, then anyone who fits
            self._take(assignment, lend=True)
        for job in self._waiting(None):
            self._place(job, lend=True)
        return RoundPlan(tuple(self.chosen))

    def _tenant(self, assignment: Assignment) -> str | None:
        names = {self.view.jobs[j].spec.tenant for j in assignment.jobs}
        return names.pop() if len(names) == 1 else None

    def _fits(self, name: str | None, gpu_type: str, gpus: int, lend: bool) -> bool:
        if name is None or name not in self.tenants or self.free[gpu_type] < gpus:
            return False
        cap = self.tenants[name].max_gpus
        if cap is not None and sum(self.held[name].values()) + gpus > cap:
            return False
        return lend or self.held[name][gpu_type] + gpus <= self.whole[name][gpu_type]

    def _take(self, assignment: Assignment, lend: bool) -> bool:
        if not self.running.isdisjoint(assignment.jobs):
            return False
        name = self._tenant(assignment)
        if not self._fits(name, assignment.gpu_type, assignment.gpus, lend):
            return False
        assert name is not None
        self.free[assignment.gpu_type] -= assignment.gpus
        self.held[name][assignment.gpu_type] += assignment.gpus
        self.chosen.append(assignment)
        self.running.update(assignment.jobs)
        return True

    def _move(self, assignment: Assignment, lend: bool) -> bool:
        """The assignment on its own type, or on another its jobs can all run on (an elastic job keeps its own)."""
        if self._take(assignment, lend):
            return True
        jobs = [self.view.jobs[j] for j in assignment.jobs]
        if len(jobs) != 1 or jobs[0].spec.elastic:
            return False
        return self._place(jobs[0], lend)

    def _place(self, job: JobState, lend: bool) -> bool:
        """The job alone on its gang, on the type it gains most on among those that fit."""
        if job.id in self.running:
            return False
        gains = progress_per_gpu_second(job, self.view.cluster)
        for gpu_type in sorted(gains, key=lambda t: -gains[t]):
            if self._take(Assignment((job.id,), gpu_type, job.scale_factor), lend):
                return True
        return False

    def _waiting(self, name: str | None) -> list[JobState]:
        """Jobs not running this round (of tenant `name`, or everyone's), least served first, then by arrival."""
        jobs = [
            j for j in self.view.jobs.values() if j.id not in self.running and (name is None or j.spec.tenant == name)
        ]
        return sorted(jobs, key=lambda j: (j.run_time_s * j.scale_factor, j.id))
