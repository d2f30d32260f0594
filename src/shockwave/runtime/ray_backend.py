"""Jobs on Ray: a gang is a placement group of one-GPU bundles, with one actor per bundle running a member process.

Ray sets CUDA_VISIBLE_DEVICES for each actor (on a machine without GPUs, logical GPUs are declared and the jobs run
on CPU). Each actor keeps its member's lease folder on its own node; checkpoints travel through Ray, so a job can
resume on any node without a shared filesystem. A member process dies with its actor (Linux parent-death signal),
so nothing is left running when an actor, a node or the scheduler dies. Without an address, the Ray instance is our
own: on loopback only, and torn down when the scheduler exits, however it exits (`shockwave.runtime.local_ray`).

GPU types are Ray custom resources, one per type (`gpu_type:v100`, see `type_resource`), counting a node's GPUs of
that type: each bundle of a gang asks for a GPU and one unit of its planned type's resource, so Ray places the gang on
GPUs of that type only, and each member reports the resources Ray assigned it (what the scheduler records). Our local
instance declares them from the cluster (`v100:2,k80:2`: 4 logical GPUs, 2 of each resource); the nodes of a cluster
given by `--address` must declare them (`ray start --num-gpus 8 --resources '{"gpu_type:v100": 8}'`), one type per
node, since Ray cannot tell which of a node's GPUs a type resource belongs to. A one-type cluster needs none: its
gangs use the type's resource when the Ray cluster has it, and any GPU when it does not.

A pair of jobs sharing GPUs (`Launch.partner`) shares one placement group: the first of the two to start places it
(whole GPUs, one unit of the type resource each), and the second joins it while the first runs as its pair. Each
member of either job asks its bundle for a fraction (`Launch.share`, 0.5) of the GPU, of the type resource and of the
CPU, so Ray puts both jobs' rank-r members on bundle r's GPU at once. The group is removed when neither job is left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from shockwave.core.clock import Clock, WallClock
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically
from shockwave.io.private import FOLDER_MODE, private_folder
from shockwave.runtime.backend import GangStatus, Launch
from shockwave.runtime.lifetime import die_with_parent
from shockwave.runtime.local_ray import LocalRay
from shockwave.training import lease as lease_files

log = logging.getLogger(__name__)
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
PLACEMENT_TIMEOUT_S = 10.0
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


class GangMember:
    """One member of a gang, on the node Ray placed its bundle on."""

    def __init__(self, run_id: str, job_id: int, rank: int) -> None:
        self.folder = scratch_folder() / run_id / f"job-{job_id}" / f"rank-{rank}"
        self.rank = rank
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(mode=FOLDER_MODE, parents=True)
        self.process: subprocess.Popen | None = None
        self.log_path = self.folder / "output.log"

    def node(self) -> dict[str, Any]:
        return {
            "ip": ray.util.get_node_ip_address(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "port": lease_files.free_port(),
            "gpus": ray.get_gpu_ids(),
            "resources": ray.get_runtime_context().get_assigned_resources(),
        }

    def start(
        self, command: list[str], world: int, master: tuple[str, int], terms: dict[str, Any], checkpoint: bytes | None
    ) -> int:
        checkpoint_path = self.folder / "checkpoint.pt"
        if checkpoint is not None:
            write_atomically(checkpoint_path, checkpoint, private=True)
        lease_files.Terms(**terms, checkpoint=str(checkpoint_path)).write(self.folder)
        env = lease_files.member_environment(self.folder, terms["job_id"], self.rank, world, master)
        environment = {**os.environ, **env}
        with self.log_path.open("ab") as output:
            self.process = subprocess.Popen(
                command, env=environment, stdout=output, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        return self.process.pid

    def set_deadline(self, deadline: float) -> None:
        terms = lease_files.Terms.read(self.folder)
        dataclasses.replace(terms, deadline=deadline).write(self.folder)

    def status(self) -> dict[str, Any]:
        code = self.process.poll() if self.process is not None else None
        failed = code not in (None, 0)  # the output is only read to explain a failure: status is polled often
        return {
            "returncode": code,
            "progress": lease_files.read_progress(self.folder),
            "log": self._tail() if failed else "",
        }

    def checkpoint(self, newer_than: int) -> tuple[int, bytes] | None:
        progress = lease_files.read_progress(self.folder) or {}
        step = progress.get("checkpoint_step")
        path = self.folder / "checkpoint.pt"
        if step is None or step <= newer_than or not path.exists():
            return None
        return int(step), path.read_bytes()

    def output(self, offset: int, size: int = OUTPUT_CHUNK) -> bytes:
        """At most `size` bytes of the member's output from `offset` on."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                return log.read(size)
        except OSError:
            return b""

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _tail(self, size: int = 2000) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - size))
                return log.read().decode(errors="replace")
        except OSError:
            return ""


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
        self.member = ray.remote(GangMember)
        self.gangs: dict[int, tuple[PlacementGroup, list[Any]]] = {}
        """Each running job's placement group (a pair's two jobs hold the same one) and its members' actors."""
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
                ray.init(address=address, logging_level="warning", log_to_driver=False)
        try:
            self.typed = self._check_resources(address)
            """Bundles ask for their type's resource (else for any GPU: a one-type cluster that declares none)."""
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

    def start(self, launch: Launch) -> bool:
        group = self._partner_group(launch)
        if group is None:
            group = self._place(launch)
        if group is None:
            return False
        share = launch.share
        typed = {type_resource(launch.gpu_type): share} if self.typed else {}
        members = [
            self.member.options(
                num_gpus=share,
                num_cpus=share,
                resources=typed,
                max_restarts=0,
                scheduling_strategy=(PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=rank)),
            ).remote(self.run_id, launch.job_id, rank)
            for rank in range(launch.gang)
        ]
        nodes = ray.get([m.node.remote() for m in members])
        leader = nodes[0]
        terms = {
            "job_id": launch.job_id,
            "deadline": launch.deadline,
            "max_steps": launch.total_steps,
            "total_steps": launch.total_steps,
            "batch_size": launch.batch_size,
            "resume_step": launch.resume_step,
            "epoch_steps": launch.epoch_steps,
        }
        ray.get(
            [
                m.start.remote(launch.command, launch.gang, (leader["ip"], leader["port"]), terms, launch.checkpoint)
                for m in members
            ]
        )
        self.gangs[launch.job_id] = (group, members)
        self.output_read[launch.job_id] = 0
        self.launches[launch.job_id] = launch
        self.granted[launch.job_id] = self._type_of(nodes)
        return True

    def _partner_group(self, launch: Launch) -> PlacementGroup | None:
        """The placement group of the launch's partner, if the partner runs there as its pair (same type and gang)."""
        partner = self.launches.get(launch.partner) if launch.partner is not None else None
        return self.gangs[partner.job_id][0] if partner is not None and launch.joins(partner) else None

    def _place(self, launch: Launch) -> PlacementGroup | None:
        """A new placement group of whole GPUs of the launch's type for its gang, or None if there is no room now."""
        typed = {type_resource(launch.gpu_type): 1} if self.typed else {}
        group = placement_group([{"GPU": 1, "CPU": 1, **typed}] * launch.gang, strategy=self.strategy)
        ready, _ = ray.wait([group.ready()], timeout=PLACEMENT_TIMEOUT_S)
        if ready:
            return group
        remove_placement_group(group)
        log.warning(
            "job %d: no room for a gang of %d %s GPUs (%s) now",
            launch.job_id,
            launch.gang,
            launch.gpu_type,
            self.strategy,
        )
        return None

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
        ray.get([m.set_deadline.remote(deadline) for m in self.gangs[job_id][1]])

    def stop(self, job_id: int) -> None:
        self.extend(job_id, self.clock.now())

    def status(self, job_id: int) -> GangStatus:
        try:
            states = ray.get([m.status.remote() for m in self.gangs[job_id][1]])
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
        )

    def checkpoint(self, job_id: int, newer_than: int) -> tuple[int, bytes] | None:
        try:
            return ray.get(self.gangs[job_id][1][0].checkpoint.remote(newer_than))
        except ray.exceptions.RayError:
            return None

    def output(self, job_id: int) -> bytes:
        if job_id not in self.gangs:
            return b""
        try:
            chunk: bytes = ray.get(self.gangs[job_id][1][0].output.remote(self.output_read[job_id]))
        except ray.exceptions.RayError:
            return b""
        self.output_read[job_id] += len(chunk)
        return chunk

    def member_nodes(self, job_id: int) -> list[dict[str, Any]]:
        return ray.get([m.node.remote() for m in self.gangs[job_id][1]])

    def release(self, job_id: int) -> None:
        """Kill the job's members; its GPUs go back to the pool unless its partner still runs on them."""
        group, members = self.gangs.pop(job_id)
        self.granted.pop(job_id, None)
        self.launches.pop(job_id, None)
        self.output_read.pop(job_id, None)
        for member in members:
            with contextlib.suppress(ray.exceptions.RayError):
                ray.get(member.kill.remote(), timeout=10)
            ray.kill(member)
        if any(other.id == group.id for other in self._groups()):
            return
        remove_placement_group(group)
        self._wait_released(group)

    def _groups(self) -> list[PlacementGroup]:
        """The placement groups of running jobs, each once (a pair's jobs share theirs)."""
        return list({group.id: group for group, _ in self.gangs.values()}.values())

    def _wait_released(self, group: PlacementGroup) -> None:
        """The group's GPUs are back in the pool before anything new is placed on them."""
        held = sum(len(g.bundle_specs) for g in self._groups())
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        while time.monotonic() < deadline:
            state = ray.util.placement_group_table(group).get("state")
            if state == "REMOVED" and ray.available_resources().get("GPU", 0) >= self.gpus - held - 1e-6:
                return
            time.sleep(0.05)
        log.warning("GPUs of a released gang are not back after %.0f s", RELEASE_TIMEOUT_S)

    def close(self) -> None:
        for job_id in list(self.gangs):
            self.release(job_id)
        if self.local is not None:
            self.local.close()
        elif self.started_ray:
            ray.shutdown()
