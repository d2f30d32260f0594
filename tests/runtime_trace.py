"""A small trace for runtime tests: 8 static jobs, gangs of 1, 2 and 4, more work than 4 GPUs hold at once."""

from __future__ import annotations

from pathlib import Path

from shockwave.workload.catalog import family
from shockwave.workload.trace import TraceJob, write_trace

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
    jobs = []
    for model, bs, gang, steps, arrival in JOBS:
        fam = family(model)
        template = TraceJob(
            job_type=fam.job_type(bs),
            command=fam.launch_command(bs),
            working_directory=fam.working_directory,
            num_steps_arg=fam.num_steps_arg,
            needs_data_dir=True,
            total_steps=steps,
            scale_factor=gang,
            mode="static",
            priority_weight=1.0,
            slo=-1.0,
            duration=60,
            arrival=arrival,
        )
        jobs.append(template)
    write_trace(jobs, path)
    return path
