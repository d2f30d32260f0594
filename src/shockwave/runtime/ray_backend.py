"""Jobs on Ray: each GPU of the run is held by a long-lived worker actor, warm; a gang's members run on its workers.

A worker holds its GPU from the run's start to its end (Ray sets CUDA_VISIBLE_DEVICES for it; on a machine without
GPUs, logical GPUs are declared and the jobs run on CPU) and keeps a zygote with the training stack imported
(`shockwave.runtime.warm`), so a lease forks its member process instead of starting Python and PyTorch cold: a lease
starts in a fraction of a second, and the GPUs of a finished or preempted lease are free again at once. A gang is a
set of free workers of its planned type chosen by the placement strategy (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD,
over the workers' nodes as Ray's placement groups would choose them). Each worker keeps its members' lease folders on
its own node; checkpoints travel through Ray, so a job can resume on any node without a shared filesystem. Members die
with their worker (Linux parent-death signals) and workers with the run (Ray ends a driver's actors when it exits),
so nothing is left running when a worker, a node or the scheduler dies. A worker that died (its node is gone, or it
was killed) is asked of Ray again for the same GPU type: its GPU is offered again once the new one is up, warm.
Without an address, the Ray instance is our own: on loopback only, and torn down when the scheduler exits, however
it exits (`shockwave.runtime.local_ray`).

GPU types are Ray custom resources, one per type (`gpu_type:v100`, see `type_resource`), counting a node's GPUs of
that type: each worker asks for a GPU and one unit of its type's resource, so Ray puts it on a GPU of that type, and
reports the resources Ray assigned it (what the scheduler records). Our local instance declares them from the cluster
(`v100:2,k80:2`: 4 logical GPUs, 2 of each resource); the nodes of a cluster given by `--address` must declare them
(`ray start --num-gpus 8 --resources '{"gpu_type:v100": 8}'`), one type per node, since Ray cannot tell which of a
node's GPUs a type resource belongs to. A one-type cluster needs none: its workers use the type's resource when the
Ray cluster has it, and any GPU when it does not.

A pair of jobs sharing GPUs (`Launch.partner`) runs on the same workers: the first of the two to start takes them,
and the second joins it while the first runs as its pair, so both jobs' rank-r members share rank r's GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

from shockwave.core.clock import Clock, WallClock
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically
from shockwave.io.private import FOLDER_MODE, private_folder
from shockwave.runtime.backend import GangStatus, Launch
from shockwave.runtime.local_ray import LocalRay
from shockwave.runtime.warm import Launcher, Member
from shockwave.training import lease as lease_files

log = logging.getLogger(__name__)
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
WARM_UP_S = 180.0
"""How long a run waits for a worker on each of its GPUs, training stack imported, before it gives up."""
CALL_S = 60.0
"""How long the scheduler waits for a worker's answer before it counts the worker as gone."""
RELEASE_TIMEOUT_S = 30.0
TYPE_PREFIX = "gpu_type:"
OUTPUT_CHUNK = 1 << 20
"""The most of a member's output one `RayBackend.output` call fetches (the rest comes with the next)."""


def scratch_folder() -> Path:
    """Where gang members keep their lease terms, checkpoints in flight and output on a node: this user's own folder
    of the node's temporary space (0700), so another user can neither read a job's command and checkpoints nor plant
    files there."""
    return private_folder(Path(tempfile.gettempdir()) / f"shockwave-runtime-{os.geteuid()}", "scratch folder")


def type_resource(gpu_type: str) -> str:
    """The Ray custom resource that counts GPUs of `gpu_type`."""
    return f"{TYPE_PREFIX}{gpu_type}"


