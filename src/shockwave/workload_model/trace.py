"""Trace files: read, validate and write, byte for byte, in our 12-column format and in Gavel's.

Our format (spec §1.2) has 12 tab-separated columns: job_type, command, working_directory, num_steps_arg,
needs_data_dir, total_steps, scale_factor, mode, priority_weight, SLO, duration, arrival_time. Writing uses the
reference's formatting, so reading a reference trace and writing it back gives the same bytes.

`read_trace` also reads Gavel's two formats, told apart by their column count (GAVEL_SPEC §1.3): its 10-column format
(`GAVEL_COLUMNS`: ours without mode and duration) and the 7-column one of its Philly-derived msr traces
(`GAVEL_MSR_COLUMNS`). The msr column order is the one Gavel's parser of that format unpacked (job_type, command,
num_steps_arg, needs_data_dir, total_steps, arrival_time, scale_factor), and the data agree: the last column holds
Philly's GPU counts (1, 2, 4, 8, 16, 32, 64 and the odd 7, 12, 20, 24), the sixth non-decreasing arrival times.
Gavel's jobs train at one batch size (mode "static") and state no duration (0). `write_trace(..., "gavel")` writes
Gavel's 10-column format as its trace generator does, so reading and writing a trace it wrote gives the same bytes.

An adaptive job's profile holds one entry per epoch, so `total_steps` is bounded before anything is expanded: at
most MAX_EPOCHS epochs of its model and batch size; every job (with a throughput model) to at most MAX_RUNTIME_S of
training at its initial batch size. Both are far beyond any real job; a typo's 10^12 steps would otherwise take
minutes and gigabytes. A static job's profile is one run of epochs (Gavel's week-long jobs have 10^5 and more).

A line that starts with `#` is a comment. A trace drawn from Gavel's generator opens with one naming the
generator's parameters (`# generator: style=gavel seed=3 ...`, `generator_header`): Gavel's simulator draws its
workload and its scheduler's random choices (the type shuffle, FIFO's type) from one seed, so a simulation of the
trace takes that seed unless told another (`generator_seed`); with another seed the same workload's FIFO average
JCT moved by up to 19.5% (seed 3 at 4 jobs/h). Traces of the Shockwave artifact's generator stay its files byte for
byte, and Gavel's format is written without comments: the references' readers take job lines only.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically
from shockwave.io.text import TRACE_LIMIT, read_text
from shockwave.workload_model.catalog import FAMILIES, MODES, split_job_type
from shockwave.workload_model.job import Job
from shockwave.workload_model.throughput import ThroughputModel, knows

log = logging.getLogger(__name__)

COLUMNS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "mode",
    "priority_weight",
    "SLO",
    "duration",
    "arrival_time",
)
GAVEL_COLUMNS = tuple(c for c in COLUMNS if c not in ("mode", "duration"))
GAVEL_MSR_COLUMNS = (
    "job_type",
    "command",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_time",
    "scale_factor",
)
MAX_EPOCHS = 100_000
"""The released traces need at most ~21,000 (a 5-hour Recommendation job at batch size 4096); the per-epoch profile
of a job at this bound takes about a second to build."""
MAX_RUNTIME_S = 365 * 24 * 3600.0
"""A year of training at the job's initial batch size; the released traces' longest job is 5 hours."""
COMMON_GANGS = (1, 2, 4, 8)
"""Gang sizes probed to tell a missing gang size from a missing model when a throughput model lacks a job."""


@dataclass(frozen=True)
class TraceJob:
    job_type: str
    command: str
    working_directory: str
    num_steps_arg: str
    needs_data_dir: bool
    total_steps: int | float
    """Whole steps, but a static job's may hold a fraction of a step (Gavel's generated jobs: run time x rate)."""
    scale_factor: int
    mode: str
    priority_weight: float
    slo: float
    duration: int
    arrival: float

    @property
    def model(self) -> str:
        return split_job_type(self.job_type)[0]

    @property
    def batch_size(self) -> int:
        return split_job_type(self.job_type)[1]

    def job(self) -> Job:
        """What the drivers need of this line (how the reference launches it is for `write_trace` alone)."""
        return Job(
            model=self.model,
            batch_size=self.batch_size,
            scale_factor=self.scale_factor,
            total_steps=self.total_steps,
            arrival=self.arrival,
            mode=self.mode,
            priority_weight=self.priority_weight,
            slo=self.slo,
            duration=self.duration,
        )


def catalog_job(
    model: str, batch_size: int, gang: int, steps: int, mode: str, arrival: float, duration: int = 60
) -> TraceJob:
    """A trace line for a catalog family, with the family's launch command and data folder."""
    fam = FAMILIES[model]
    return TraceJob(
        job_type=fam.job_type(batch_size),
        command=fam.launch_command(batch_size),
        working_directory=fam.working_directory,
        num_steps_arg=fam.num_steps_arg,
        needs_data_dir=True,
        total_steps=steps,
        scale_factor=gang,
        mode=mode,
        priority_weight=1.0,
        slo=-1.0,
        duration=duration,
        arrival=arrival,
    )


