"""A job as an operator submits it to the scheduler service: one validated `JobSpec`, from a TOML or JSON file, from
the CLI's flags or from an HTTP request's body.

Every problem names the field (and the file), so the operator can fix it: pydantic checks each field's type and
range (strictly: `"2"` is not a number of GPUs and `true` is not 1), then `JobSpec` checks what depends on several
fields, and `JobSpec.check` what depends on the cluster. A job's `command` is an argument vector, never a shell
string; without one the job runs the family's built-in workload (`shockwave.training.train`).
"""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

from shockwave.core.cluster import MAX_GPUS, ClusterSpec
from shockwave.core.errors import InputError
from shockwave.io.jsonfile import read_json_or_toml
from shockwave.io.text import JOB_SPEC_LIMIT
from shockwave.workload_model.catalog import FAMILIES, WORKLOAD_FAMILIES, family
from shockwave.workload_model.job import Job
from shockwave.workload_model.tenants import NAME as TENANT_NAME
from shockwave.workload_model.trace import MAX_EPOCHS

MAX_WEIGHT = 1e6
"""Far beyond the reference traces' priorities (1 and 5): a typo's 1e300 would wreck the solver's scaling."""
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
"""A job's name is part of URLs and of its log file's name: letters, digits, '.', '_' and '-' only."""

PATTERN_RULES = {
    "name": "use letters, digits, '.', '_' and '-' (at most 64, the first a letter or digit)",
    "gpu_types": "a GPU type is a letter followed by letters, digits, '_' or '-'",
    "entity": "must not hold control characters",
    "tenant": "a tenant's name is letters, digits, '.', '_' and '-' (at most 64, the first a letter or digit)",
    "command": "an argument must not hold a NUL character",
}
"""What a field's pattern means, for its error message (pydantic would quote the regular expression)."""

Mode = Literal["static", "accordion", "gns"]
GpuType = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][\w-]*$", max_length=64)]
Argument = Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=r"^[^\x00]*$")]
EntityName = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]*$")]