class GpuWorker:
    """One GPU of the run, held from the run's start to its end by a long-lived actor, with a zygote that has the
    training stack imported (`shockwave.runtime.warm`): a lease on it forks its member instead of starting Python and
    PyTorch cold. It runs one member per job it serves (two when a pair of jobs shares the GPU)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.launcher = Launcher()
        self.members: dict[int, tuple[Path, Member]] = {}
        """Each job's member here: its lease folder and process."""

    def ready(self) -> dict[str, Any]:
        """Once the zygote has imported the training stack: where this worker is and what Ray assigned it."""
        self.launcher.warm_up(WARM_UP_S)
        return {
            "ip": ray.util.get_node_ip_address(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "gpus": ray.get_gpu_ids(),
            "resources": ray.get_runtime_context().get_assigned_resources(),
            "warm": self.launcher.ready,
        }

    def rendezvous(self) -> tuple[str, int]:
        """An address and a port free now on this node, for a gang led from here."""
        return ray.util.get_node_ip_address(), lease_files.free_port()

    def start(
        self,
        job_id: int,
        rank: int,
        command: list[str],
        world: int,
        master: tuple[str, int],
        terms: dict[str, Any],
        checkpoint: bytes | None,
    ) -> int:
        self.kill(job_id)  # what is left of an earlier start of the job here (a gang whose start failed elsewhere)
        folder = scratch_folder() / self.run_id / f"job-{job_id}" / f"rank-{rank}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(mode=FOLDER_MODE, parents=True)
        checkpoint_path = folder / "checkpoint.pt"
        if checkpoint is not None:
            write_atomically(checkpoint_path, checkpoint, private=True)
        lease_files.Terms(**terms, checkpoint=str(checkpoint_path)).write(folder)
        environment = {**os.environ, **lease_files.member_environment(folder, job_id, rank, world, master)}
        member = self.launcher.start(command, environment, Path.cwd(), folder / "output.log")
        self.members[job_id] = (folder, member)
        return member.pid

    def set_deadline(self, job_id: int, deadline: float) -> None:
        folder = self.members[job_id][0]
        dataclasses.replace(lease_files.Terms.read(folder), deadline=deadline).write(folder)

    def status(self, job_id: int) -> dict[str, Any]:
        folder, member = self.members[job_id]
        code = member.poll()
        failed = code not in (None, 0)  # the output is only read to explain a failure: status is polled often
        return {
            "returncode": code,
            "progress": lease_files.read_progress(folder),
            "log": _tail(folder / "output.log") if failed else "",
        }

    def checkpoint(self, job_id: int, newer_than: int) -> tuple[int, bytes] | None:
        folder = self.members[job_id][0]
        progress = lease_files.read_progress(folder) or {}
        step = progress.get("checkpoint_step")
        path = folder / "checkpoint.pt"
        if step is None or step <= newer_than or not path.exists():
            return None
        return int(step), path.read_bytes()

    def output(self, job_id: int, offset: int, size: int = OUTPUT_CHUNK) -> bytes:
        """At most `size` bytes of the job's member's output from `offset` on."""
        try:
            with (self.members[job_id][0] / "output.log").open("rb") as log:
                log.seek(offset)
                return log.read(size)
        except OSError:
            return b""

    def kill(self, job_id: int) -> None:
        """Stop the job's member (at once if it still runs) and free this GPU of it."""
        entry = self.members.pop(job_id, None)
        if entry is not None:
            entry[1].kill()


def _tail(path: Path, size: int = 2000) -> str:
    try:
        with path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - size))
            return log.read().decode(errors="replace")
    except OSError:
        return ""


@dataclasses.dataclass
class _Gpu:
    """The scheduler's view of one GPU worker."""

    actor: Any
    gpu_type: str
    info: dict[str, Any]
    jobs: set[int] = dataclasses.field(default_factory=set)
    starting: Any = None
    """A replacement worker's readiness (a Ray object ref) while it is not up yet: its GPU is not offered."""


