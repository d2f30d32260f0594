"""Sia's allocation ILP on instances small enough to solve by hand."""

from __future__ import annotations

from shockwave.policies.sia.configs import Config
from shockwave.policies.sia.ilp import Option, choose

ONE, TWO = Config("a", 1), Config("a", 2)


def _options(*jobs: int) -> list[Option]:
    return [Option(j, c, g) for j in jobs for c, g in ((ONE, 1.0), (TWO, 4.0))]


def test_the_gpus_go_where_goodput_grows_most() -> None:
    # Two GPUs: one job on both costs 4^-0.5 + 1.1 (one left out) = 1.6 < 1 + 1 for both on one.
    assert choose(_options(0, 1), {"a": 2}, p=-0.5, lambda_n=1.1) in ({0: TWO}, {1: TWO})
    assert choose(_options(0, 1), {"a": 4}, p=-0.5, lambda_n=1.1) == {0: TWO, 1: TWO}
    # With lambda_n below every cost, nobody is worth allocating.
    assert choose(_options(0, 1), {"a": 4}, p=-0.5, lambda_n=0.4) == {}


def test_a_restoring_job_keeps_its_configuration() -> None:
    assert choose(_options(0, 1), {"a": 2}, p=-0.5, lambda_n=1.1, pinned={1: ONE}) == {0: ONE, 1: ONE}


def test_positive_p_maximises() -> None:
    assert choose(_options(0, 1), {"a": 2}, p=0.5, lambda_n=0.1) in ({0: TWO}, {1: TWO})


def test_a_required_job_is_allocated_even_where_nobody_is_worth_it() -> None:
    # lambda_n 0.4 leaves everybody out (above); a required job still gets the configuration that costs it least.
    assert choose(_options(0, 1), {"a": 4}, p=-0.5, lambda_n=0.4, required={1}) == {1: TWO}


def test_a_heavier_job_gets_the_gpus() -> None:
    # Two GPUs, one job on both: the job whose terms weigh twice as much.
    weighted = [Option(o.job, o.config, o.goodput, 2.0 if o.job == 1 else 1.0) for o in _options(0, 1)]
    assert choose(weighted, {"a": 2}, p=-0.5, lambda_n=1.1) == {1: TWO}
    other = [Option(o.job, o.config, o.goodput, 2.0 if o.job == 0 else 1.0) for o in _options(0, 1)]
    assert choose(other, {"a": 2}, p=-0.5, lambda_n=1.1) == {0: TWO}