class SpecFieldError(ValueError):
    """A check across fields, naming the one to fix (pydantic would name none)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class JobShape(BaseModel):
    """What to train, on how many GPUs of which types, for how long, and with what share of the cluster: a job but
    its command, which is what the service's journal keeps of a job it took in (never a command to run)."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)

    name: Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
    """Unique in the queue: `status`, `cancel` and `logs` name the job by it."""
    family: str
    """A catalog family (`shockwave.workload_model.catalog.FAMILIES`): the model whose throughputs the policy uses,
    and the workload that runs when there is no command (one of WORKLOAD_FAMILIES then)."""
    mode: Mode = "static"
    """Batch-size adaptation: none (static), Accordion's or GNS's."""
    batch_size: Annotated[int, Field(ge=1)] | None = None
    """The initial batch size; None: the family's smallest template batch size."""
    gpus: Annotated[int, Field(ge=1, le=MAX_GPUS)] = 1
    """The gang: GPUs of one type the job trains on together."""
    gpu_types: Annotated[list[GpuType], Field(min_length=1, max_length=64)] | None = None
    """The GPU types the job may run on; None: any type of the cluster."""
    steps: Annotated[int, Field(ge=1)] | None = None
    """The job's length in steps at its initial batch size (or `epochs`)."""
    epochs: Annotated[int, Field(ge=1, le=MAX_EPOCHS)] | None = None
    """The job's length in epochs (or `steps`)."""
    weight: Annotated[float, Field(gt=0, le=MAX_WEIGHT)] = 1.0
    """Priority weight: its share of the cluster relative to other jobs'."""
    entity: EntityName | None = None
    """Who the job belongs to (a team or user), for policies that share the cluster between entities first."""
    tenant: Annotated[str, StringConstraints(pattern=TENANT_NAME.pattern)] | None = None
    """The tenant whose quota the job runs in (`serve --tenants FILE`): a tenant's token submits as that tenant
    only; the admin's names one."""

    @field_validator("family")
    @classmethod
    def _known_family(cls, name: str) -> str:
        if name not in FAMILIES:
            raise ValueError(f"unknown family {reprlib.repr(name)}; known families: {', '.join(FAMILIES)}")
        return name

    @field_validator("gpu_types")
    @classmethod
    def _distinct_types(cls, types: list[str] | None) -> list[str] | None:
        """Lower case, as `--cluster` names types."""
        if types is None:
            return None
        lowered = [t.lower() for t in types]
        if len(set(lowered)) != len(lowered):
            raise ValueError(f"names a GPU type twice: {', '.join(types)}")
        return lowered

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        fam = family(self.family)
        if self.batch_size is None:
            self.batch_size = fam.template_batch_sizes[0]
        elif not fam.min_batch_size <= self.batch_size <= fam.max_batch_size:
            raise SpecFieldError(
                "batch_size",
                f"{self.family} trains at batch sizes {fam.min_batch_size} to {fam.max_batch_size}, "
                f"got {self.batch_size}",
            )
        if self.gpus > 1 and not fam.distributable and self.mode != "static":
            raise SpecFieldError("gpus", f"{self.family} does not train distributed: an adaptive job needs 1 GPU")
        if (self.steps is None) == (self.epochs is None):
            given = "both" if self.steps is not None else "neither"
            raise SpecFieldError("steps", f"give the job's length as steps or as epochs, not {given}")
        if self.steps is not None and self.epochs_to_train > MAX_EPOCHS:
            raise SpecFieldError(
                "steps",
                f"{self.steps} steps are {self.epochs_to_train} epochs of {self.family} at batch size "
                f"{self.batch_size}; at most {MAX_EPOCHS} are accepted",
            )
        return self

    @property
    def initial_batch_size(self) -> int:
        """The batch size the job starts at (validation fills in the family's default)."""
        assert self.batch_size is not None
        return self.batch_size

    @property
    def total_steps(self) -> int:
        """Steps at the initial batch size; a length in epochs is whole epochs of it."""
        if self.steps is not None:
            return self.steps
        assert self.epochs is not None
        return self.epochs * family(self.family).iterations_per_epoch(self.initial_batch_size)

    @property
    def epochs_to_train(self) -> int:
        return -(-self.total_steps // family(self.family).iterations_per_epoch(self.initial_batch_size))

    def check(self, cluster: ClusterSpec) -> None:
        """Refuse a job the cluster can never run: a GPU type it lacks, or a gang larger than every pool the job
        may use (a gang never spans types)."""
        missing = [t for t in self.gpu_types or () if t not in cluster.types]
        if missing:
            raise InputError(
                f"the cluster has no {', '.join(missing)} GPUs; its types: {', '.join(cluster.types)}",
                field="gpu_types",
            )
        allowed = [cluster.pool(t) for t in self.gpu_types or cluster.types]
        largest = max(allowed, key=lambda pool: pool.gpus)
        if self.gpus > largest.gpus:
            where = "the largest pool of its gpu_types" if self.gpu_types else "the cluster's largest pool"
            raise InputError(
                f"a gang of {self.gpus} GPUs never fits: {where} has {largest.gpus} ({largest.gpu_type})",
                field="gpus",
            )

    def job(self, arrival: float) -> Job:
        """The job as the scheduling loop admits it, with its weight."""
        return Job(
            model=self.family,
            batch_size=self.initial_batch_size,
            scale_factor=self.gpus,
            total_steps=self.total_steps,
            arrival=arrival,
            mode=self.mode,
            priority_weight=self.weight,
            tenant=self.tenant,
        )


class JobSpec(JobShape):
    """A job as submitted: its shape and what runs."""

    command: Annotated[list[Argument], Field(min_length=1, max_length=256)] | None = None
    """The program and its arguments; None: the family's built-in workload."""

    @model_validator(mode="after")
    def _runnable(self) -> Self:
        if self.command is None and self.family not in WORKLOAD_FAMILIES:
            raise SpecFieldError(
                "command",
                f"{self.family} has no built-in workload: give a command "
                f"(families with one: {', '.join(WORKLOAD_FAMILIES)})",
            )
        return self

    @property
    def shape(self) -> JobShape:
        return JobShape.model_validate(self.model_dump(exclude={"command"}))

    @classmethod
    def from_mapping(cls, raw: Any, *, path: str | Path | None = None) -> JobSpec:
        """A spec from parsed JSON or TOML, or an InputError naming `path` and the first field to fix."""
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            field, message = describe(exc.errors()[0])
            raise InputError(message, path=path, field=field) from None


def describe(error: Any) -> tuple[str, str]:
    """(field, message) of one pydantic error (of a JobSpec, or of a request FastAPI read), worded for the person
    who wrote the spec: the field as they wrote it (`gpu_types[1]`; `body` for the whole spec), without pydantic's
    prefixes and links."""
    kind, message = error.get("type"), str(error.get("msg", "invalid"))
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, SpecFieldError):
        return cause.field, str(cause)
    if kind == "json_invalid":
        return "body", f"not valid JSON: {cause or message}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "body", "expected a JSON object of fields (name, family, gpus, steps, ...)"
    loc = [part for part in error.get("loc", ()) if part != "body"]
    field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    if kind == "value_error" and cause is not None:
        message = str(cause)
    elif kind == "missing":
        message = "is required"
    elif kind == "extra_forbidden":
        message = f"unknown field; known fields: {', '.join(JobSpec.model_fields)}"
    elif kind == "string_pattern_mismatch" and loc:
        message = PATTERN_RULES.get(str(loc[0]), message)
    return field or "body", message


def load_spec(path: Path, overrides: dict[str, Any] | None = None) -> JobSpec:
    """The spec in a TOML (.toml) or JSON file, with `overrides` (the CLI's flags) replacing its keys."""
    raw = read_json_or_toml(path, "job spec", JOB_SPEC_LIMIT)
    if not isinstance(raw, dict):
        raise InputError("expected a job spec: an object of fields (name, family, gpus, steps, ...)", path=path)
    return JobSpec.from_mapping(raw | (overrides or {}), path=path)