class RayBackend:
    def __init__(
        self, cluster: ClusterSpec, address: str | None, strategy: str = "PACK", run_id: str | None = None
    ) -> None:
        if strategy not in STRATEGIES:
            raise InputError(f"placement strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        self.strategy = strategy
        self.clock: Clock = WallClock()  # members read their deadlines on their node's time.time()
        self.run_id = run_id or f"run-{int(time.time())}-{os.getpid()}"
        self.cluster, self.gpus = cluster, cluster.gpus
        self.worker = ray.remote(GpuWorker)
        self.closing = False
        """Set once the run ends: a worker found dead then is not asked for again."""
        self.workers: list[_Gpu] = []
        self.gangs: dict[int, list[_Gpu]] = {}
        """Each running job's GPUs, rank by rank (a pair's two jobs run on the same ones)."""
        self.launches: dict[int, Launch] = {}
        self.granted: dict[int, str] = {}
        """The GPU type of each running gang, from the resources Ray assigned its members."""
        self.output_read: dict[int, int] = {}
        """How many bytes of each running gang's first member's output `output` has returned."""
        self.started_ray = not ray.is_initialized()
        self.local: LocalRay | None = None
        if self.started_ray:
            if address is None:
                # A local instance with logical GPUs; CPUs are declared generously because members are mostly idle
                # while waiting on their data-parallel peers, and a GPU job must never wait for a CPU slot.
                self.local = LocalRay(
                    num_gpus=cluster.gpus,
                    num_cpus=max(cluster.gpus, os.cpu_count() or 1) + 2,
                    resources={type_resource(pool.gpu_type): pool.gpus for pool in cluster.pools},
                    include_dashboard=False,
                    logging_level="warning",
                    log_to_driver=False,
                )
            else:
                try:
                    ray.init(address=address, logging_level="warning", log_to_driver=False)
                except (ConnectionError, ray.exceptions.RayError) as exc:
                    first = str(exc).strip().splitlines()[0]
                    raise InputError(f"cannot join the Ray cluster at {address}: {first}") from None
        try:
            self.typed = self._check_resources(address)
            """Workers ask for their type's resource (else for any GPU: a one-type cluster that declares none)."""
            self.workers = self._hold_gpus()
        except InputError:
            self.close()
            raise

    def _check_resources(self, address: str | None) -> bool:
        """Whether gangs ask for type resources; an InputError when the Ray cluster lacks GPUs or type resources."""
        resources = ray.cluster_resources()
        where = f"the Ray cluster at {address}" if address else "the Ray cluster"
        available = int(resources.get("GPU", 0))
        if available < self.gpus:
            raise InputError(
                f"{where} has {available} GPUs but the run asks for {self.gpus} ({self.cluster.describe()})"
            )
        if len(self.cluster.pools) == 1 and type_resource(self.cluster.default_type) not in resources:
            return False
        short = [
            f"{type_resource(p.gpu_type)!r} counts {resources.get(type_resource(p.gpu_type), 0):g} of {p.gpus}"
            for p in self.cluster.pools
            if resources.get(type_resource(p.gpu_type), 0) < p.gpus
        ]
        if short:
            example = type_resource(self.cluster.default_type)
            raise InputError(
                f"{where} lacks GPUs by type for --cluster {self.cluster.describe()}: {'; '.join(short)}. Each node "
                f"declares its GPUs' type as a resource, e.g. `ray start --num-gpus 8 --resources "
                f"'{{\"{example}\": 8}}'`"
            )
        return True

    def _hold_gpus(self) -> list[_Gpu]:
        """A warm worker on each GPU of the run, held until it ends; the run starts once every worker's training
        stack is imported (seconds, once: no lease waits for it)."""
        types = [pool.gpu_type for pool in self.cluster.pools for _ in range(pool.gpus)]
        actors = [self._new_worker(gpu_type) for gpu_type in types]
        refs = [actor.ready.remote() for actor in actors]
        _, waiting = ray.wait(refs, num_returns=len(refs), timeout=WARM_UP_S)
        if waiting:
            for actor in actors:
                ray.kill(actor)
            raise InputError(
                f"the Ray cluster did not start a worker on each of the run's {self.gpus} GPUs within "
                f"{WARM_UP_S:.0f} s ({len(waiting)} missing): are its GPUs taken by another run?"
            )
        try:
            infos = ray.get(refs)
        except ray.exceptions.RayError as exc:
            for actor in actors:
                ray.kill(actor)
            first = str(exc).strip().splitlines()[-1]
            raise InputError(f"a GPU worker could not start on the Ray cluster: {first}") from None
        cold = sum(not info["warm"] for info in infos)
        if cold:
            log.warning(
                "%d of %d GPU workers could not import the training stack: they start leases cold", cold, len(infos)
            )
        return [_Gpu(actor, gpu_type, info) for actor, gpu_type, info in zip(actors, types, infos, strict=True)]

    def _new_worker(self, gpu_type: str) -> Any:
        typed = {type_resource(gpu_type): 1} if self.typed else {}
        return self.worker.options(num_gpus=1, num_cpus=1, resources=typed, max_restarts=0).remote(self.run_id)

    def start(self, launch: Launch) -> bool:
        for _ in range(2):  # a worker found dead is replaced, and the gang placed once more on the others
            gpus = self._partner_gpus(launch) or self._choose(launch)
            if gpus is None:
                log.warning(
                    "job %d: no room for a gang of %d %s GPUs (%s) now", launch.job_id, launch.gang, launch.gpu_type,
                    self.strategy,
                )  # fmt: skip
                return False
            if self._start_on(launch, gpus):
                return True
        return False

    def _start_on(self, launch: Launch, gpus: list[_Gpu]) -> bool:
        """Start the gang's members on `gpus`; False (none left running) if a worker is gone."""
        terms = {
            "job_id": launch.job_id,
            "deadline": launch.deadline,
            "max_steps": launch.total_steps,
            "total_steps": launch.total_steps,
            "batch_size": launch.batch_size,
            "resume_step": launch.resume_step,
            "epoch_steps": launch.epoch_steps,
        }
        try:
            master = ray.get(gpus[0].actor.rendezvous.remote())
            ray.get(
                [
                    gpu.actor.start.remote(
                        launch.job_id, rank, launch.command, launch.gang, master, terms, launch.checkpoint
                    )
                    for rank, gpu in enumerate(gpus)
                ]
            )
        except ray.exceptions.RayError as exc:
            log.warning("job %d: a GPU worker is gone (%s)", launch.job_id, type(exc).__name__)
            for gpu in gpus:  # members that did start must not run on GPUs the run will offer to others
                with contextlib.suppress(ray.exceptions.RayError):
                    ray.get(gpu.actor.kill.remote(launch.job_id), timeout=CALL_S)
            self._replace_dead(gpus)
            return False
        for gpu in gpus:
            gpu.jobs.add(launch.job_id)
        self.gangs[launch.job_id] = gpus
        self.output_read[launch.job_id] = 0
        self.launches[launch.job_id] = launch
        self.granted[launch.job_id] = self._type_of([gpu.info for gpu in gpus])
        return True

    def _partner_gpus(self, launch: Launch) -> list[_Gpu] | None:
        """The GPUs of the launch's partner, if the partner runs there as its pair (same type and gang)."""
        partner = self.launches.get(launch.partner) if launch.partner is not None else None
        if partner is None or not launch.joins(partner):
            return None
        gpus = self.gangs[partner.job_id]
        return gpus if all(gpu.starting is None for gpu in gpus) else None

    def _choose(self, launch: Launch) -> list[_Gpu] | None:
        """Free GPUs of the launch's type for its gang, by the placement strategy, or None if there is no room now.

        PACK: one node if any has room (the fullest that fits, keeping larger holes for larger gangs), else the nodes
        with most room first; STRICT_PACK: one node or nothing; SPREAD: one GPU per node in turn; STRICT_SPREAD: each
        member on a node of its own or nothing."""
        self._revive()
        nodes: dict[str, list[_Gpu]] = {}
        for gpu in self.workers:
            if gpu.starting is None and not gpu.jobs and (not self.typed or gpu.gpu_type == launch.gpu_type):
                nodes.setdefault(gpu.info["node_id"], []).append(gpu)
        roomiest = sorted(nodes.values(), key=len, reverse=True)
        if sum(map(len, roomiest)) < launch.gang:
            return None
        if self.strategy in ("PACK", "STRICT_PACK"):
            fits = [free for free in roomiest if len(free) >= launch.gang]
            if fits:
                return min(fits, key=len)[: launch.gang]
            return None if self.strategy == "STRICT_PACK" else [gpu for free in roomiest for gpu in free][: launch.gang]
        if self.strategy == "STRICT_SPREAD" and len(roomiest) < launch.gang:
            return None
        turns = [free[depth] for depth in range(len(roomiest[0])) for free in roomiest if depth < len(free)]
        return turns[: launch.gang]

    def _replace_dead(self, gpus: list[_Gpu]) -> None:
        """Each of `gpus` whose worker died (its node is gone, or it was killed) gets a new worker, asked of Ray for
        the same GPU type: it comes up when the cluster has such a GPU again (the node back, or another), and its GPU
        is offered again once it is warm (`_revive`)."""
        for gpu in gpus:
            if gpu.starting is not None or self.closing:
                continue
            try:
                ray.get(gpu.actor.rendezvous.remote(), timeout=10)
            except (ray.exceptions.RayError, TimeoutError):
                log.warning("a %s GPU's worker died; a new one is asked for", gpu.gpu_type)
                with contextlib.suppress(ray.exceptions.RayError):
                    ray.kill(gpu.actor)
                gpu.actor = self._new_worker(gpu.gpu_type)
                gpu.starting = gpu.actor.ready.remote()

    def _revive(self) -> None:
        """Offer the GPUs of replacement workers that are up now; ask again for one whose start failed."""
        for gpu in self.workers:
            if gpu.starting is None or not ray.wait([gpu.starting], timeout=0)[0]:
                continue
            try:
                gpu.info, gpu.starting = ray.get(gpu.starting), None
            except ray.exceptions.RayError:
                gpu.actor = self._new_worker(gpu.gpu_type)
                gpu.starting = gpu.actor.ready.remote()

    def _type_of(self, nodes: list[dict[str, Any]]) -> str:
        """The GPU type of a gang's members, from the resources Ray assigned them (types joined by commas if they
        differ, "none" if they hold none: neither should ever happen)."""
        if not self.typed:
            return self.cluster.default_type
        types = {
            name.removeprefix(TYPE_PREFIX) for n in nodes for name in n["resources"] if name.startswith(TYPE_PREFIX)
        }
        return ",".join(sorted(types)) or "none"

    def granted_type(self, job_id: int) -> str:
        return self.granted[job_id]

    def extend(self, job_id: int, deadline: float) -> None:
        if self._lost(job_id):
            return
        try:
            ray.get([gpu.actor.set_deadline.remote(job_id, deadline) for gpu in self.gangs[job_id]], timeout=CALL_S)
        except ray.exceptions.RayError as exc:  # its worker is gone: the gang's status says so, and it is restarted
            log.warning("job %d: its lease could not be changed: %s", job_id, type(exc).__name__)

    def stop(self, job_id: int) -> None:
        self.extend(job_id, self.clock.now())

    def status(self, job_id: int) -> GangStatus:
        if self._lost(job_id):
            return GangStatus(None, None, True, "a gang member's GPU worker died", False, None)
        try:
            states = ray.get([gpu.actor.status.remote(job_id) for gpu in self.gangs[job_id]], timeout=CALL_S)
        except ray.exceptions.RayError as exc:
            return GangStatus(None, None, True, f"a gang member's actor died: {type(exc).__name__}", False, None)
        progress = states[0]["progress"] or {}
        codes = [s["returncode"] for s in states]
        failure = next(
            (
                f"member {rank} exited with code {code}; its output ends with:\n{s['log'][-600:]}"
                for rank, (code, s) in enumerate(zip(codes, states, strict=True))
                if code not in (None, 0)
            ),
            None,
        )
        return GangStatus(
            step=progress.get("step"),
            reported_at=progress.get("time"),
            exited=all(code is not None for code in codes),
            failure=failure,
            done=bool(progress.get("done")),
            requested_batch_size=progress.get("requested_batch_size"),
            start_step=progress.get("start_step"),
            first_step_at=progress.get("first_step_at"),
            process_started_at=progress.get("started"),
        )

    def _lost(self, job_id: int) -> bool:
        """Whether a worker of the job's gang died and was replaced since it started (a pair's other job, say)."""
        return any(gpu.starting is not None for gpu in self.gangs[job_id])

    def checkpoint(self, job_id: int, newer_than: int) -> tuple[int, bytes] | None:
        if self._lost(job_id):
            return None
        try:
            return ray.get(self.gangs[job_id][0].actor.checkpoint.remote(job_id, newer_than), timeout=CALL_S)
        except ray.exceptions.RayError:
            return None

    def output(self, job_id: int) -> bytes:
        if job_id not in self.gangs:
            return b""
        if self._lost(job_id):
            return b""
        try:
            chunk: bytes = ray.get(
                self.gangs[job_id][0].actor.output.remote(job_id, self.output_read[job_id]), timeout=CALL_S
            )
        except ray.exceptions.RayError:
            return b""
        self.output_read[job_id] += len(chunk)
        return chunk

    def member_nodes(self, job_id: int) -> list[dict[str, Any]]:
        return [gpu.info for gpu in self.gangs[job_id]]

    def release(self, job_id: int) -> None:
        """Stop the job's members; its GPUs are free again at once (their workers stay, warm, for the next lease)."""
        gpus = self.gangs.pop(job_id)
        self.granted.pop(job_id, None)
        self.launches.pop(job_id, None)
        self.output_read.pop(job_id, None)
        dead = []
        for gpu in gpus:
            gpu.jobs.discard(job_id)
            if gpu.starting is not None:
                continue  # replaced: its member went with the worker
            try:
                ray.get(gpu.actor.kill.remote(job_id), timeout=RELEASE_TIMEOUT_S)
            except (ray.exceptions.RayError, TimeoutError):
                dead.append(gpu)
        if dead:
            self._replace_dead(dead)

    def close(self) -> None:
        self.closing = True
        for job_id in list(self.gangs):
            self.release(job_id)
        for gpu in self.workers:
            with contextlib.suppress(ray.exceptions.RayError):
                ray.kill(gpu.actor)
        self.workers = []
        if self.local is not None:
            self.local.close()
        elif self.started_ray:
            ray.shutdown()
