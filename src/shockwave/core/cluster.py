"""The cluster a policy schedules onto: pools of GPUs, one per GPU type, each grouped into servers.

GPUs are numbered across the whole cluster, pool after pool in the order the cluster was written
(`v100:32,p100:16` gives V100s 0-31 and P100s 32-47), so a placement is a tuple of GPU ids whatever the types.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from shockwave.core.errors import InputError
from shockwave.workload_model.throughput import DEFAULT_GPU_TYPE

MAX_GPUS = 1_000_000
"""Ten times the largest GPU clusters built so far; the simulator keeps state per GPU."""
_POOL = re.compile(r"^\s*([A-Za-z][\w-]*)\s*:\s*(\d+)\s*(?::\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class Pool:
    gpu_type: str
    gpus: int
    gpus_per_server: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.gpus <= MAX_GPUS:
            raise InputError(f"a cluster's {self.gpu_type} pool must have >= 1 and <= {MAX_GPUS} GPUs, got {self.gpus}")
        if self.gpus_per_server < 1 or self.gpus % self.gpus_per_server:
            raise InputError(
                f"--gpus-per-server must be >= 1 and divide the {self.gpu_type} pool's {self.gpus} GPUs, "
                f"got {self.gpus_per_server}"
            )

    @property
    def servers(self) -> int:
        return self.gpus // self.gpus_per_server


@dataclass(frozen=True)
class ClusterSpec:
    pools: tuple[Pool, ...]

    def __post_init__(self) -> None:
        if not self.pools:
            raise InputError("a cluster needs at least one GPU pool")
        types = [pool.gpu_type for pool in self.pools]
        if len(set(types)) != len(types):
            raise InputError(f"a cluster names each GPU type once, got {', '.join(types)}")
        if self.gpus > MAX_GPUS:
            raise InputError(f"a cluster may have at most {MAX_GPUS} GPUs, got {self.gpus}")

    @classmethod
    def of(cls, gpus: int, gpus_per_server: int = 1, gpu_type: str = DEFAULT_GPU_TYPE) -> ClusterSpec:
        """One pool: what `--gpus N` means."""
        if not 1 <= gpus <= MAX_GPUS:
            raise InputError(f"--gpus must be >= 1 and <= {MAX_GPUS}, got {gpus}")
        return cls((Pool(gpu_type, gpus, gpus_per_server),))

    @classmethod
    def from_options(cls, gpus: int | None, cluster: str | None, gpus_per_server: int = 1) -> ClusterSpec:
        """The cluster of a command's `--gpus N` (N GPUs of the default type) or `--cluster TYPE:N,...`."""
        if (gpus is None) == (cluster is None):
            raise InputError(
                "give the cluster as --gpus N (N GPUs of the default type) or as --cluster TYPE:N[,TYPE:N...], "
                + ("not both" if gpus is not None else "one of them")
            )
        return cls.described(cluster, gpus or 0, gpus_per_server)

    @classmethod
    def described(cls, cluster: str | None, gpus: int, gpus_per_server: int = 1) -> ClusterSpec:
        """The pools `cluster` writes out, or (None) `gpus` GPUs of the default type: what a sweep case or a cell
        keeps."""
        return cls.parse(cluster, gpus_per_server) if cluster is not None else cls.of(gpus, gpus_per_server)

    def equal_share_rate(self, gang: int, rate: Callable[[str], float]) -> float:
        """Steps/s of a gang at its equal share of each type, `rate(type)` on a whole gang there: sum_t (n_t / G) x
        rate_t over the pools that fit it (Gavel's proportional share; rho's T_iso on several types)."""
        return sum(pool.gpus / self.gpus * rate(pool.gpu_type) for pool in self.pools if gang <= pool.gpus)

    @property
    def largest_pool(self) -> int:
        """GPUs of the biggest pool: the largest gang the cluster can run (a gang never spans types)."""
        return max(pool.gpus for pool in self.pools)

    @classmethod
    def parse(cls, text: str, gpus_per_server: int = 1) -> ClusterSpec:
        """`type:gpus[:gpus per server]`, comma-separated (`v100:32`, `v100:32:4,k80:16`); a pool without its own
        server size takes `gpus_per_server`."""
        pools = []
        for part in text.split(","):
            match = _POOL.match(part)
            if match is None:
                raise InputError(
                    f"--cluster: {part.strip()!r} is not TYPE:GPUS or TYPE:GPUS:GPUS_PER_SERVER (e.g. v100:32,k80:16)"
                )
            name, gpus, per = match.groups()
            pools.append(Pool(name.lower(), int(gpus), int(per) if per else gpus_per_server))
        return cls(tuple(pools))

    @cached_property
    def gpus(self) -> int:
        return sum(pool.gpus for pool in self.pools)

    @cached_property
    def types(self) -> tuple[str, ...]:
        return tuple(pool.gpu_type for pool in self.pools)

    @property
    def default_type(self) -> str:
        """The type a policy that knows one type schedules on: the first pool's."""
        return self.pools[0].gpu_type

    def pool(self, gpu_type: str) -> Pool:
        for pool in self.pools:
            if pool.gpu_type == gpu_type:
                return pool
        raise KeyError(gpu_type)

    def gpu_ids(self, gpu_type: str) -> range:
        """The cluster-wide ids of the pool's GPUs."""
        start = 0
        for pool in self.pools:
            if pool.gpu_type == gpu_type:
                return range(start, start + pool.gpus)
            start += pool.gpus
        raise KeyError(gpu_type)

    def type_of(self, gpu: int) -> str:
        """The GPU type of a cluster-wide GPU id."""
        if not 0 <= gpu < len(self._type_by_gpu):
            raise IndexError(gpu)
        return self._type_by_gpu[gpu]

    @cached_property
    def _type_by_gpu(self) -> tuple[str, ...]:
        return tuple(pool.gpu_type for pool in self.pools for _ in range(pool.gpus))

    def server_of(self, gpu: int) -> int:
        """Cluster-wide server id of a GPU (servers hold GPUs of one type)."""
        servers = 0
        for pool in self.pools:
            if gpu < pool.gpus:
                return servers + gpu // pool.gpus_per_server
            gpu -= pool.gpus
            servers += pool.servers
        raise IndexError(gpu)

    def describe(self) -> str:
        """How `--cluster` would write it."""
        return ",".join(
            f"{p.gpu_type}:{p.gpus}" + (f":{p.gpus_per_server}" if p.gpus_per_server > 1 else "") for p in self.pools
        )