def catalog_line(job: Job) -> TraceJob:
    """`job` as a trace line, launched as its catalog family is."""
    line = catalog_job(job.model, job.batch_size, job.scale_factor, 0, job.mode, job.arrival, job.duration)
    return replace(line, total_steps=job.total_steps, priority_weight=job.priority_weight, slo=job.slo)


class TraceError(InputError):
    """Every problem found in a trace, so a user can fix them all in one go."""

    def __init__(self, problems: list[InputError]) -> None:
        self.problems = problems
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        first = problems[0]
        super().__init__(first.reason + more, path=first.path, line=first.line, field=first.field)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _fields(job: TraceJob) -> dict[str, str]:
    """Every column a format may hold, formatted as the reference writes it."""
    return {
        "job_type": job.job_type,
        "command": job.command,
        "working_directory": job.working_directory,
        "num_steps_arg": job.num_steps_arg,
        "needs_data_dir": str(int(job.needs_data_dir)),
        "total_steps": str(job.total_steps),
        "scale_factor": str(job.scale_factor),
        "mode": job.mode,
        "priority_weight": _number(job.priority_weight),
        "SLO": f"{job.slo:f}",
        "duration": str(job.duration),
        "arrival_time": _number(job.arrival),
    }


def format_line(job: TraceJob) -> str:
    """One line of our 12-column format."""
    fields = _fields(job)
    return "\t".join(fields[column] for column in COLUMNS)


def format_gavel_line(job: TraceJob) -> str:
    """One line of Gavel's 10-column format, as its trace generator writes it (%d integers: a fraction of a step is
    dropped, as Gavel's parser reads whole steps; %f SLO). An arrival time is written as ours are (whole seconds as an
    integer), since Gavel reads it as a float and ours are fractional."""
    fields = _fields(job) | {"total_steps": str(int(job.total_steps))}
    return "\t".join(fields[column] for column in GAVEL_COLUMNS)


@dataclass(frozen=True)
class TraceFormat:
    name: str
    columns: tuple[str, ...]
    label: str
    format_line: Callable[[TraceJob], str] | None = None
    """None: read only."""


SHOCKWAVE_FORMAT = TraceFormat("shockwave", COLUMNS, "shockwave's 12-column format", format_line)
GAVEL_FORMAT = TraceFormat("gavel", GAVEL_COLUMNS, "Gavel's 10-column format", format_gavel_line)
GAVEL_MSR_FORMAT = TraceFormat("gavel-msr", GAVEL_MSR_COLUMNS, "the 7-column format of Gavel's msr traces")
FORMATS = {f.name: f for f in (SHOCKWAVE_FORMAT, GAVEL_FORMAT, GAVEL_MSR_FORMAT)}
BY_COLUMN_COUNT = {len(f.columns): f for f in FORMATS.values()}
WRITABLE_FORMATS = tuple(name for name, f in FORMATS.items() if f.format_line is not None)


