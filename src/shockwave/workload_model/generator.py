"""Synthetic traces with the sampling procedure of the reference generator (spec §1.4).

Separate random streams per decision keep each knob's draws independent of the others, and reproduce the released
traces exactly: Python `random.Random` seeded seed (template), seed+1 (inter-arrival), seed+2 (duration bucket),
seed+3 (gang size), seed+4 (mode), and NumPy's legacy `RandomState(seed)` for the duration within its bucket.
Bucket probabilities (0.72, 0.2, 0.05, 0.03) over the candidate-duration quantiles (0.2, 0.5, 0.9) follow the
reference's Pollux-like job-size mix.

`GeneratorParams` is a frozen pydantic dataclass checked when it is built: types by pydantic, ranges by `validate()`
(whose messages name the `trace generate` flags), so parameters that exist can always be generated from.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
from pydantic.dataclasses import dataclass

from shockwave.core.errors import InputError
from shockwave.workload_model.catalog import MODES, generator_templates
from shockwave.workload_model.throughput import ThroughputModel, UnknownThroughput
from shockwave.workload_model.trace import TraceJob, catalog_job

GANG_SIZES = (1, 2, 4, 8)
BUCKET_PROBABILITIES = (0.72, 0.2, 0.05, 0.03)
BUCKET_QUANTILES = (0.2, 0.5, 0.9)
SHORT_ACCORDION_S = 1000  # accordion jobs shorter than this become static (they would adapt into tiny jobs)
MAX_COUNT = 1_000_000
"""Most jobs, and most candidate durations, a trace is generated with (the released traces have 900 and 1000)."""
MAX_HOURS = 365 * 24
"""Longest job duration (and mean inter-arrival time) accepted: a year, as `trace check` accepts."""


@dataclass(frozen=True)
class GeneratorParams:
    jobs: int = 120
    min_hours: float = 0.2
    max_hours: float = 5.0
    num_durations: int = 100
    lam: float = 40.0
    seed: int = 25
    mode_mix: tuple[float, ...] = (0.0, 0.5, 0.5)
    """P(static), P(accordion), P(gns); any length is taken so `validate` can say what is wrong with it."""
    gpu_mix: tuple[float, ...] = (0.6, 0.3, 0.09, 0.01)
    """P(1), P(2), P(4), P(8) GPUs per job."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every knob in a range the generator can honour (NaN fails every comparison); beyond the bounds it would
        run out of memory or overflow instead of answering."""
        if not 1 <= self.jobs <= MAX_COUNT:
            raise InputError(f"--jobs must be >= 1 and <= {MAX_COUNT}, got {self.jobs}")
        if not 0 < self.min_hours <= self.max_hours <= MAX_HOURS:
            raise InputError(
                f"need 0 < --min-hours <= --max-hours <= {MAX_HOURS} (a year), got {self.min_hours}, {self.max_hours}"
            )
        if not 0 <= self.lam <= MAX_HOURS * 3600:
            raise InputError(f"--lam (mean inter-arrival seconds) must be >= 0 and at most a year, got {self.lam}")
        if not 0 <= self.seed < 2**32:
            raise InputError(f"--seed must be >= 0 and < 2**32 (NumPy's seed range), got {self.seed}")
        if self.num_durations > MAX_COUNT:
            raise InputError(f"--num-durations must be <= {MAX_COUNT}, got {self.num_durations}")
        for flag, mix, size in (("--mode-mix", self.mode_mix, 3), ("--gpu-mix", self.gpu_mix, 4)):
            if len(mix) != size or any(not math.isfinite(p) or p < 0 for p in mix) or abs(sum(mix) - 1) > 1e-3:
                raise InputError(f"{flag} needs {size} non-negative probabilities summing to 1, got {mix}")
        if any(not bucket for bucket in self._buckets()):
            raise InputError(
                f"--num-durations {self.num_durations} is too small: every duration bucket needs a "
                "candidate (use at least 5)"
            )

    def _buckets(self) -> list[range]:
        n = self.num_durations
        cuts = [0, *(round(n * q) for q in BUCKET_QUANTILES), n]
        return [range(lo, hi) for lo, hi in itertools.pairwise(cuts)]

    def file_name(self) -> str:
        """The reference naming convention: every knob that shaped the trace is in its name."""
        mix = ",".join(f"{p:g}" for p in self.mode_mix)
        gpus = ",".join(f"{p:g}" for p in self.gpu_mix)
        return (
            f"{self.jobs}_{self.min_hours:g}_{self.max_hours:g}_{self.num_durations}_{self.lam:g}_{self.seed}"
            f"_{mix}_{gpus}_multigpu_dynamic.trace"
        )


def _pick(u: float, cumulative: list[float], inclusive: bool) -> int:
    """Index of the first cumulative bound above u (at or above, when `inclusive`)."""
    for i, bound in enumerate(cumulative):
        if (u <= bound) if inclusive else (u < bound):
            return i
    return len(cumulative)


def _cumulative(mix: tuple[float, ...]) -> list[float]:
    return [sum(mix[: i + 1]) for i in range(len(mix) - 1)]


def generate(params: GeneratorParams, throughputs: ThroughputModel) -> list[TraceJob]:
    template_rng = random.Random(params.seed)
    arrival_rng = random.Random(params.seed + 1)
    bucket_rng = random.Random(params.seed + 2)
    gang_rng = random.Random(params.seed + 3)
    mode_rng = random.Random(params.seed + 4)
    value_rng = np.random.RandomState(params.seed)

    templates = generator_templates()
    candidates = np.linspace(params.min_hours, params.max_hours, params.num_durations)
    buckets = params._buckets()
    gang_bounds, mode_bounds, bucket_bounds = (
        _cumulative(params.gpu_mix),
        _cumulative(params.mode_mix),
        _cumulative(BUCKET_PROBABILITIES),
    )

    jobs: list[TraceJob] = []
    arrival = 0.0
    for index in range(params.jobs):
        template = template_rng.choice(templates)
        fam, bs = template.family, template.batch_size
        gang = GANG_SIZES[_pick(gang_rng.uniform(0, 1), gang_bounds, inclusive=True)] if fam.distributable else 1
        bucket = buckets[_pick(bucket_rng.uniform(0, 1), bucket_bounds, inclusive=False)]
        duration = round(3600 * value_rng.choice(candidates[bucket.start : bucket.stop]))
        mode = MODES[_pick(mode_rng.uniform(0, 1), mode_bounds, inclusive=False)]
        if mode == "accordion" and duration < SHORT_ACCORDION_S:
            mode = "static"
        try:
            rate = throughputs.throughput(fam.name, bs, gang)
        except UnknownThroughput as exc:
            raise InputError(f"cannot generate job {index}: {exc}") from None
        if index > 0 and params.lam > 0:
            arrival += -math.log(1.0 - arrival_rng.random()) * params.lam
        steps = max(1, int(duration * rate))  # a sub-second duration still trains (a trace needs >= 1 step)
        jobs.append(catalog_job(fam.name, bs, gang, steps, mode, float(int(arrival)), int(duration)))
    return jobs
