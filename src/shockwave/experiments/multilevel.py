"""Gavel's Figure 11 experiment, measured: entities of different weights whose jobs arrive over time share a cluster
under multi-level fairness, and each entity's share of the cluster's effective throughput is compared with its
weight's share among the entities that have demand.

    run = simulate_multilevel(trace, entities_file, "v100:3,p100:3,k80:3")
    rows = share_errors(run)          # per phase and entity with demand: measured, allocated and target shares

Effective throughput is counted as Gavel's max-min policies count it: job j's steps/s times its gang size divided by
prop_j, its steps/s under an even split of every type (sum_t rate_jt G_t / G), so a job holding one GPU of a one-type
cluster all the time has 1 and the cluster's total is about its GPU count. A phase is a stretch of rounds under one
allocation (the experiment recomputes it at every arrival and completion). An entity has demand in a phase when
its jobs could hold more GPUs than its weighted share: the cluster's GPUs are water-filled over the entities by
weight, each capped by the GPUs its jobs can hold at once (the sum of their gangs), and an entity below its cap has
demand. Among the entities with demand, shares are normalised to sum to 1 and compared with W_e / the sum of their
weights: the allocation's planned shares, and the shares measured from the steps the jobs did in the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.core.plan import RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.io.atomic import write_atomically
from shockwave.policies.gavel.hierarchical import entity_totals
from shockwave.policies.gavel.mechanism import GavelPolicy
from shockwave.policies.registry import make_policy, policy_info
from shockwave.simulator.engine import Simulator
from shockwave.simulator.mechanics import preset
from shockwave.workload_model.catalog import FAMILIES
from shockwave.workload_model.entities import Entities, read_entities
from shockwave.workload_model.profile import load_workload
from shockwave.workload_model.trace import TraceJob, catalog_job, write_trace

POLICY = "max_min_fairness_water_filling_perf"
WEIGHTS = {"entity0": 1.0, "entity1": 2.0, "entity2": 3.0}
MODELS = (("ResNet-18", 64), ("LM", 20), ("ResNet-50", 32), ("Transformer", 64), ("Recommendation", 2048))


def figure11_workload(
    jobs_per_entity: int = 9, spacing_s: float = 1800.0, hours: float = 6.0, gangs: bool = False
) -> list[TraceJob]:
    """Three entities' jobs (ids in blocks of `jobs_per_entity`), arriving `spacing_s` apart in id order: a mix of
    models, each `hours` to ~2x `hours` of training alone on a V100 (built-in throughput model), on one GPU (with
    `gangs`, every fourth distributable job on two)."""
    from shockwave.workload_model.throughput import load_throughputs

    tm = load_throughputs(None)
    out = []
    for index in range(3 * jobs_per_entity):
        model, batch = MODELS[index % len(MODELS)]
        gang = 2 if gangs and index % 4 == 3 and FAMILIES[model].distributable else 1
        rate = tm.throughput(model, batch, gang, "v100")
        length = hours * (1.0 + (index % jobs_per_entity) / jobs_per_entity) * 3600.0
        out.append(catalog_job(model, batch, gang, int(rate * length), "static", index * spacing_s))
    return out


def write_figure11_inputs(folder: Path, jobs_per_entity: int = 9, **workload: Any) -> tuple[Path, Path]:
    """The trace and its entities file (JSON) in `folder`."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    trace, entities = folder / "multilevel.trace", folder / "entities.json"
    write_trace(figure11_workload(jobs_per_entity, **workload), trace)
    blocks = {f"{k * jobs_per_entity}-{(k + 1) * jobs_per_entity - 1}": name for k, name in enumerate(WEIGHTS)}
    write_atomically(entities, json.dumps({"entities": WEIGHTS, "jobs": blocks}, indent=2) + "\n")
    return trace, entities


@dataclass
class Round:
    start_s: float
    steps: dict[int, float] = field(default_factory=dict)
    end_s: float = math.nan