def write_trace(
    jobs: Iterable[TraceJob], path: str | Path, trace_format: str = "shockwave", generator: str = ""
) -> None:
    """Write `jobs` in one of WRITABLE_FORMATS (Gavel's has no mode or duration: those are not written), replacing
    what is at `path` (a link there is not followed); `generator` (a `generator_header`) opens our format's file."""
    fmt = FORMATS.get(trace_format)
    if fmt is None or fmt.format_line is None:
        raise InputError(f"unknown trace format {trace_format!r}; choose {' or '.join(WRITABLE_FORMATS)}")
    if generator and fmt is not SHOCKWAVE_FORMAT:
        raise ValueError(f"{fmt.label} has no comment lines: its readers take job lines only")
    header = f"{generator}\n" if generator else ""
    write_atomically(Path(path), header + "".join(fmt.format_line(job) + "\n" for job in jobs))


GENERATOR_PREFIX = "# generator:"


def generator_header(style: str, parameters: Mapping[str, object]) -> str:
    """The comment line that names a generated trace's generator and its parameters (tuples comma-joined)."""
    words = [f"style={style}"]
    for key, value in parameters.items():
        text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
        words.append(f"{key}={text}".replace(" ", ""))
    return f"{GENERATOR_PREFIX} {' '.join(words)}"


def generator_parameters(path: str | Path) -> dict[str, str]:
    """The parameters a generated trace's first line names (empty for any other trace)."""
    first = read_text(Path(path), "trace file", TRACE_LIMIT).partition("\n")[0]
    if not first.startswith(GENERATOR_PREFIX):
        return {}
    return dict(word.partition("=")[::2] for word in first[len(GENERATOR_PREFIX) :].split())


def generator_seed(path: str | Path) -> int | None:
    """The seed a generated trace was drawn with (None: not a generated trace, or one that names no seed)."""
    seed = generator_parameters(path).get("seed")
    if seed is None:
        return None
    if not seed.isdigit():
        raise InputError(
            f"expected the generator's seed, a whole number >= 0, got {seed!r}", path=path, line=1, field="seed"
        )
    return int(seed)


def detect_format(lines: list[list[str]]) -> TraceFormat | None:
    """The format most job lines (split at tabs) have the column count of; ties go to the earliest. A majority, not
    the first line, so that one broken first line does not make every other line wrong."""
    counts = Counter(len(fields) for fields in lines if len(fields) in BY_COLUMN_COUNT)
    if not counts:
        return None
    first: dict[int, int] = {}
    for i, fields in enumerate(lines):
        first.setdefault(len(fields), i)
    best = max(counts, key=lambda n: (counts[n], -first[n]))
    return BY_COLUMN_COUNT[best]


