"""A small Sia-format profile folder and workload, written by the tests (the artifact's own files have no licence
and do not ship with the project)."""

from __future__ import annotations

from pathlib import Path

ONE_GPU = (1, 1, 32.0, 0.2, 0.0)
"""What a job times on one GPU of the toy application's type a at per-GPU batch 32 (a `Measurement`)."""


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def toy_application(folder: Path, name: str = "toy", epoch_progress: float = 10.0) -> Path:
    """Application `name` on type `a` (4 GPUs per node) and `b` (twice as slow), profiled at batches 32 and 64 over
    three epochs of `epoch_progress` (10) progress each: gain 1 at batch 32 and (1 + 1) / (1/2 + 1) = 4/3 at 64
    (noise = signal)."""
    app = folder / name
    app.mkdir(parents=True)
    for gpu_type, factor in (("a", 1.0), ("b", 2.0)):
        rows = []
        for placement, base, sync in (("1", 0.1, 0.0), ("2", 0.12, 0.02), ("4", 0.13, 0.03), ("44", 0.15, 0.05)):
            for bsz, extra in ((16, 0.0), (32, 0.1)):
                rows.append(f"{placement},{bsz},{(base + extra) * factor},{sync * factor}")
        write_csv(app / f"placements-{gpu_type}.csv", "placement,local_bsz,step_time,sync_time", rows)
        # Column order differs from the placements file, as in the artifact's.
        scalability = [f"{bsz},{0.3 * factor},{0.1 * factor},3,{r}" for r in (3, 12) for bsz in (16, 32)]
        write_csv(
            app / f"scalability-{gpu_type}.csv", "local_bsz,step_time,sync_time,num_nodes,num_replicas", scalability
        )
    for batch in (32, 64):
        epochs = [f"{epoch_progress * (e + 1)},{e},0.5,1.0,1.0" for e in range(3)]
        write_csv(app / f"validation-{batch}.csv", "progress,iteration,metric,grad_sqr,grad_var", epochs)
    return app


def toy_workload(folder: Path) -> Path:
    return write_csv(
        folder / "workload.csv",
        "name,time,application,num_replicas,batch_size",
        ["toy-0,0,toy,2,64", "toy-1,30.5,toy,1,64", "toy-2,60,toy,4,128", "toy-3,90,toy,8,256"],
    )
