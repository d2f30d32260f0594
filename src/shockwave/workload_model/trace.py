"""The 12-column tab-separated trace format (spec §1.2): read, validate, write, byte for byte.

Columns: job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps, scale_factor, mode,
priority_weight, SLO, duration, arrival_time. Writing uses the reference's formatting, so reading a reference trace
and writing it back gives the same bytes.

An adaptive job's profile holds one entry per epoch, so `total_steps` is bounded before anything is expanded: at
most MAX_EPOCHS epochs of its model and batch size; every job (with a throughput model) to at most MAX_RUNTIME_S of
training at its initial batch size. Both are far beyond any real job; a typo's 10^12 steps would otherwise take
minutes and gigabytes. A static job's profile is one run of epochs (Gavel's week-long jobs have 10^5 and more).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from shockwave.errors import InputError
from shockwave.textfile import read_text
from shockwave.workload_model.catalog import FAMILIES, MODES, split_job_type
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
    total_steps: int
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


class TraceError(InputError):
    """Every problem found in a trace, so a user can fix them all in one go."""

    def __init__(self, problems: list[InputError]) -> None:
        self.problems = problems
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        first = problems[0]
        super().__init__(first.reason + more, path=first.path, line=first.line, field=first.field)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def format_line(job: TraceJob) -> str:
    return "\t".join(
        (
            job.job_type,
            job.command,
            job.working_directory,
            job.num_steps_arg,
            str(int(job.needs_data_dir)),
            str(job.total_steps),
            str(job.scale_factor),
            job.mode,
            _number(job.priority_weight),
            f"{job.slo:f}",
            str(job.duration),
            _number(job.arrival),
        )
    )


def write_trace(jobs: Iterable[TraceJob], path: str | Path) -> None:
    Path(path).write_text("".join(format_line(job) + "\n" for job in jobs), encoding="utf-8")


class _LineParser:
    """Parses one line, recording every problem instead of stopping at the first."""

    def __init__(self, path: Path, lineno: int, fields: list[str]) -> None:
        self.path, self.lineno, self.fields = path, lineno, dict(zip(COLUMNS, fields, strict=True))
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
        mode = self.fields["mode"]
        if mode not in MODES:
            self.problem("mode", f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        return TraceJob(
            job_type=job_type,
            command=self.fields["command"],
            working_directory=self.fields["working_directory"],
            num_steps_arg=self.fields["num_steps_arg"],
            needs_data_dir=self.fields["needs_data_dir"] == "1",
            total_steps=self.integer("total_steps", 1),
            scale_factor=self.integer("scale_factor", 1),
            mode=mode,
            priority_weight=self.real("priority_weight", 0.0),
            slo=self.real("SLO"),
            duration=self.integer("duration", 0),
            arrival=self.real("arrival_time", 0.0),
        )


def read_trace(path: str | Path, throughputs: ThroughputModel | None = None) -> list[TraceJob]:
    """Jobs sorted by arrival; raises TraceError listing every problem (with line and field).

    With `throughputs`, a job whose (model, batch size, gang size) has no known throughput is a problem too.
    """
    path = Path(path)
    text = read_text(path, "trace file")
    jobs: list[TraceJob] = []
    problems: list[InputError] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(COLUMNS):
            problems.append(
                InputError(
                    f"expected {len(COLUMNS)} tab-separated columns, found {len(fields)}", path=path, line=lineno
                )
            )
            continue
        parser = _LineParser(path, lineno, fields)
        job = parser.parse()
        if not parser.problems:
            _check_against_catalog(parser, job, throughputs)
        problems.extend(parser.problems)
        jobs.append(job)
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
    if job.scale_factor > 1 and not fam.distributable:
        parser.problem("scale_factor", f"{job.model} does not train distributed: its gang size must be 1")
        return
    if throughputs is not None and not knows(throughputs, job.model, job.batch_size, job.scale_factor):
        where = f"no throughput for {job.job_type} on {job.scale_factor} GPU(s) in {throughputs.name}"
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


def require_gangs_fit(jobs: list[TraceJob], gpus: int, path: str | Path) -> None:
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
