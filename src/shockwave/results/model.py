"""The result object `simulate --json`, `compare`, `sweep` and `run` write, as typed models.

The models are the result format: `check_result` validates saved files with them and `result_schema()` is the JSON
Schema generated from them. Validation is strict (a number written as a string, or a boolean where a count is
expected, is refused, not converted), so a file that passes can be read as it is. Keys the models do not name are
kept (`extra="allow"`): policy summaries and driver-specific details travel with the result without a change here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_serializer,
    model_validator,
)

from shockwave.core.errors import InputError


def _as_written(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Checked as a number, kept as written: an integer stays an integer (`"time_scale": 4`, not 4.0), so the file
    written back is the file read."""
    checked = handler(value)
    return value if type(value) is int else checked


NonNegative = Annotated[float, Field(ge=0), WrapValidator(_as_written)]
Positive = Annotated[float, Field(gt=0), WrapValidator(_as_written)]
Fraction = Annotated[float, Field(ge=0, le=1), WrapValidator(_as_written)]
Count = Annotated[int, Field(ge=0)]


def _as_tuple(value: Any) -> Any:
    """JSON has no tuples: a triple arrives as a list."""
    return tuple(value) if isinstance(value, list) else value


TimelinePoint = Annotated[
    tuple[Annotated[float, WrapValidator(_as_written)], int, int], BeforeValidator(_as_tuple), PlainSerializer(list)
]
"""[time_s, running_jobs, busy_gpus] of one round, written as a list as before."""


