"""The simulator's driver of the scheduling loop (`shockwave.core.loop`): modelled execution on a simulated clock.

Time moves in exactly one place (`_move_clock`): to the end of the round that just ran (its last job's finish),
or, when nothing ran, to the next arrival. Each boundary then: settle the finished round, let adaptive jobs ask for
new batch sizes, admit arrivals; the loop asks the policy for the next round and this driver launches it.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shockwave.core.clock import VirtualClock
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.loop import (
    RoundRecord,
    SchedulingLoop,
    admission_rates,
    colocation_from,
    colocation_on_jobs_scale,
    rates_after_switch,
)
from shockwave.core.plan import Assignment, PlanError, RoundPlan
from shockwave.core.policy import Policy
from shockwave.core.slo import has_slo, violates_slo
from shockwave.core.state import JobState, rescale_to_batch_size
from shockwave.results.metrics import JobOutcome, cost_fields, slo_fields, summarize_run, utilization_by_type
from shockwave.simulator.adaptation import next_planned_switch, planned_batch_size, requested_batch_size
from shockwave.simulator.epochs import through_epochs
from shockwave.simulator.mechanics import Mechanics
from shockwave.simulator.placement import place
from shockwave.workload_model.goodput import Advanced, goodput_of
from shockwave.workload_model.job import Job
from shockwave.workload_model.measurements import MeasuredJob, Measurements
from shockwave.workload_model.prices import Prices
from shockwave.workload_model.profile import JobProfile, isolated_time
from shockwave.workload_model.summary import cluster_makespan_lower_bound
from shockwave.workload_model.throughput import KnowsEpochs, ThroughputModel, TimesPlacements

log = logging.getLogger(__name__)


@dataclass
class Switched:
    """Training after a batch-size switch within the round (replaying a real run: the job checkpointed at the
    epoch its schedule changes size, and started again at the new one)."""

    batch_size: int
    steps: int | float
    train_s: float


@dataclass(slots=True)
class Launch:
    job: JobState
    steps: int | float
    finish: float
    gpus: tuple[int, ...]
    startup_s: float = 0.0
    """Time the job spends starting before it trains (replaying a real run: every start and restart)."""
    holds_gpus: bool = True
    """False for the second job of a pair: the GPUs' busy time is counted once, with the first."""
    train_s: float | None = None
    """Seconds `steps` take when switches follow them (else the round's time after the start-up)."""
    switched: list[Switched] = field(default_factory=list)
    learned: tuple[str, Advanced] | None = None
    """An elastic job's round on a GPU type: the batch it ends with and the steps it timed first."""


@dataclass(frozen=True)
class Progress:
    """Where a run is, reported after every round (for progress bars, and for comparing a run round by round with
    another simulator's log)."""

    now_s: float
    rounds: int
    finished_jobs: int
    total_jobs: int
    placement: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """The round just launched: each running job's GPU ids (a pair's two jobs on the same ones)."""


@dataclass
class SimulationResult:
    summary: dict[str, Any]
    rounds: list[RoundRecord] = field(default_factory=list)


