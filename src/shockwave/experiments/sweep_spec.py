"""What a sweep asks for, from a TOML file and/or command-line flags, checked before anything runs.

    policies = ["shockwave", "max_min_fairness"]   # or "all"
    seeds = [0, 1, 2]                              # generator seeds (traces from files have none)
    gpus = [32, 64]                                # crossed with `traces` and `generate` below
    clusters = ["v100:16:4"]                       # more clusters, by GPU type (`--cluster`); crossed too
    traces = ["a.trace"]
    generate = [{ jobs = 120, lam = 40 }]          # generator parameters (see `trace generate`), one trace per seed
    generate = [{ style = "gavel", jobs = 6000, jobs_per_hour = 3 }]   # Gavel's workloads (also multi_gpu = true)
    window = "4000:5000"                           # metrics over these job ids; runs end when they are done
    throughputs = "tacc_throughputs.json"          # optional; default: the built-in model
    config = "tacc_32gpus.json"                    # Shockwave's hyperparameters, optional
    mechanics = "corrected"                        # or "reference" to reproduce published numbers
    round_seconds = 120                            # default: the mechanics preset's (gavel 360)

    [[case]]                                       # explicit pairs: a workload on its own cluster (and config)
    trace = "220_....trace"
    gpus = 64
    config = "scale_64gpus.json"

Relative paths are relative to the TOML file; a bundled dataset's name (`shockwave datasets`) works for a file.
Flags override the file's top-level keys and add traces.

`Case` and `SweepSpec` are pydantic dataclasses (a spec built in code is type-checked too); a TOML table goes
through the checks below first, whose messages name the sweep file's keys.
"""

from __future__ import annotations

import math
from dataclasses import field, fields
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.dataclasses import dataclass

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.datasets import Kind, locate
from shockwave.io.jsonfile import read_toml
from shockwave.io.text import SWEEP_LIMIT
from shockwave.simulator.mechanics import preset
from shockwave.workload_model.gavel_generator import GavelWorkload
from shockwave.workload_model.generator import GeneratorParams

TOP_KEYS = {
    "policies",
    "seeds",
    "gpus",
    "clusters",
    "traces",
    "generate",
    "throughputs",
    "config",
    "mechanics",
    "round_seconds",
    "gpus_per_server",
    "window",
    "case",
}
CASE_KEYS = {"trace", "generate", "gpus", "cluster", "config"}
GENERATOR_KEYS = {f.name for f in fields(GeneratorParams)} - {"seed"}
GAVEL_KEYS = {"style", "jobs", "lam", "jobs_per_hour", "static", "multi_gpu", "multi_priority"}
GENERATOR_TYPES = {f.name: str(f.type) for f in fields(GeneratorParams)}
"""Each generator key's annotation ("int", "float" or a tuple of floats), so a value of the wrong type is reported
before the generator meets it as a traceback."""


@dataclass(frozen=True)
class Case:
    """One workload (a trace file, or generator parameters) on one cluster: `gpus` GPUs of the default type, or
    the pools of `cluster` (`gpus` is then their total)."""

    gpus: int
    trace: Path | None = None
    generate: dict[str, Any] | None = None
    config: Path | None = None
    cluster: str | None = None

    def spec(self, gpus_per_server: int = 1) -> ClusterSpec:
        return ClusterSpec.described(self.cluster, self.gpus, gpus_per_server)


@dataclass
class SweepSpec:
    cases: list[Case] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: [0])
    throughputs: Path | None = None
    config: Path | None = None
    mechanics: str = "corrected"
    round_seconds: float = 120.0
    gpus_per_server: int = 1
    window: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": [
                {
                    "gpus": c.gpus,
                    "cluster": c.cluster,
                    "trace": str(c.trace) if c.trace else None,
                    "generate": c.generate,
                    "config": str(c.config or self.config) if (c.config or self.config) else None,
                }
                for c in self.cases
            ],
            "policies": self.policies,
            "seeds": self.seeds,
            "mechanics": self.mechanics,
            "round_seconds": self.round_seconds,
            "gpus_per_server": self.gpus_per_server,
            "throughputs": str(self.throughputs) if self.throughputs else None,
            "window": list(self.window) if self.window else None,
        }


def load_toml(path: Path) -> dict[str, Any]:
    """The sweep file's table: UTF-8 with or without a byte-order mark, as editors save it."""
    return read_toml(path, "sweep", SWEEP_LIMIT)


