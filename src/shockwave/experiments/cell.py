"""One simulation of an experiment: a trace (a file or generator parameters with a seed) on a cluster under a policy.

A cell carries the text of every file it reads, so it runs the same in a local process and in a Ray task on another
machine that shares no filesystem with this one. Its key names it on disk and changes whenever anything that could
change its result does, so a re-run can skip cells it has already finished.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.results.model import Result
from shockwave.results.provenance import library_versions

KEY_FORMAT = 6
"""Bumped when what a cell's result holds changes, or what a policy or the simulator decides (the package's version
is in the key, but not every change bumps it), so older cells are computed again."""
DIGEST_LENGTH = 16
TIMING_FIELDS = ("wall_seconds",)
"""Result fields that depend on the machine, not the inputs (solver latencies are handled with them)."""


@dataclass(frozen=True)
class Cell:
    label: str
    """The workload's readable name (trace file stem, or the generator's file name)."""
    trace_text: str
    gpus: int
    policy: str
    mechanics: str = "corrected"
    round_seconds: float = 120.0
    gpus_per_server: int = 1
    cluster: str | None = None
    """GPU pools by type (`--cluster`); None: `gpus` GPUs of the default type."""
    seed: int | None = None
    """The generator seed of a generated trace; None for a trace file."""
    trace_path: str | None = None
    """Where the trace came from (reported in the result); None for a generated trace."""
    throughputs_name: str | None = None
    throughputs_text: str | None = None
    config_name: str | None = None
    config_text: str | None = None
    """Shockwave's hyperparameters (JSON), only for the shockwave policy."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Case metadata reported with the result (for example the generator's parameters)."""
    policy_text: str | None = None
    """A file policy's source (`policy` is then `/path/file.py:Class`), carried like the trace: the cell runs where the
    file is not, and its digest changes with the file's bytes, not with where the file is."""
    window: tuple[int, int] | None = None
    """Job ids [A, B) the metrics cover; the run ends when they are done (Gavel's measurement window)."""
    trace_format: str = "auto"
    """"sia": the trace is Sia's workload CSV, read with `profile_texts`."""
    profiles_name: str | None = None
    profile_texts: tuple[tuple[str, str], ...] = ()
    """Sia's profile files the workload needs, (APPLICATION/NAME.csv, text), carried like the trace."""

    @cached_property
    def policy_id(self) -> str:
        from shockwave.policies.plugins import file_identity

        return self.policy if self.policy_text is None else file_identity(self.policy, self.policy_text)

    @cached_property
    def digest(self) -> str:
        """What decides the result, and nothing else: the bytes of every input file (not where they are, nor what
        they are called), the settings, and the versions of the libraries that decide numbers."""
        content = {
            "format": KEY_FORMAT,
            "trace": _sha256(self.trace_text),
            "throughputs": None if self.throughputs_text is None else _sha256(self.throughputs_text),
            "config": None if self.config_text is None else _sha256(self.config_text),
            **(
                {"sia": [self.trace_format, [(name, _sha256(text)) for name, text in self.profile_texts]]}
                if self.trace_format != "auto"
                else {}
            ),
            "settings": [
                self.gpus,
                self.policy_id,
                self.mechanics,
                self.round_seconds,
                self.gpus_per_server,
                self.cluster,
                self.window,
                self.seed,
            ],
            "versions": library_versions(),
        }
        return _sha256(json.dumps(content, sort_keys=True))[:DIGEST_LENGTH]

    @cached_property
    def key(self) -> str:
        """Readable and unique: label, cluster, policy, seed, then the digest (which alone identifies the cell)."""
        seed = f"_seed{self.seed}" if self.seed is not None else ""
        from shockwave.policies.plugins import short_name

        name = f"{self.label}_{self.gpus}gpus_{short_name(self.policy)}{seed}"
        return f"{re.sub(r'[^A-Za-z0-9_.,-]+', '-', name)[:120]}_{self.digest}"

    def comparison_identity(self) -> str:
        """The cell's digest without its policy (nor Shockwave's config): what every policy of one comparison
        shares."""
        return replace(self, policy="*", config_text=None, policy_text=None).digest

    def spec(self) -> ClusterSpec:
        return ClusterSpec.described(self.cluster, self.gpus, self.gpus_per_server)

    def describe(self) -> dict[str, Any]:
        """What a reader of the results needs to know about the cell (no file contents)."""
        return {
            "key": self.key,
            "label": self.label,
            "gpus": self.gpus,
            "cluster": self.spec().describe(),
            "policy": self.policy,
            "seed": self.seed,
            "mechanics": self.mechanics,
            "trace": self.trace_path,
            "throughputs": self.throughputs_name,
            "config": self.config_name,
            **(
                {"trace_format": self.trace_format, "profiles": self.profiles_name}
                if self.trace_format != "auto"
                else {}
            ),
            "window": list(self.window) if self.window else None,
            **self.extra,
        }


def run_cell(cell: Cell, on_round: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Simulate the cell in a scratch folder; the result is the `simulate --json` object plus the cell's
    description."""
    from shockwave.policies.plugins import copy_into
    from shockwave.policies.shockwave.config import ShockwaveConfig
    from shockwave.simulator.mechanics import preset
    from shockwave.simulator.run import simulate
    from shockwave.workload_model.sia.profiles import write_profile_files

    with tempfile.TemporaryDirectory(prefix="shockwave-cell-") as scratch:
        folder = Path(scratch)
        trace = folder / f"{cell.label}.trace"
        trace.write_text(cell.trace_text)
        throughputs = None
        if cell.throughputs_text is not None:
            throughputs = folder / "throughputs.json"
            throughputs.write_text(cell.throughputs_text)
        config = None
        if cell.config_text is not None:
            config = ShockwaveConfig.from_mapping(json.loads(cell.config_text), path=cell.config_name)
        mechanics = preset(cell.mechanics).with_round_seconds(cell.round_seconds)
        cluster = cell.spec()
        policy = cell.policy
        if cell.policy_text is not None:  # the file as the cell carries it, the one its digest names
            policy = copy_into(cell.policy, cell.policy_text, folder / "policy")
        profiles = None
        if cell.trace_format == "sia":
            profiles = write_profile_files(dict(cell.profile_texts), folder / "profiles")
        result, _ = simulate(
            trace,
            policy,
            cluster,
            mechanics,
            throughputs,
            config,
            on_round,
            window=cell.window,
            seed=cell.seed,
            trace_format=cell.trace_format,
            profiles=profiles,
        )
    result["trace"] = cell.trace_path or cell.label
    result["throughputs"] = cell.throughputs_name or result["throughputs"]
    result["cell"] = cell.describe()
    return Result.model_validate(result).to_json_dict()


def without_timing(result: dict[str, Any]) -> dict[str, Any]:
    """The parts of a result that must not change between runs of the same cell (for comparisons)."""
    clean = {k: v for k, v in result.items() if k not in TIMING_FIELDS}
    if "solver" in clean:
        clean["solver"] = {k: v for k, v in clean["solver"].items() if not k.endswith("_s")}
    if "provenance" in clean:  # the same cell may be run by another command (a sweep with --ray, say)
        clean["provenance"] = {k: v for k, v in clean["provenance"].items() if k != "command"}
    return clean


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def digest_of_key(key: str) -> str:
    return key.rsplit("_", 1)[-1]