class Simulator:
    def __init__(
        self,
        jobs: list[Job],
        profiles: list[JobProfile],
        throughputs: ThroughputModel,
        cluster: ClusterSpec,
        policy: Policy,
        mechanics: Mechanics,
        on_round: Callable[[Progress], None] | None = None,
        *,
        replay: bool = False,
        window: range | None = None,
        prices: Prices | None = None,
        measured: Measurements | None = None,
    ) -> None:
        self.on_round, self.replay = on_round, replay
        self.measured = {} if measured is None else measured.jobs
        """Jobs of a real run as it measured them (`shockwave.workload_model.measurements`): their truth."""
        self.round_lengths = () if measured is None else measured.rounds
        """How long each of a real run's rounds lasted (a replay's n-th round lasts as long; the mechanics' after)."""
        self.starts: Counter[int] = Counter()
        """Starts of each job so far, each switch within a round included (a real switch starts a lease): a measured
        job's n-th costs its n-th measured start-up."""
        self.switches: Counter[int] = Counter()
        """Switches of each job so far within a round (a measured job's n-th costs its n-th measured switch)."""
        self.prices = prices
        """What the result's cost is counted in (None: Gavel's default prices, where they cover the cluster)."""
        self.window = window
        """Job ids whose completion ends the run and whose outcomes the metrics cover (all jobs when None)."""
        self.switched: set[int] = set()
        """Jobs that changed batch size since they last ran (replaying a real run: they restart to switch)."""
        self.starting: dict[int, float] = {}
        """Start-up seconds still ahead of jobs whose start-up is longer than a round (replaying a real run)."""
        self.specs, self.profiles = jobs, profiles
        self.throughputs, self.cluster, self.policy, self.mechanics = throughputs, cluster, policy, mechanics
        self.clock = VirtualClock(self._round_start_after(jobs[0].arrival) if jobs else 0.0)
        self.timed = throughputs if mechanics.placed_speed and isinstance(throughputs, TimesPlacements) else None
        """The throughput model where rigid jobs run at the speed of the GPUs they were given (`placed_speed`)."""
        self.epochs = throughputs if mechanics.whole_second_epochs and isinstance(throughputs, KnowsEpochs) else None
        """The throughput model whose epoch ends rigid jobs reach on whole seconds (`whole_second_epochs`)."""
        self.goodput = goodput_of(throughputs)
        if self.goodput is None and any(job.elastic for job in jobs):
            raise InputError(f"elastic jobs need a goodput model; the throughput model {throughputs.name!r} has none")
        self.loop = SchedulingLoop(
            policy,
            cluster,
            mechanics.round_seconds,
            self.clock.now,
            # a replay's jobs train at measured rates: pairs on their scale, not the table's
            colocation=colocation_from(throughputs) if measured is None else colocation_on_jobs_scale(throughputs),
            goodput=self.goodput,
        )
        self.view = self.loop.view
        self.queue = deque(range(len(jobs)))
        self.finished: dict[int, JobState] = {}
        self.running: list[Launch] = []
        self.placements: list[dict[int, tuple[int, ...]]] = []
        self.gpu_busy = [0.0] * cluster.gpus
        self.round_start = 0.0
        self.round_end: float | None = None

    # -- the clock -------------------------------------------------------------------------------------------------
    def _move_clock(self) -> None:
        """To the end of the round that ran; when nothing ran, to the next arrival."""
        latest = max((launch.finish for launch in self.running), default=0.0)
        if latest > 0:
            if self.round_end is not None:
                self.round_start = self.round_end
            self.round_end = latest
            self.clock.move_to(latest)
        elif self.queue:
            self.clock.move_to(self._round_start_after(self.specs[self.queue[0]].arrival))
        else:
            # Nothing ran and nothing will arrive: let a round of time pass so throttled policies can react.
            self.clock.move_to(self.clock.now() + self._round_length())
        stale = self.mechanics.stale_round_start_after_idle
        if latest <= 0 and not stale and not self.mechanics.stop_when_cluster_empty:
            self.round_start = self.round_end = self.clock.now()  # no stale round start after an idle gap

    # -- settling a finished round ---------------------------------------------------------------------------------
    def advance(self, loop: SchedulingLoop) -> None:
        started, ran = self.clock.now(), bool(self.running)
        self._move_clock()
        previous = self.placements[-2] if len(self.placements) >= 2 else None
        for launch in sorted(self.running, key=lambda launch: (-launch.finish, launch.job.id)):
            self._settle(launch, previous)
        self.running = []
        self._request_batch_sizes()
        if (self.replay or self.mechanics.round_grid) and ran and (self.view.jobs or self.queue):
            self._wait_out_round(started)

    def _round_start_after(self, arrival: float) -> float:
        """When a job arriving at an idle cluster is first planned: at once, or on a fixed clock (`round_grid`) at
        the first multiple of the round at or after it, never before the first round's end."""
        if not self.mechanics.round_grid:
            return arrival
        length = self.mechanics.round_seconds
        return max(1, math.ceil(arrival / length)) * length

    def _wait_out_round(self, started: float) -> None:
        """A replayed run's round, or any on a fixed clock (`round_grid`), lasts its whole length even when every
        job in it finished sooner, as the runtime's rounds do: GPUs freed mid-round wait for the next decision (only
        the run's end does not wait)."""
        end = started + self._round_length()
        if end > self.clock.now():
            self.clock.move_to(end)
            self.round_end = end

    def _settle(self, launch: Launch, previous: dict[int, tuple[int, ...]] | None) -> None:
        job, m = launch.job, self.mechanics
        exec_s = launch.finish - self.round_start
        factor = 1.0
        if (  # cheapest tests first: a restart that costs nothing changes nothing (factor (x - 0) / x is 1)
            exec_s != 0
            and exec_s > m.round_seconds - m.restart_cost_margin_s
            and not self._starts_up(job)
            and (restart_cost := self._restart_cost(job)) != 0
            and previous is not None
            and self._restarts(job.id, launch.gpus, previous)
        ):
            cost = min(restart_cost, exec_s)
            factor = (exec_s - cost) / exec_s
            exec_s -= cost
        steps = launch.steps if factor == 1.0 else self._whole(job, launch.steps * factor)
        job.last_finish_s = launch.finish
        job.run_time_s += exec_s
        if launch.learned is not None:
            gpu_type, advanced = launch.learned
            job.training = advanced.training
            job.measured.setdefault(gpu_type, []).extend(advanced.measured)
        completed = False
        # some GPU of the gang got no steps: a failed round (but for the last of a job's work, which whole-second
        # epochs may do in no time)
        if exec_s <= 0 and steps // job.scale_factor <= 0 and not 0 < job.remaining_steps <= steps:
            completed = self.loop.stalled(job) >= m.max_failed_rounds
            if completed and job.remaining_steps <= 0:
                log.debug("job %d ended %d rounds after its last step (reference quirk)", job.id, job.failures)
            elif completed:
                log.warning("job %d made no progress in %d rounds; giving up on it", job.id, job.failures)
        else:
            job.steps_done += steps
            if job.spec.continuous and math.isclose(job.steps_done, job.total_steps, rel_tol=1e-12):
                job.steps_done = job.total_steps  # not a rounding error's sliver short of done
            self.loop.progressed(job, exec_s - launch.startup_s if launch.train_s is None else launch.train_s, steps)
            for switched in launch.switched:
                self._switch_batch_size(job, switched.batch_size, restarted=True)
                job.steps_done += switched.steps
                if switched.steps > 0:
                    self.loop.progressed(job, switched.train_s, switched.steps)
            over_deadline = m.deadline_factor is not None and job.run_time_s > int(
                int(job.profile.t_isolated) * m.deadline_factor
            )
            completed = job.remaining_steps <= 0 or over_deadline
            for gpu in launch.gpus if launch.holds_gpus else ():
                self.gpu_busy[gpu] += exec_s
        if job.pending_batch_size is not None:
            new_bs, job.pending_batch_size = job.pending_batch_size, None
            self._switch_batch_size(job, new_bs)
        if completed or (m.finish_past_last_step and job.remaining_steps <= 0):
            self.loop.remove(job)
            self.finished[job.id] = job

    def _switch_batch_size(self, job: JobState, new_bs: int, *, restarted: bool = False) -> None:
        """`restarted`: the job already paid the switch within the round (`_switch_within_round`); otherwise a
        replayed job restarts at the new size in its next round."""
        rates = self._rates_after_switch(job, new_bs)
        if rates is None:
            return
        if self.replay and not restarted:  # the real job checkpointed and restarted at the new batch size
            self.switched.add(job.id)
        self.loop.switch_batch_size(job, new_bs, rates, round_up_progress=self.mechanics.round_up_progress_at_switch)

    def _rates_after_switch(self, job: JobState, new_bs: int) -> dict[str, float] | None:
        """The job's rates at `new_bs`, or None where the switch is ignored: a job that started at its family's
        largest batch size keeps it, and the reference ignores switches to batch sizes it has no throughput for."""
        if job.initial_batch_size == job.family.max_batch_size:
            return None
        return rates_after_switch(job, new_bs, self.throughputs, self._own_rates(job.id, new_bs), self.cluster)

    def _own_rates(self, job_id: int, batch_size: int) -> dict[str, float]:
        """The job's measured rate at `batch_size` on each GPU type it was measured on there."""
        own = self.measured.get(job_id)
        return {} if own is None else own.rates_at(batch_size)

    def _request_batch_sizes(self) -> None:
        for job in self.view.jobs.values():
            if self.replay:  # a real job switched as it asked: follow its schedule without delay
                planned = planned_batch_size(job)
                if planned is not None:
                    self._switch_batch_size(job, planned)
                continue
            wanted = requested_batch_size(job, profile_rule=self.mechanics.accordion_profile_rule)
            if wanted is not None and self.mechanics.switch_delay_rounds == 0:
                self._switch_batch_size(job, wanted)
            elif wanted is not None:
                job.pending_batch_size = wanted

    # -- a round boundary --------------------------------------------------------------------------------------------
    def all_settled(self) -> bool:
        if self.window is not None:
            return all(job in self.finished for job in self.window)
        return len(self.finished) >= len(self.specs)

    def admit(self, loop: SchedulingLoop) -> None:
        while self.queue and self.specs[self.queue[0]].arrival <= self.view.now:
            index = self.queue.popleft()
            spec, profile = self.specs[index], self.profiles[index]
            rates = admission_rates(self.throughputs, spec.model, spec.batch_size, spec.scale_factor, self.cluster)
            rates.update(self._own_rates(index, spec.batch_size))
            loop.admit(JobState.admit(index, spec, profile, rates))

    def idle(self, loop: SchedulingLoop) -> bool:
        """Wait for the next arrival (the next `advance` moves the clock there), unless none is to come or the
        reference's quirk ends the run when the cluster empties."""
        if self.mechanics.realloc_when_cluster_empty:
            self.policy.cluster_emptied(self.view)
        return not self.mechanics.stop_when_cluster_empty and bool(self.queue)

    def launch(self, loop: SchedulingLoop, plan: RoundPlan) -> RoundPlan:
        previous = self.placements[-1] if self.placements else {}
        consolidate = self.mechanics.consolidate_gangs or self.policy.places_gangs_whole
        placement = place(plan, previous, self.cluster, consolidate=consolidate)
        self.placements.append(placement)
        self.running = []
        for assignment in plan.assignments:
            self.running.extend(self._launches(assignment, placement, previous))
        self.starting = {j: left for j, left in self.starting.items() if j in placement}
        log.debug("round %d at %.1f s: jobs %s", self.view.round_index, self.view.now, sorted(placement))
        return plan

    def _launches(
        self, assignment: Assignment, placement: dict[int, tuple[int, ...]], previous: dict[int, tuple[int, ...]]
    ) -> list[Launch]:
        """The round of one assignment: each job's steps at its rate there; a pair's jobs both end when the slower
        one does (the reference's pair entry ends at its later finish, spec §4.5)."""
        jobs = [self.view.jobs[j] for j in assignment.jobs]
        rates = [job.rate(assignment.gpu_type) for job in jobs]
        if len(jobs) == 2:
            pair = self.view.colocated(jobs[0], jobs[1], assignment.gpu_type)
            if pair is None or min(pair) <= 0:
                raise PlanError(f"policy {self.policy.name!r} paired jobs {assignment.jobs} that cannot share GPUs")
            rates = list(pair)
        elif self.timed is not None and not jobs[0].spec.elastic:
            rates = [self._placed_rate(jobs[0], assignment.gpu_type, placement[jobs[0].id])]
        now, length = self.view.now, self._round_length()
        launches = []
        for job, rate in zip(jobs, rates, strict=True):
            gpus = placement[job.id]
            startup = 0.0  # a job whose restarts cost no time at its round's start: whether it restarts is moot here
            if job.spec.elastic or self._starts_up(job):
                restarting = self._restarts(job.id, gpus, previous) or job.id in self.switched
                startup = self._startup(job, restarting=restarting)
                if job.spec.elastic:
                    launches.append(self._elastic_launch(job, assignment.gpu_type, gpus, startup, restarting))
                    continue
            if self.epochs is not None:
                steps, trained = self._through_epochs(job, rate, length - startup)
                finish = now + startup + trained
            else:
                steps = min(self._whole(job, rate * (length - startup)), job.remaining_steps)
                finish = max(now, now + startup + steps / rate)
            launch = Launch(job, steps, finish, gpus, startup, holds_gpus=not launches)
            if self.replay and len(jobs) == 1:
                self._switch_within_round(launch, rate, assignment.gpu_type)
            launches.append(launch)
        if len(launches) > 1:
            end = max(launch.finish for launch in launches)
            for launch in launches:
                launch.finish = end
        return launches

    def _elastic_launch(
        self, job: JobState, gpu_type: str, gpus: tuple[int, ...], startup: float, restarting: bool
    ) -> Launch:
        """A goodput-adaptive job's round: after its start-up, it trains on these GPUs for the rest of the round,
        or until it is done (what it learns is the job's once the round is settled)."""
        assert self.goodput is not None  # __init__ refuses elastic jobs without a goodput model
        now, length = self.view.now, self._round_length()
        advanced = self.goodput.advance(
            job.family.name,
            gpu_type,
            self._per_server(gpus),
            job.steps_done,
            length - startup,
            training=job.training,
            measured=job.measured.get(gpu_type, ()),
            restarted=restarting,
            whole_second_epochs=self.mechanics.whole_second_epochs,
        )
        finish = now + startup + advanced.trained_s
        steps = advanced.done - job.steps_done
        return Launch(job, steps, finish, gpus, startup, train_s=advanced.trained_s, learned=(gpu_type, advanced))

    def _through_epochs(self, job: JobState, rate: float, seconds: float) -> tuple[int | float, float]:
        """(steps, seconds trained) of a rigid job's round whose epoch ends fall on whole seconds
        (`whole_second_epochs`): its place and rate in the throughput model's steps at its batch (its own, scaled to
        the model's whole work), so the model's cached ends serve every round."""
        assert self.epochs is not None
        ends = self.epochs.epoch_ends(job.spec.model, job.spec.batch_size)
        scale = ends[-1] / job.total_steps
        done, trained = through_epochs(job.steps_done * scale, rate * scale, seconds, ends)
        return min(self._whole(job, done / scale - job.steps_done), job.remaining_steps), trained

    @staticmethod
    def _whole(job: JobState, steps: float) -> int | float:
        """The steps a round does: whole ones (a fraction only in a job's last round), or as they come for a job
        whose progress is continuous."""
        return steps if job.spec.continuous else int(steps)

    def _switch_within_round(self, launch: Launch, rate: float, gpu_type: str) -> None:
        """Where the job's replayed schedule changes batch size before the round ends, split its round as the real
        job's went: train to that epoch's end, lose the switch cost (`_switch_cost`), train on at the new
        size's rate; a switch cost that outlasts the round goes on in the next one if the job keeps its GPUs."""
        ahead = replace(launch.job)  # the job as the round leaves it, worked out ahead of `_settle`
        now, length = self.view.now, self._round_length()
        elapsed = launch.startup_s
        segments = [Switched(ahead.batch_size, launch.steps, launch.steps / rate)]
        while (switch := next_planned_switch(ahead)) is not None:
            boundary, new_bs = switch
            to_go = boundary - ahead.steps_done
            if boundary >= ahead.total_steps or to_go > rate * (length - elapsed):
                break
            rates = self._rates_after_switch(ahead, new_bs)
            if rates is None or gpu_type not in rates:  # the new size cannot run on these GPUs: at the round's end
                break
            segments[-1].steps, segments[-1].train_s = to_go, to_go / rate
            elapsed += to_go / rate
            ahead.steps_done = boundary
            rescale_to_batch_size(ahead, new_bs, round_up_progress=self.mechanics.round_up_progress_at_switch)
            rate, cost = rates[gpu_type], self._switch_cost(ahead)
            if elapsed + cost >= length:
                self.starting[ahead.id] = elapsed + cost - length
                segments.append(Switched(new_bs, 0, 0.0))
                elapsed = length
                break
            elapsed += cost
            steps = min(int(rate * (length - elapsed)), ahead.remaining_steps)
            segments.append(Switched(new_bs, steps, steps / rate))
        if len(segments) > 1:
            launch.steps, launch.train_s = segments[0].steps, segments[0].train_s
            launch.switched = segments[1:]
            launch.finish = max(now, now + elapsed + segments[-1].train_s)

    def _placed_rate(self, job: JobState, gpu_type: str, gpus: tuple[int, ...]) -> float:
        """The job's rate on the servers it was given, where the throughput model times them; else its rate on
        the type (the packed placement)."""
        assert self.timed is not None
        placed = self.timed.placed(job.spec.model, job.batch_size, self._per_server(gpus), gpu_type)
        return job.rate(gpu_type) if placed is None else placed

    def _restarts(self, job_id: int, gpus: tuple[int, ...], previous: dict[int, tuple[int, ...]]) -> bool:
        """The job starts anew: it did not run in the round before, or ran on another GPU type (a checkpoint and
        a restart move it); an elastic job also when its GPUs per server change, a rigid one too with
        `placed_speed` (Sia's simulator restarts a job whose placement changed)."""
        before = previous.get(job_id)
        if before == gpus:
            return False
        if before is None or self.cluster.type_of(before[0]) != self.cluster.type_of(gpus[0]):
            return True
        job = self.view.jobs.get(job_id)
        if job is None:
            return False
        if job.spec.elastic:
            return self._shape(before) != self._shape(gpus)
        return self.timed is not None and self._per_server(before) != self._per_server(gpus)

    def _per_server(self, gpus: tuple[int, ...]) -> tuple[int, ...]:
        """A gang's GPUs on each server it spans, by server (the profile reads a placement in any rotation)."""
        return tuple(Counter(self.cluster.server_of(g) for g in sorted(gpus)).values())

    def _shape(self, gpus: tuple[int, ...]) -> list[int]:
        """A gang's GPUs per server, whichever servers: a move to the same shape elsewhere is not a restart."""
        return sorted(self._per_server(gpus))

    def round_launched(self, loop: SchedulingLoop) -> None:
        if self.on_round is not None:
            placement = self.placements[-1] if self.placements else {}
            self.on_round(Progress(self.view.now, len(self.placements), len(self.finished), len(self.specs), placement))

    def _restart_cost(self, job: JobState) -> float:
        """The job's own restart cost where its description gives one, else the mechanics' for its gang."""
        own = job.spec.restart_s
        return self.mechanics.restart_cost(job.scale_factor) if own is None else own

    def _round_length(self) -> float:
        """The round launched last: as long as the real run's round of that index where it was measured."""
        index = len(self.placements) - 1
        return self.round_lengths[index] if 0 <= index < len(self.round_lengths) else self.mechanics.round_seconds

    def _start_cost(self, job: JobState) -> float:
        """This start's cost: the measured job's start-up of that lease where known, else its restart cost."""
        measured = self._next_measured(job.id, self.starts, MeasuredJob.startup)
        return self._restart_cost(job) if measured is None else measured

    def _switch_cost(self, job: JobState) -> float:
        """This switch's cost: the measured job's of that switch where known, else the mechanics' by gang size."""
        self.starts[job.id] += 1  # the real job's switch started a lease of its own: its start-up is journaled too
        measured = self._next_measured(job.id, self.switches, MeasuredJob.switch)
        return self.mechanics.switch_cost(job.scale_factor) if measured is None else measured

    def _next_measured(
        self, job_id: int, counts: Counter[int], nth: Callable[[MeasuredJob, int], float | None]
    ) -> float | None:
        """The measured job's next value of a kind (`nth` of its start-ups or switches), counted in `counts`."""
        own, n = self.measured.get(job_id), counts[job_id]
        counts[job_id] += 1
        return None if own is None else nth(own, n)

    def _startup(self, job: JobState, *, restarting: bool) -> float:
        """Seconds of this round the job spends starting (`_starts_up`); a start-up longer than a round goes on in
        the next one if the job keeps its GPUs, and is lost otherwise."""
        if not self._starts_up(job):
            return 0.0
        self.switched.discard(job.id)
        left = self._start_cost(job) if restarting else self.starting.pop(job.id, 0.0)
        length = self._round_length()
        if left > length:
            self.starting[job.id] = left - length
        return min(left, length)

    def _starts_up(self, job: JobState) -> bool:
        """Whether the job's restarts take time at the start of its round (carried into the next when longer),
        as a real job's do (replaying a real run) and as those of a job with its own restart cost (Sia's
        applications); otherwise a restart takes its cost out of an almost full round."""
        return self.replay or job.spec.restart_s is not None

    def run(self) -> SimulationResult:
        started = time.perf_counter()
        self.loop.run(self)
        return SimulationResult(self._summary(time.perf_counter() - started), self.loop.rounds)

    def _cost(self, busy_s: dict[str, float], done: list[JobState]) -> dict[str, Any]:
        """GPU-hours the run kept each type busy (the whole run, every job, as utilisation counts them; a pair sharing
        a gang counts once) and what they cost; SLO violations among the measured finished jobs that have SLOs."""
        return {**cost_fields(busy_s, self.prices), **slo_fields(violates_slo(j) for j in done if has_slo(j))}

    def _isolated_time(self, job: JobState) -> float:
        """T_iso for the job's finish-time fairness: the run's, for a measured job (its measured rates), else the
        table's."""
        own = self.measured.get(job.id)
        if own is not None and own.t_isolated_s is not None:
            return own.t_isolated_s
        return isolated_time(job.spec, job.profile, self.throughputs, self.cluster)

    def _summary(self, wall_seconds: float) -> dict[str, Any]:
        measured = range(len(self.specs)) if self.window is None else self.window
        unfinished = [i for i in measured if i not in self.finished]
        done = [self.finished[i] for i in measured if i in self.finished]
        outcomes = [
            JobOutcome(j.id, j.arrival_s, j.last_finish_s, self._isolated_time(j), j.batch_size_changes) for j in done
        ]
        summary = summarize_run(
            outcomes,
            gpus=self.cluster.gpus,
            makespan_s=self.view.now,
            gpu_busy_s=self.gpu_busy,
            num_rounds=len(self.placements),
            makespan_lower_bound_s=cluster_makespan_lower_bound(
                self.specs, self.profiles, self.cluster, self.throughputs
            ),
        )
        busy = {t: sum(self.gpu_busy[g] for g in self.cluster.gpu_ids(t)) for t in self.cluster.types}
        by_type = utilization_by_type(busy, self.cluster, self.view.now)
        if by_type is not None:
            summary["utilization_by_type"] = by_type
        summary.update(self._cost(busy, done))
        if self.window is not None:
            summary["window"] = [self.window.start, self.window.stop]
            summary["jobs_arrived"] = len(self.specs) - len(self.queue)
        summary["complete"] = not unfinished
        summary["unfinished_jobs"] = unfinished
        summary["wall_seconds"] = wall_seconds
        summary.update(self.policy.summary())
        return summary