class _LineParser:
    """Parses one line, recording every problem instead of stopping at the first."""

    def __init__(self, path: Path, lineno: int, fields: list[str], fmt: TraceFormat = SHOCKWAVE_FORMAT) -> None:
        self.path, self.lineno, self.fields = path, lineno, dict(zip(fmt.columns, fields, strict=True))
        self.problems: list[InputError] = []

    def problem(self, column: str, message: str) -> None:
        self.problems.append(InputError(message, path=self.path, line=self.lineno, field=column))

    def integer(self, column: str, minimum: int) -> int:
        text = self.fields[column]
        try:
            value = int(text)
        except ValueError:
            self.problem(column, f"expected an integer, got {text!r}")
            return minimum
        if value < minimum:
            self.problem(column, f"must be >= {minimum}, got {value}")
        return value

    def steps(self, mode: str) -> int | float:
        """Whole steps; a static job may also have a fraction of one (Gavel's generated jobs are run time x rate)."""
        if mode == "static":
            try:
                value = float(self.fields["total_steps"])
            except ValueError:
                value = math.nan
            if math.isfinite(value) and value >= 1 and not value.is_integer():
                return value
        return self.integer("total_steps", 1)

    def real(self, column: str, minimum: float | None = None) -> float:
        text = self.fields[column]
        try:
            value = float(text)
        except ValueError:
            self.problem(column, f"expected a number, got {text!r}")
            return 0.0
        if not math.isfinite(value):
            self.problem(column, f"must be a finite number, got {text!r}")
        elif minimum is not None and value < minimum:
            self.problem(column, f"must be >= {minimum:g}, got {text}")
        return value

    def parse(self) -> TraceJob:
        job_type = self.fields["job_type"]
        try:
            model, batch_size = split_job_type(job_type)
            if model not in FAMILIES:
                self.problem("job_type", f"unknown model {model!r}; known models: {', '.join(FAMILIES)}")
            if batch_size < 1:
                self.problem("job_type", f"batch size must be >= 1, got {batch_size}")
        except ValueError as exc:
            self.problem("job_type", str(exc))
        if self.fields["needs_data_dir"] not in ("0", "1"):
            self.problem("needs_data_dir", f"expected 0 or 1, got {self.fields['needs_data_dir']!r}")
        # Gavel's formats have no mode (its jobs train at one batch size), no duration, and the msr one no folder,
        # priority or SLO.
        mode = self.fields.get("mode", "static")
        if mode not in MODES:
            self.problem("mode", f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        return TraceJob(
            job_type=job_type,
            command=self.fields["command"],
            working_directory=self.fields.get("working_directory", ""),
            num_steps_arg=self.fields["num_steps_arg"],
            needs_data_dir=self.fields["needs_data_dir"] == "1",
            total_steps=self.steps(mode),
            scale_factor=self.integer("scale_factor", 1),
            mode=mode,
            priority_weight=self.real("priority_weight", 0.0) if "priority_weight" in self.fields else 1.0,
            slo=self.real("SLO") if "SLO" in self.fields else -1.0,
            duration=self.integer("duration", 0) if "duration" in self.fields else 0,
            arrival=self.real("arrival_time", 0.0),
        )


def trace_format(path: str | Path) -> TraceFormat | None:
    """The format `read_trace` reads the file in (None: no line has a known column count)."""
    text = read_text(Path(path), "trace file", TRACE_LIMIT)
    return detect_format([fields for _, fields in _job_lines(text)])


def _job_lines(text: str) -> list[tuple[int, list[str]]]:
    """(line number, tab-separated fields) of every line but blank ones and comments."""
    lines = enumerate(text.splitlines(), start=1)
    return [(lineno, line.split("\t")) for lineno, line in lines if line.strip() and not line.startswith("#")]


def _column_count_problem(fmt: TraceFormat | None, found: int, path: Path, lineno: int) -> InputError:
    if fmt is None:
        known = ", ".join(f"{len(f.columns)} ({f.label})" for f in FORMATS.values())
        return InputError(f"expected tab-separated columns: {known}; found {found}", path=path, line=lineno)
    reason = f"expected {len(fmt.columns)} tab-separated columns, found {found}"
    if fmt is not SHOCKWAVE_FORMAT:
        reason += f" (the file's other lines are in {fmt.label})"
    return InputError(reason, path=path, line=lineno)


def read_trace(path: str | Path, throughputs: ThroughputModel | None = None) -> list[TraceJob]:
    """Jobs sorted by arrival; raises TraceError listing every problem (with line and field).

    The format (ours or one of Gavel's) is the one most lines' column count names. With `throughputs`, a job whose
    (model, batch size, gang size) has no known throughput is a problem too.
    """
    path = Path(path)
    text = read_text(path, "trace file", TRACE_LIMIT)
    numbered = _job_lines(text)
    fmt = detect_format([fields for _, fields in numbered])
    jobs: list[TraceJob] = []
    problems: list[InputError] = []
    idle: list[int] = []
    for lineno, fields in numbered:
        if fmt is None or len(fields) != len(fmt.columns):
            problems.append(_column_count_problem(fmt, len(fields), path, lineno))
            continue
        if fmt is GAVEL_MSR_FORMAT and fields[-1].strip() == "0":
            idle.append(lineno)  # a Philly job that held no GPU: Gavel's reader of this format skipped it too
            continue
        parser = _LineParser(path, lineno, fields, fmt)
        job = parser.parse()
        if not parser.problems:
            _check_against_catalog(parser, job, throughputs)
        problems.extend(parser.problems)
        jobs.append(job)
    if idle:
        log.warning("%s: skipped %d job(s) of 0 GPUs (first on line %d), as Gavel does", path, len(idle), idle[0])
    if not jobs and not problems:
        problems.append(InputError("trace is empty: no job lines", path=path))
    if problems:
        raise TraceError(problems)
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival)
    if order != list(range(len(jobs))):
        log.warning("%s: arrival times are out of order; jobs were sorted by arrival", path)
        jobs = [jobs[i] for i in order]
    return jobs