def spec_from(raw: dict[str, Any], base: Path, source: Path | None) -> SweepSpec:
    """A spec from a parsed TOML table (paths relative to `base`); `source` names the file in errors."""
    unknown = set(raw) - TOP_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; known: {sorted(TOP_KEYS)}", path=source)
    mechanics = _string(raw.get("mechanics", "corrected"), "mechanics", source)
    spec = SweepSpec(
        policies=_policies(raw.get("policies", []), base, source),
        seeds=_ints(raw.get("seeds", [0]), "seeds", source, minimum=0),
        throughputs=_path(raw.get("throughputs"), base, "throughputs", "throughputs", source),
        config=_path(raw.get("config"), base, "config", "config", source),
        mechanics=mechanics,
        round_seconds=_number(raw["round_seconds"], "round_seconds", source)
        if "round_seconds" in raw
        else preset(mechanics).round_seconds,
        gpus_per_server=_one_int(raw.get("gpus_per_server", 1), "gpus_per_server", source, minimum=1),
        window=_window(raw.get("window"), source),
    )
    sizes = [
        *_ints(raw.get("gpus", []), "gpus", source, minimum=1),
        *_clusters(raw.get("clusters", []), "clusters", source),
    ]
    spec.cases += product(
        _paths(raw.get("traces", []), base, "traces", "trace", source),
        _generators(raw.get("generate", []), "generate", source),
        sizes,
        source,
    )
    for index, entry in enumerate(_tables(raw.get("case", []), "case", source)):
        where = f"case[{index}]"
        unknown = set(entry) - CASE_KEYS
        if unknown:
            raise InputError(f"unknown key(s) {sorted(unknown)} in {where}; known: {sorted(CASE_KEYS)}", path=source)
        if ("trace" in entry) == ("generate" in entry):
            raise InputError(f"{where} needs exactly one of 'trace' and 'generate'", path=source)
        if ("gpus" in entry) == ("cluster" in entry):
            raise InputError(f"{where} needs exactly one of 'gpus' and 'cluster'", path=source)
        config = _path(entry.get("config"), base, f"{where}.config", "config", source)
        traces = [_path(entry["trace"], base, f"{where}.trace", "trace", source)] if "trace" in entry else []
        generators = _generators([entry["generate"]], f"{where}.generate", source) if "generate" in entry else []
        sizes = (
            _ints(entry["gpus"], f"{where}.gpus", source, minimum=1)
            if "gpus" in entry
            else _clusters(entry["cluster"], f"{where}.cluster", source)
        )
        for case in product(traces, generators, sizes, source):
            spec.cases.append(Case(case.gpus, case.trace, case.generate, config, case.cluster))
    return spec


def product(
    traces: list[Path], generators: list[dict[str, Any]], sizes: list[int | str], source: Path | None = None
) -> list[Case]:
    """Every workload on every cluster: a GPU count of the default type, or a `--cluster` string."""
    if (traces or generators) and not sizes:
        raise InputError("workloads given but no cluster: set gpus (--gpus) or clusters (--cluster)", path=source)
    on = [_case_size(size) for size in sizes]
    return [Case(g, trace=t, cluster=c) for t in traces for g, c in on] + [
        Case(g, generate=p, cluster=c) for p in generators for g, c in on
    ]


def _case_size(size: int | str) -> tuple[int, str | None]:
    return (size, None) if isinstance(size, int) else (ClusterSpec.parse(size).gpus, size)


def _clusters(value: Any, key: str, source: Path | None) -> list[str]:
    """`--cluster` strings (one, or a list), each checked now so a typo is reported before anything runs."""
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in values):
        raise InputError(f"'{key}' must be cluster strings like \"v100:32,k80:16\", got {value!r}", path=source)
    for text in values:
        ClusterSpec.parse(text)
    return values


def parse_generator(text: str, where: str = "--generate") -> dict[str, Any]:
    """'jobs=120,lam=40' -> {'jobs': 120, 'lam': 40.0}; mixes are given as 'mode_mix=0/0.5/0.5', a Gavel-style
    workload as 'style=gavel,jobs=6000,jobs_per_hour=3,multi_gpu=true'."""
    params: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"{where} expects key=value pairs, got {item!r}")
        key, value = key.strip(), value.strip()
        if key == "style" or value in ("true", "false"):
            params[key] = value if key == "style" else value == "true"
        else:
            params[key] = [_scalar(v, where) for v in value.split("/")] if "/" in value else _scalar(value, where)
    return _generators([params], where, None)[0]


def _scalar(value: str, where: str) -> float | int:
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            raise InputError(f"{where}: {value!r} is not a number") from None


# -- checks ------------------------------------------------------------------------------------------------------------
def _policies(value: Any, base: Path, source: Path | None) -> list[str]:
    from shockwave.policies.registry import canonical_names, expand_groups

    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError('\'policies\' must be a list of names or groups ("all", "published", ...)', path=source)
    try:
        return canonical_names(expand_groups(value), base=base)  # a policy file relative to the sweep file
    except InputError as exc:
        raise InputError(str(exc) if exc.path else exc.reason, path=source, field="policies") from None


def _one_int(value: Any, key: str, source: Path | None, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InputError(f"'{key}' must be an integer >= {minimum}, got {value!r}", path=source)
    return value


def _ints(value: Any, key: str, source: Path | None, minimum: int) -> list[int]:
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in values):
        raise InputError(f"'{key}' must be integers >= {minimum}, got {value!r}", path=source)
    return values


def _number(value: Any, key: str, source: Path | None) -> float:
    if not _is_real(value) or value <= 0:
        raise InputError(f"'{key}' must be a finite number > 0, got {value!r}", path=source)
    return float(value)