@dataclass
class Phase:
    """Rounds under one allocation."""

    start_s: float
    allocation: dict[int, dict[str, float]]
    normaliser: dict[int, float]
    """prop_j / sf_j: what one GPU's worth of effective throughput is for job j."""
    gangs: dict[int, int]
    gpus: int
    rates: dict[int, dict[str, float]]
    rounds: list[Round] = field(default_factory=list)

    @property
    def end_s(self) -> float:
        return self.rounds[-1].end_s if self.rounds else self.start_s

    def measured(self) -> dict[int, float]:
        """Each job's normalised effective throughput over the phase (steps done / duration / normaliser)."""
        duration = self.end_s - self.start_s
        steps: dict[int, float] = dict.fromkeys(self.allocation, 0.0)
        for r in self.rounds:
            for job_id, done in r.steps.items():
                steps[job_id] = steps.get(job_id, 0.0) + done
        return {j: s / duration / self.normaliser[j] for j, s in steps.items() if j in self.normaliser}

    def allocated(self) -> dict[int, float]:
        """Each job's normalised effective throughput as the allocation plans it (Gavel's Figure 11 plots this)."""
        return {
            j: sum(self.rates[j][t] * x for t, x in shares.items()) / self.normaliser[j]
            for j, shares in self.allocation.items()
        }


class Recorder(Policy):
    """Runs a Gavel-style policy and records, per round, the steps each job did, and each allocation it made."""

    kept = ("inner",)
    inner: GavelPolicy
    """What the run's policy learns (the recorded phases are the experiment's, not the policy's)."""

    def __init__(self, inner: GavelPolicy) -> None:
        self.inner = inner
        self.name = inner.name
        self.plans_gpu_types = inner.plans_gpu_types
        self.phases: list[Phase] = []
        self._seen: object = None

    def plan(self, view: SchedulerView) -> RoundPlan:
        plan = self.inner.plan(view)
        if self.phases and self.phases[-1].rounds and math.isnan(self.phases[-1].rounds[-1].end_s):
            self.phases[-1].rounds[-1].end_s = view.now  # nothing ran in it
        if self.inner.allocation is not self._seen:  # recomputed: a new phase
            self._seen = self.inner.allocation
            self.phases.append(self._phase(view))
        self.phases[-1].rounds.append(Round(view.now))
        return plan

    def _phase(self, view: SchedulerView) -> Phase:
        pools = {t: view.cluster.pool(t).gpus for t in view.cluster.types}
        total = sum(pools.values())
        allocation = {j: dict(x) for j, x in self.inner.allocation.items() if isinstance(j, int) and j in view.jobs}
        rates = {j: {t: view.jobs[j].rate(t) for t in pools} for j in allocation}
        normaliser = {
            j: sum(job_rates[t] * g for t, g in pools.items()) / total / view.jobs[j].scale_factor
            for j, job_rates in rates.items()
        }
        gangs = {j: view.jobs[j].scale_factor for j in allocation}
        return Phase(view.now, allocation, normaliser, gangs, total, rates)

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int | float) -> None:
        self.inner.round_executed(view, job, exec_s, steps)
        last = self.phases[-1].rounds[-1]
        last.steps[job.id] = last.steps.get(job.id, 0.0) + float(steps)
        last.end_s = view.now if math.isnan(last.end_s) else max(last.end_s, view.now)

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        self.inner.job_added(view, job)

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        self.inner.job_removed(view, job)

    def round_failed(self, view: SchedulerView, job: JobState) -> None:
        self.inner.round_failed(view, job)

    def summary(self) -> dict[str, Any]:
        return self.inner.summary()


@dataclass
class MultilevelRun:
    cluster: str
    policy: str
    entities: Entities
    phases: list[Phase]
    summary: dict[str, Any]