def _check_against_catalog(parser: _LineParser, job: TraceJob, throughputs: ThroughputModel | None) -> None:
    """A well-formed line's job can be profiled: its gang and batch size are known and its length is bounded."""
    fam = FAMILIES[job.model]
    single = job.scale_factor > 1 and not fam.distributable
    if single and job.mode != "static":
        parser.problem("scale_factor", f"{job.model} does not train distributed: its gang size must be 1")
        return
    # A static job's gang is the GPUs it holds (Gavel's Philly traces give every family gangs): the throughput
    # model decides whether it has a rate there.
    if throughputs is not None and not knows(throughputs, job.model, job.batch_size, job.scale_factor):
        where = f"no throughput for {job.job_type} on {job.scale_factor} GPU(s) in {throughputs.name}"
        if single:
            where = f"{job.model} does not train distributed: {where}"
        gangs = [g for g in COMMON_GANGS if knows(throughputs, job.model, job.batch_size, g)]
        if gangs:
            parser.problem("scale_factor", f"{where} (only on {', '.join(map(str, gangs))})")
        else:
            parser.problem("job_type", f"unknown model: {where}")
        return
    epochs = -(-job.total_steps // fam.iterations_per_epoch(job.batch_size))
    if epochs > MAX_EPOCHS and job.mode != "static":
        parser.problem(
            "total_steps",
            f"{job.total_steps} steps are {epochs} epochs of {job.job_type}; at most {MAX_EPOCHS} are accepted",
        )
    elif throughputs is not None:
        rate = throughputs.throughput(job.model, job.batch_size, job.scale_factor)
        if job.total_steps > rate * MAX_RUNTIME_S:
            parser.problem(
                "total_steps",
                f"{job.total_steps} steps take {job.total_steps / rate / 86400:.0f} days at {rate:.3g} steps/s; "
                f"at most {MAX_RUNTIME_S / 86400:.0f} days are accepted",
            )


def require_gangs_fit(jobs: Sequence[Job] | Sequence[TraceJob], gpus: int, path: str | Path) -> None:
    """Every gang fits on a cluster of `gpus` GPUs, or an error naming the first job that does not."""
    too_big = [i for i, job in enumerate(jobs) if job.scale_factor > gpus]
    if too_big:
        first = too_big[0]
        raise InputError(
            f"job {first} needs a gang of {jobs[first].scale_factor} GPUs but the cluster has only {gpus}: a job that "
            f"needs {jobs[first].scale_factor} GPUs can never run ({len(too_big)} such job(s))",
            path=path,
            field="scale_factor",
        )
