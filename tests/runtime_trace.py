"""Small traces for runtime tests: more work than 4 GPUs hold at once, gangs of 1, 2 and 4."""

from __future__ import annotations

from pathlib import Path

from shockwave.workload.trace import catalog_job, write_trace

# (model, batch size, gang, steps, arrival s): about 5-10 s of training each on a shared 2-core machine.
JOBS = [
    ("ResNet-18", 32, 1, 800, 0.0),
    ("LM", 20, 2, 800, 0.0),
    ("Recommendation", 2048, 1, 1500, 1.0),
    ("ResNet-18", 64, 4, 300, 2.0),
    ("Transformer", 32, 1, 400, 2.0),
    ("LM", 10, 1, 1000, 3.0),
    ("ResNet-50", 32, 2, 250, 4.0),
    ("Recommendation", 1024, 1, 1500, 5.0),
]


def write_runtime_trace(path: Path) -> Path:
    write_trace([catalog_job(m, bs, gang, steps, "static", arrival) for m, bs, gang, steps, arrival in JOBS], path)
    return path
