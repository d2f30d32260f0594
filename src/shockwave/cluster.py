"""The cluster a policy schedules onto: homogeneous GPUs grouped into servers."""

from __future__ import annotations

from dataclasses import dataclass

from shockwave.errors import InputError
from shockwave.workload.throughput import DEFAULT_GPU_TYPE

MAX_GPUS = 1_000_000
"""Ten times the largest GPU clusters built so far; the simulator keeps state per GPU."""


@dataclass(frozen=True)
class ClusterSpec:
    gpus: int
    gpus_per_server: int = 1
    gpu_type: str = DEFAULT_GPU_TYPE

    def __post_init__(self) -> None:
        if not 1 <= self.gpus <= MAX_GPUS:
            raise InputError(f"--gpus must be >= 1 and <= {MAX_GPUS}, got {self.gpus}")
        if self.gpus_per_server < 1 or self.gpus % self.gpus_per_server:
            raise InputError(
                f"--gpus-per-server must be >= 1 and divide --gpus ({self.gpus}), got {self.gpus_per_server}"
            )

    @property
    def servers(self) -> int:
        return self.gpus // self.gpus_per_server

    def server_of(self, gpu: int) -> int:
        return gpu // self.gpus_per_server
