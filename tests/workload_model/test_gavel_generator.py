"""Gavel's workload generator (GAVEL_SPEC §2): the reference's draw order, its knobs, and its job stream.

That the stream is the reference's, job for job, is checked end to end by tests/simulator/test_gavel_reference.py (the
reference simulator's per-job completion times on generated workloads); here the draw order is pinned on its own.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from conftest import require_reference, shockwave
from shockwave.core.errors import InputError
from shockwave.workload_model.gavel_generator import (
    TEMPLATES,
    GavelWorkload,
    duration_s,
    generate_gavel,
    scale_factor,
)
from shockwave.workload_model.throughput import TableThroughputs
from shockwave.workload_model.trace import read_trace


class Flat:
    """Every job a known rate (the generator only scales durations by it); the built-in model lacks A3C/CycleGAN."""

    name = "flat"

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = "v100") -> float:
        return 0.5 + len(model) + batch_size / 1000 + gpus


MODEL = Flat()


class Fixed(random.Random):
    """Returns the given uniform(0, 1) values in turn."""

    def __init__(self, *values: float) -> None:
        super().__init__(0)
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


@pytest.mark.parametrize(
    ("r", "gang"),
    [(0.0, 1), (0.6999, 1), (0.7, 2), (0.8, 2), (0.8001, 4), (0.95, 4), (0.9501, 8), (0.99999, 8)],
)
def test_scale_factor_bounds_are_inclusive_in_the_reference_order(r: float, gang: int) -> None:
    assert scale_factor(Fixed(r)) == gang


def test_duration_buckets() -> None:
    # u >= 0.8: 60 * 10^uniform(3, 4); else 60 * 10^uniform(1.5, 3)
    assert duration_s(Fixed(0.8, 0.0)) == pytest.approx(60 * 10**3)
    assert duration_s(Fixed(0.79, 1.0)) == pytest.approx(60 * 10**3)
    assert duration_s(Fixed(0.1, 0.0)) == pytest.approx(60 * 10**1.5)


def test_the_draw_order_of_one_job() -> None:
    # seed 0: job stream seed 2, arrivals seed 3. Redo the draws by hand for the first two jobs.
    rng, gaps = random.Random(2), random.Random(3)
    expected = []
    arrival = 0.0
    for _ in range(2):
        rng.uniform(0, 1)  # the scale factor: drawn even when multi-GPU jobs are off
        bucket = rng.random()
        exponent = rng.uniform(3, 4) if bucket >= 0.8 else rng.uniform(1.5, 3)
        template = rng.choice(TEMPLATES)
        expected.append((template.job_type, 60 * 10**exponent, arrival))
        arrival += -math.log(1.0 - gaps.random()) / (1.0 / 1800)
    jobs = generate_gavel(GavelWorkload(2, 1800.0, seed=0), MODEL)
    for job, (job_type, duration, at) in zip(jobs, expected, strict=True):
        rate = MODEL.throughput(job.model, job.batch_size, 1)
        assert (job.job_type, job.arrival, job.scale_factor, job.mode) == (job_type, at, 1, "static")
        assert job.total_steps == duration * rate and job.duration == int(duration)


def test_a_longer_workload_starts_with_the_shorter_one() -> None:
    short = generate_gavel(GavelWorkload(50, 900.0, seed=4, multi_gpu=True), MODEL)
    long = generate_gavel(GavelWorkload(120, 900.0, seed=4, multi_gpu=True), MODEL)
    assert long[:50] == short


def test_multi_gpu_changes_gangs_not_the_arrivals() -> None:
    single = generate_gavel(GavelWorkload(300, 600.0, seed=1), MODEL)
    multi = generate_gavel(GavelWorkload(300, 600.0, seed=1, multi_gpu=True), MODEL)
    assert [j.arrival for j in single] == [j.arrival for j in multi]
    assert {j.scale_factor for j in single} == {1}
    gangs = [j.scale_factor for j in multi]
    assert set(gangs) == {1, 2, 4, 8}
    assert 0.6 < gangs.count(1) / len(gangs) < 0.8  # P(1) = 0.7
    distributed = {t.job_type for t in TEMPLATES if t.distributed}
    assert all(j.job_type in distributed for j in multi if j.scale_factor > 1)


def test_static_workload_and_priorities() -> None:
    jobs = generate_gavel(GavelWorkload(400, 0.0, seed=0, multi_priority=True), MODEL)
    assert {j.arrival for j in jobs} == {0.0}
    weights = [j.priority_weight for j in jobs]
    assert set(weights) == {1.0, 5.0} and 0.12 < weights.count(5.0) / len(jobs) < 0.28  # P(5) = 0.2


@pytest.mark.parametrize(("jobs", "lam"), [(0, 10.0), (10, -1.0), (10, math.nan), (10, math.inf)])
def test_bad_knobs_are_refused(jobs: int, lam: float) -> None:
    with pytest.raises(InputError):
        GavelWorkload(jobs, lam)


def test_cli_generates_the_interface_the_checks_use(tmp_path: Path) -> None:
    out = tmp_path / "gavel_s0.trace"
    table = require_reference("gavel", "simulation_throughputs.json")
    gavel = ("trace", "generate", "--style", "gavel", "--throughputs", table)
    done = shockwave(*gavel, "--jobs", "30", "--lam", "1800", "--seed", "0", "-o", out)
    assert done.returncode == 0, done.stderr
    model = TableThroughputs.from_json(table)
    assert read_trace(out) == generate_gavel(GavelWorkload(30, 1800.0, seed=0), model)
    static = tmp_path / "static.trace"
    done = shockwave(*gavel, "--static", "--multi-gpu", "--jobs", "20", "-o", static)
    assert done.returncode == 0 and {j.arrival for j in read_trace(static)} == {0.0}
    rate = shockwave(*gavel, "--jobs-per-hour", "2", "--jobs", "5", "-o", out)
    assert rate.returncode == 0 and read_trace(out) == generate_gavel(GavelWorkload(5, 1800.0), model)
    for bad in (["--static", "--lam", "60"], [], ["--lam", "60", "--jobs-per-hour", "2"]):
        refused = shockwave(*gavel, "--jobs", "5", *bad, "-o", out)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
