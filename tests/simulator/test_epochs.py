import pytest

from shockwave.simulator.epochs import through_epochs


def test_each_epoch_end_is_reached_on_a_whole_second() -> None:
    # three epochs of 10 steps at 3 steps/s: 3.33 s each, reached in 3 s each
    assert through_epochs(0.0, 3.0, 100.0, [10.0, 20.0, 30.0]) == (30.0, 9.0)
    # 2.6 s to the first end: 3 s; the second's 2.6 s do not fit in the 2 s left, which train at the rate
    assert through_epochs(0.0, 10 / 2.6, 5.0, [10.0, 20.0]) == pytest.approx((10 + 2 * 10 / 2.6, 5.0))


def test_the_time_rounded_is_from_where_the_job_stands() -> None:
    # 5 steps into an epoch of 10 at 3 steps/s: 1.67 s to its end, reached in 2 s; the next 3.33 s in 3 s
    assert through_epochs(5.0, 3.0, 100.0, [10.0, 20.0]) == (20.0, 5.0)
    # an epoch's end exactly at the time left is reached; a job already done trains no more
    assert through_epochs(0.0, 2.0, 5.0, [10.0, 20.0]) == (10.0, 5.0)
    assert through_epochs(20.0, 2.0, 5.0, [10.0, 20.0]) == (20.0, 0.0)