def _is_real(value: Any) -> bool:
    """A finite int or float (TOML's inf and nan are floats, a boolean is not a number)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _string(value: Any, key: str, source: Path | None) -> str:
    if not isinstance(value, str):
        raise InputError(f"'{key}' must be a string, got {value!r}", path=source)
    return value


def _path(value: Any, base: Path, key: str, kind: Kind, source: Path | None) -> Path | None:
    """A file relative to the sweep file, or a bundled dataset's name (`shockwave datasets`)."""
    if value is None:
        return None
    path = locate(_string(value, key, source), kind, base)
    if not path.is_file():
        raise InputError(f"'{key}' names no file and no bundled {kind} dataset: {path}", path=source)
    return path


def _paths(value: Any, base: Path, key: str, kind: Kind, source: Path | None) -> list[Path]:
    values = value if isinstance(value, list) else [value]
    return [p for v in values if (p := _path(v, base, key, kind, source)) is not None]


def _tables(value: Any, key: str, source: Path | None) -> list[dict[str, Any]]:
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, dict) for v in values):
        raise InputError(f"'{key}' must be a table or an array of tables", path=source)
    return values


def _window(value: Any, source: Path | None) -> tuple[int, int] | None:
    """ "A:B" or [A, B]: job ids A..B-1."""
    if value is None:
        return None
    if isinstance(value, str):
        start, sep, stop = value.partition(":")
        value = [int(start), int(stop)] if sep and start.isdigit() and stop.isdigit() else value
    ok = isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and v >= 0 for v in value)
    if not ok or value[0] >= value[1]:
        raise InputError(f"'window' must be \"A:B\" (or [A, B]) with job ids A < B, got {value!r}", path=source)
    return value[0], value[1]


def gavel_workload(table: dict[str, Any], seed: int) -> GavelWorkload:
    """A Gavel-style generator table (`style = "gavel"`) as the workload of one seed."""
    lam = table.get("lam")
    if "jobs_per_hour" in table:
        lam = 3600.0 / table["jobs_per_hour"]
    if table.get("static", False):
        lam = 0.0
    return GavelWorkload(
        jobs=table["jobs"],
        lam=float(lam),
        seed=seed,
        multi_gpu=table.get("multi_gpu", False),
        multi_priority=table.get("multi_priority", False),
    )


def _gavel_generator(table: dict[str, Any], key: str, source: Path | None) -> None:
    unknown = set(table) - GAVEL_KEYS
    if unknown:
        raise InputError(
            f"unknown key(s) {sorted(unknown)} in {key} (Gavel style); known: {sorted(GAVEL_KEYS)}", path=source
        )
    if not isinstance(table.get("jobs"), int) or isinstance(table.get("jobs"), bool):
        raise InputError(f"{key}: 'jobs' must be an integer", path=source)
    for flag in ("static", "multi_gpu", "multi_priority"):
        if not isinstance(table.get(flag, False), bool):
            raise InputError(f"{key}: '{flag}' must be true or false, got {table[flag]!r}", path=source)
    rates = [k for k in ("lam", "jobs_per_hour") if k in table]
    if len(rates) + table.get("static", False) != 1:
        raise InputError(f"{key}: give exactly one of 'lam', 'jobs_per_hour' and 'static = true'", path=source)
    if rates and (not _is_real(table[rates[0]]) or table[rates[0]] <= 0):
        raise InputError(f"{key}: '{rates[0]}' must be a finite number > 0, got {table[rates[0]]!r}", path=source)
    try:
        gavel_workload(table, 0)
    except InputError as exc:
        raise InputError(f"{key}: {exc.reason}", path=source) from None


def _generators(value: Any, key: str, source: Path | None) -> list[dict[str, Any]]:
    checked = []
    for table in _tables(value, key, source):
        style = table.get("style", "shockwave")
        if style == "gavel":
            _gavel_generator(table, key, source)
            checked.append(table)
            continue
        if style != "shockwave":
            raise InputError(f"{key}: unknown style {style!r}; choose shockwave or gavel", path=source)
        table = {k: v for k, v in table.items() if k != "style"}
        unknown = set(table) - GENERATOR_KEYS
        if unknown:
            raise InputError(
                f"unknown generator key(s) {sorted(unknown)} in {key}; known: {sorted(GENERATOR_KEYS)}", path=source
            )
        for name, given in table.items():
            kind = GENERATOR_TYPES[name]
            if kind == "int":
                ok = isinstance(given, int) and not isinstance(given, bool)
            elif kind == "float":
                ok = _is_real(given)
            else:
                ok = isinstance(given, list | tuple) and all(_is_real(v) for v in given)
            if not ok:
                what = {"int": "an integer", "float": "a finite number"}.get(kind, "a list of finite numbers")
                raise InputError(f"{key}: '{name}' must be {what}, got {given!r}", path=source)
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
        try:
            GeneratorParams(**params)
        except InputError as exc:
            raise InputError(f"{key}: {exc.reason}", path=source) from None
        except ValidationError as exc:  # a type the checks above let through: one line, not pydantic's report
            error = exc.errors()[0]
            raise InputError(f"{key}: '{error['loc'][0]}' {error['msg']}", path=source) from None
        checked.append(table)
    return checked