class _Stored(BaseModel):
    """Checked as JSON gives it: no string-to-number or boolean-to-count conversion, no NaN nor infinity (JSON has
    neither), and unknown keys kept so nothing a newer writer added is lost on the way through. Keys are written
    back in the order they came: writers lay them out differently (`run` puts its own among the header's), and the
    file written back must be the file read."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow")
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        stored = handler(data)
        if isinstance(data, dict):
            stored._order = tuple(data)
        return stored

    @model_serializer(mode="wrap")
    def _in_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped = handler(self)
        first = [key for key in self._order if key in dumped]
        return {key: dumped[key] for key in [*first, *(key for key in dumped if key not in self._order)]}


class JobRow(_Stored):
    """One finished job. `shockwave run` adds preemptions, restarts, measured_throughput, starts,
    batch_size_switches, startup_s, restore_s, checkpoint_s and switch_s (kept as extra keys)."""

    id: Count
    arrival_s: NonNegative
    finish_s: NonNegative
    jct_s: NonNegative
    t_isolated_s: Positive = Field(
        description="Isolated runtime; on several GPU types at the job's equal share of each (rho's denominator)."
    )
    ftf: NonNegative = Field(description="Finish-time fairness rho = JCT / (T_iso x max(1, N/G)).")
    batch_size_changes: Count


class RoundRow(_Stored):
    """One round of a run, a row of rounds.csv (the result's timeline holds the same as triples)."""

    round: Count
    time_s: NonNegative
    running_jobs: Count
    busy_gpus: Count


class Provenance(_Stored):
    """What produced the result: library versions, the simulation model's parameters, the command."""

    versions: dict[str, str] = Field(description="Versions of shockwave, Python and the libraries that decide results.")
    mechanics: dict[str, Any] | None = Field(None, description="Every parameter of the simulation model.")
    command: list[str] | None = None


class SolverStats(_Stored):
    """Shockwave's market solves: how many, how many fell back or relaxed fairness, and their latency."""

    solves: Count
    fallbacks: Count
    infeasible: Count
    exact: Count | None = None
    node_limited: Count | None = None
    greedy: Count | None = Field(None, description="Windows solved greedily instead of by HiGHS.")
    p50_s: NonNegative
    p95_s: NonNegative
    max_s: NonNegative


class Cell(_Stored):
    """A sweep's or comparison's description of the simulation (`Cell.describe()`); case metadata such as the
    generator's parameters are extra keys."""

    key: str
    label: str
    gpus: Annotated[int, Field(ge=1)]
    cluster: str | None = Field(None, description="GPU pools by type, as --cluster writes them.")
    policy: str
    seed: int | None
    mechanics: str
    trace: str | None = None
    throughputs: str | None = None
    config: str | None = None
    window: list[int] | None = None


class EstimatedThroughput(_Stored):
    """A rate the throughput table does not list (a gang larger than it measured), and what it was made from."""

    model: str
    batch_size: Annotated[int, Field(ge=1)]
    gpus: Annotated[int, Field(ge=1)]
    gpu_type: str
    rate: NonNegative
    basis: str


class PriceTable(_Stored):
    """Prices a result's cost is counted in."""

    name: str
    usd_per_gpu_hour: dict[str, Positive]


class Result(_Stored):
    """One run of one policy on one trace and cluster (fields in `simulate --json`'s order)."""

    policy: str
    trace: str
    gpus: Annotated[int, Field(ge=1)]
    cluster: str | None = Field(None, description="GPU pools by type, as --cluster writes them (v100:32,k80:16).")
    mechanics: str = Field(description="Mechanics preset (reference, corrected, ...), or runtime for a real run.")
    round_seconds: Positive
    realloc_seconds: NonNegative | None = Field(None, description="Runtime only.")
    throughputs: str
    seed: Count | None = Field(
        None, description="What seeded the policies' random draws: --seed, else a generated trace's own seed."
    )
    time_scale: Positive | None = Field(None, description="Runtime only.")
    makespan_s: NonNegative
    avg_jct_s: NonNegative
    worst_ftf: NonNegative
    unfair_fraction: Fraction
    utilization: Fraction
    utilization_by_type: dict[str, Fraction] | None = Field(None, description="Clusters of several GPU types.")
    gpu_hours_by_type: dict[str, NonNegative] | None = Field(
        None, description="GPU-hours each type was busy over the whole run (a pair sharing a gang counts once)."
    )
    cost_by_type: dict[str, NonNegative] | None = Field(
        None, description="Dollars per type: its GPU-hours x its price (absent when no price covers the cluster)."
    )
    total_cost: NonNegative | None = Field(None, description="Dollars: the sum of cost_by_type.")
    prices: PriceTable | None = Field(None, description="The prices cost_by_type is counted in.")
    slo_jobs: Count | None = Field(None, description="Measured finished jobs with an SLO (traces with SLOs only).")
    slo_violations: Count | None = Field(
        None,
        description="Of slo_jobs, those with JCT > SLO x duration (the reference compares JCT with the deadline).",
    )
    window: list[int] | None = Field(None, description="--window A:B: the job ids [A, B) the metrics cover.")
    jobs_arrived: Count | None = Field(None, description="With a window: jobs that had arrived when the run ended.")
    num_rounds: Count
    makespan_lower_bound_s: NonNegative
    jobs: list[JobRow]
    complete: bool = Field(description="false when some jobs never finished (listed in unfinished_jobs).")
    unfinished_jobs: list[int]
    failed_jobs: dict[str, str | None] | None = Field(None, description="Runtime only: job id -> why it was given up.")
    wall_seconds: NonNegative
    restart_overhead_s: NonNegative | None = Field(None, description="Runtime only: mean start-up of a lease.")
    solver: SolverStats | None = None
    config: dict[str, Any] | None = Field(None, description="Shockwave's hyperparameters.")
    provenance: Provenance
    cell: Cell | None = Field(None, description="compare and sweep only.")
    timeline: list[TimelinePoint] | None = Field(None, description="compare, sweep and run: one triple per round.")
    estimated_throughputs: list[EstimatedThroughput] | None = Field(
        None, description="Rates the table lacks (gangs beyond it), estimated with the built-in model's scaling."
    )

    @property
    def rounds(self) -> list[RoundRow]:
        """One row per round, from the timeline (empty when the result has none)."""
        return [
            RoundRow(round=i, time_s=t, running_jobs=running, busy_gpus=busy)
            for i, (t, running, busy) in enumerate(self.timeline or [])
        ]

    def to_json_dict(self) -> dict[str, Any]:
        """What goes to disk: the keys given, in their order, with their values as given (an integer stays one, a
        float is the same float); absent optional keys stay absent."""
        return self.model_dump(exclude_unset=True)

    @classmethod
    def from_json_dict(
        cls, data: Any, path: str | Path, *, where: str = "result", needs: tuple[str, ...] = ()
    ) -> Result:
        """A saved result, or an InputError naming the file and the first field (`where` and its path inside the
        result) that does not match; `needs` are optional keys this reader requires."""
        try:
            result = cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            loc, message = tuple(error["loc"]), error["msg"]
            if error["type"] == "missing" and isinstance(loc[-1], str):
                loc, message = loc[:-1], f"{loc[-1]!r} is a required property"
            elif error["type"] == "model_type":
                message = "expected a JSON object"
            _refuse(where + _dotted(loc), message, path)
        missing = [key for key in needs if key not in data]
        if missing:
            _refuse(where, f"{missing[0]!r} is a required property", path)
        return result


def _dotted(loc: tuple[int | str, ...]) -> str:
    """('jobs', 3, 'ftf') -> '.jobs[3].ftf'; a key that is no name is quoted (it may hold a line break)."""
    return "".join(f".{part}" if isinstance(part, str) and part.isidentifier() else f"[{part!r}]" for part in loc)


def _refuse(at: str, message: str, path: str | Path) -> NoReturn:
    message = message if len(message) <= 200 else message[:197] + "..."
    raise InputError(
        f"not a shockwave result ({at}: {message}): was it written by another version? run compare or sweep again",
        path=path,
    )


def result_schema() -> dict[str, Any]:
    """The JSON Schema of a result, generated from the models (what `check_result` enforces)."""
    return Result.model_json_schema()
