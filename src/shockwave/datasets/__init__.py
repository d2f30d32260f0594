"""The public datasets users need, shipped inside the package with their licences: the reference artifacts'
measured throughput tables, traces and configurations, each named so a command takes the name wherever it takes a
file (`--throughputs wisr`, `--trace canonical-120`, `--config tacc-32gpus`). `shockwave datasets` lists them.

A file of that name in the current folder wins over a dataset (a user's own `tacc` stays theirs). Sources, both MIT
licensed (files/LICENSE-shockwave, files/LICENSE-gavel): the Shockwave artifact (uw-mad-dash/shockwave: the TACC and
WISR throughput tables, its 120-900-job traces and solver configurations) and Gavel (stanford-futuredata/gavel:
`simulation_throughputs.json` and the Philly-derived per-virtual-cluster traces of its msr folder, seed 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Literal

Kind = Literal["throughputs", "trace", "config"]
SHOCKWAVE = "Shockwave artifact (uw-mad-dash/shockwave), MIT licence: files/LICENSE-shockwave"
GAVEL = "Gavel (stanford-futuredata/gavel), MIT licence: files/LICENSE-gavel"


@dataclass(frozen=True)
class Dataset:
    name: str
    kind: Kind
    file: str
    """Its path under the package's `files/` folder."""
    about: str
    source: str

    @property
    def path(self) -> Path:
        return Path(str(files(__name__) / "files" / self.file))


def _shockwave_trace(name: str, jobs: int, lam: int, seed: int, durations: int = 100) -> Dataset:
    about = f"Shockwave-style trace: {jobs} adaptive jobs of 0.2-5 h ({durations} candidate durations) on 1-8 GPUs"
    return Dataset(name, "trace", f"{name}.trace", f"{about}, {lam} s apart, seed {seed}", SHOCKWAVE)


def _config(name: str, what: str) -> Dataset:
    return Dataset(name, "config", f"{name}.json", f"Shockwave solver hyperparameters: {what}", SHOCKWAVE)


def _msr(cluster: str) -> Dataset:
    about = f"Philly virtual cluster {cluster}: Gavel's Philly-derived trace (seed 0)"
    return Dataset(f"gavel-msr-{cluster}", "trace", f"gavel-msr/{cluster}.trace", about, GAVEL)


MSR_CLUSTERS = (
    "0e4a51", "103959", "11cb48", "23dbec", "2869ce", "51b7ef", "6214e9", "6c71a0", "795a4c", "7f04ca", "925e2b",
    "b436b2", "e13805", "ed69ec", "ee9e8c",
)  # fmt: skip

DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset("tacc", "throughputs", "tacc.json", "throughputs measured on TACC's V100s (Shockwave)", SHOCKWAVE),
        Dataset("wisr", "throughputs", "wisr.json", "throughputs measured on WISR's GPUs (Shockwave)", SHOCKWAVE),
        Dataset("gavel", "throughputs", "gavel.json", "Gavel's V100/P100/K80 table, co-located pairs included", GAVEL),
        Dataset(
            "canonical-120",
            "trace",
            "canonical-120.trace",
            "the reference's 120-job trace, 40 s apart, seed 25 (Shockwave's main result, 32 GPUs)",
            SHOCKWAVE,
        ),
        _shockwave_trace("shockwave-220", 220, 25, 4),
        _shockwave_trace("shockwave-460", 460, 10, 1),
        _shockwave_trace("shockwave-900", 900, 5, 15),
        _shockwave_trace("shockwave-900-1000d", 900, 5, 15, durations=1000),
        *(_msr(cluster) for cluster in MSR_CLUSTERS),
        _config("shockwave-example", "the artifact's example"),
        _config("tacc-32gpus", "32 GPUs at TACC (the canonical trace's)"),
        _config("scale-64gpus", "64 GPUs"),
        _config("scale-128gpus", "128 GPUs"),
        _config("scale-256gpus", "256 GPUs"),
    )
}


def locate(value: str | Path, kind: Kind, base: Path = Path()) -> Path:
    """The file `value` names, relative to `base`: an existing file as it is, else the bundled dataset of that name
    and kind, else the path as given (its reader then says it is missing, and that `shockwave datasets` lists the
    names)."""
    path = base / value
    if path.exists():
        return path
    dataset = DATASETS.get(str(value))
    return dataset.path if dataset is not None and dataset.kind == kind else path


def names(kind: Kind) -> list[str]:
    return [name for name, d in DATASETS.items() if d.kind == kind]
