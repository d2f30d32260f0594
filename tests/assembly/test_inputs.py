"""One run assembly (issue 32): every driver resolves the policy and reads its inputs the same way, so the same
policy with the same parameters plans the same rounds under the simulator, `shockwave run` and `shockwave serve`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from runtime_trace import write_runtime_trace, write_typed_throughputs
from service_world import World, backend_on, spec
from shockwave.api import simulate
from shockwave.assembly import inputs as assembly
from shockwave.assembly.inputs import RunInputs, assemble
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.plan import RoundPlan
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.runtime.run import RunRequest, run
from shockwave.service.serve import ServeRequest, serve
from shockwave.service.store import Store

JOBS = [
    ("ResNet-18", 32, 1, 800, 0.0),
    ("LM", 20, 2, 800, 0.0),
    ("Transformer", 32, 1, 400, 0.0),
    ("Recommendation", 2048, 1, 1500, 0.0),
    ("LM", 10, 1, 1000, 0.0),
]
"""Every job there at the first round, on 2 V100s and 2 K80s: 6 GPUs of gangs for 4."""
CLUSTER = "v100:2,k80:2"
POLICY, PARAMS = "max_min_fairness_perf", ("seed=3",)


@pytest.fixture
def first_plans(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The first plan of every policy the assembly builds from now on, as (jobs, GPU type, GPUs) triples."""
    plans: list[list[Any]] = []
    build = RunInputs.build

    def recording(self: RunInputs, *args: Any, **kwargs: Any) -> Any:
        policy = build(self, *args, **kwargs)
        plan = policy.plan

        def first(view: Any) -> RoundPlan:
            chosen = plan(view)
            if len(plans) < len(built):
                plans.append(sorted((a.jobs, a.gpu_type, a.gpus) for a in chosen.assignments))
            return chosen

        built.append(policy)
        policy.plan = first  # type: ignore[method-assign]
        return policy

    built: list[Any] = []
    monkeypatch.setattr(assembly.RunInputs, "build", recording)
    return plans


def test_the_same_policy_plans_the_same_first_round_under_every_driver(
    first_plans: list[list[Any]], tmp_path: Path
) -> None:
    trace = write_runtime_trace(tmp_path / "five.trace", JOBS)
    table = write_typed_throughputs(tmp_path / "typed.json", JOBS)
    simulate(trace, POLICY, CLUSTER, throughputs=table, policy_params=PARAMS, mechanics="corrected")
    request = RunRequest(trace=trace, policy=POLICY, gpus=4, out=tmp_path / "run", cluster=CLUSTER)
    run(
        RunRequest(**{**request.__dict__, "throughputs": table, "policy_params": PARAMS, "round_seconds": 1.0}),
        lambda req: FakeBackend({"v100": 2, "k80": 2}, steps_per_s=400.0),
    )
    world, stop = World(), threading.Event()
    queue = Store(tmp_path / "svc", clock=world.now)

    def submitted_first(cluster: ClusterSpec) -> FakeBackend:
        """The cluster, once every job is queued: the service takes them in at its first round, as the others do."""
        for i, (model, batch_size, gang, steps, _) in enumerate(JOBS):
            queue.submit(spec(f"job-{i}", steps=steps, family=model, batch_size=batch_size, gpus=gang))
        return backend_on(world, [])(cluster)

    world.at(30.0, stop.set)
    service = ServeRequest(
        out=tmp_path / "svc", cluster=CLUSTER, policy=POLICY, throughputs=table, policy_params=PARAMS
    )
    serve(service, stop, submitted_first)
    simulated, ran, served = first_plans
    assert simulated == ran == served and len(simulated) >= 3  # jobs on both types, one a gang of 2


def test_inputs_are_checked_once_for_every_driver(tmp_path: Path) -> None:
    cluster = ClusterSpec.parse(CLUSTER)
    with pytest.raises(InputError, match="--config sets Shockwave's hyperparameters; policy 'max_min_fairness_perf'"):
        assemble(POLICY, cluster, config=tmp_path / "config.json")
    with pytest.raises(InputError, match=r"has no parameter 'lease_s'"):
        assemble(POLICY, cluster, policy_params=["lease_s=3"])
    with pytest.raises(InputError, match=r"no rates for GPU type 'a100'"):
        assemble(POLICY, ClusterSpec.parse("a100:4"))
    inputs = assemble(POLICY, cluster, policy_params={"seed": 3})
    assert inputs.build(60.0) is not inputs.build(60.0)  # a fresh policy per run
    assert inputs.described_params() == {"seed": 3}