def simulate_multilevel(
    trace: Path,
    entities: Path,
    cluster: str,
    policy: str = POLICY,
    round_seconds: float = 360.0,
    throughputs: Path | None = None,
    realloc_s: float = 0.0,
) -> MultilevelRun:
    """Simulate `policy` with the entities file (a policy that takes none ignores it, for contrast), recomputing the
    allocation at every arrival and completion, with no restart cost (Gavel's simulator has none)."""
    spec = ClusterSpec.parse(cluster)
    tm, jobs, profiles = load_workload(trace, throughputs)
    teams = read_entities(entities)
    params: dict[str, Any] = {"min_realloc_interval_s": realloc_s}
    if any(p.name == "entities" for p in policy_info(policy).params):
        params["entities"] = teams
    inner = make_policy(policy, **params)
    if not isinstance(inner, GavelPolicy):
        raise TypeError(f"{policy} is not a Gavel-style policy")
    recorder = Recorder(inner)
    mechanics = preset("corrected").with_round_seconds(round_seconds).with_overrides(restart_cost_s=0.0)
    result = Simulator(jobs, profiles, tm, spec, recorder, mechanics).run()
    return MultilevelRun(cluster, policy, teams, recorder.phases, result.summary)


@dataclass(frozen=True)
class ShareRow:
    start_s: float
    end_s: float
    rounds: int
    entity: str
    measured: float
    """The entity's share of the measured effective throughput, among the entities with demand."""
    allocated: float
    """The same from the allocation's planned throughputs."""
    target: float
    """Its weight over the weights of the entities with demand."""

    @property
    def error(self) -> float:
        """|measured - target| / target."""
        return abs(self.measured - self.target) / self.target

    @property
    def allocated_error(self) -> float:
        return abs(self.allocated - self.target) / self.target


@dataclass
class _Stretch:
    start_s: float
    end_s: float
    rounds: int
    targets: dict[str, float]
    measured: dict[str, float]
    """Entity -> normalised throughput x seconds."""
    allocated: dict[str, float]

    def rows(self) -> list[ShareRow]:
        total_m, total_a = sum(self.measured.values()), sum(self.allocated.values())
        return [
            ShareRow(
                self.start_s,
                self.end_s,
                self.rounds,
                e,
                self.measured[e] / total_m if total_m else 0.0,
                self.allocated[e] / total_a if total_a else 0.0,
                target,
            )
            for e, target in self.targets.items()
        ]


def share_errors(run: MultilevelRun, *, merge: bool = False) -> list[ShareRow]:
    """Per phase (or with `merge`, per stretch of consecutive phases with the same entities in demand), a row for
    each entity with demand: its measured and allocated shares among those entities, and its target."""
    stretches: list[_Stretch] = []
    for phase in run.phases:
        duration = phase.end_s - phase.start_s
        if not phase.allocation or not duration > 0:
            continue
        measured = entity_totals(phase.measured(), run.entities)
        allocated = entity_totals(phase.allocated(), run.entities)
        caps = entity_totals(phase.gangs, run.entities)
        weights = {e: run.entities.entities[e].weight for e in caps}
        demand = sorted(_with_demand(weights, caps, phase.gpus))
        if not demand:
            continue
        in_demand = sum(weights[e] for e in demand)
        targets = {e: weights[e] / in_demand for e in demand}
        last = stretches[-1] if stretches else None
        if merge and last is not None and last.targets == targets and last.end_s == phase.start_s:
            last.end_s, last.rounds = phase.end_s, last.rounds + len(phase.rounds)
            for e in demand:
                last.measured[e] += measured[e] * duration
                last.allocated[e] += allocated[e] * duration
        else:
            stretches.append(
                _Stretch(
                    phase.start_s,
                    phase.end_s,
                    len(phase.rounds),
                    targets,
                    {e: measured[e] * duration for e in demand},
                    {e: allocated[e] * duration for e in demand},
                )
            )
    return [row for stretch in stretches for row in stretch.rows()]


def _with_demand(weights: dict[str, float], caps: dict[str, float], total: float) -> set[str]:
    """The entities below their cap when `total` GPUs are water-filled over them by weight, each capped by the GPUs
    its jobs can hold at once (`caps`)."""
    capped: set[str] = set()
    while True:
        free = [e for e in weights if e not in capped]
        if not free:
            return set()
        left = total - sum(caps[e] for e in capped)
        level = left / sum(weights[e] for e in free)
        newly = {e for e in free if weights[e] * level >= caps[e] * (1 - 1e-9)}
        if not newly:
            return set(free)
        capped |= newly
