"""Sia's profile folder read by column name, interpolated as the artifact's simulator does, and refused with the
file, line and column when a value is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from shockwave.core.errors import InputError
from shockwave.workload_model.sia.profiles import (
    DEFAULT_RESTART_S,
    RESTART_S,
    canonical,
    load_application,
    load_profiles,
)
from sia_files import toy_application


def test_constants_progress_and_gain(sia_profiles: Path) -> None:
    app = load_application(sia_profiles / "toy")
    assert sorted(app.types) == ["a", "b"]
    assert (app.init_batch, app.max_batch, app.max_epochs) == (32, 64, 3)
    assert app.epoch_end(0) == 10.0 and app.total_progress == 30.0
    assert (app.restart_s, app.slowdown) == (DEFAULT_RESTART_S, 1.0)
    # s = batch / 32; gain = (var + sqr) / (var / s + sqr) with var = sqr: 1 at 32, 4/3 at 64, 8/7 at 48.
    assert app.gain(32, 0) == pytest.approx(1.0)
    assert app.gain(64, 2) == pytest.approx(4 / 3)
    assert app.gain(48, 1) == pytest.approx(2 / (1 / 1.5 + 1))


def test_step_times_interpolate_along_the_batch_and_over_shapes(sia_profiles: Path) -> None:
    a = load_application(sia_profiles / "toy").types["a"]
    assert a.step((1,), 24) == pytest.approx((0.15, 0.0))
    assert a.step((2,), 32) == pytest.approx((0.22, 0.02))
    assert a.step((4, 4), 16) == pytest.approx((0.15, 0.05))
    assert a.step((1,), 64) is None  # past what was measured
    assert a.max_local_bsz((2,)) == 32
    # Three nodes of 4 is not a placement of the file: the scalability rows say it.
    assert a.step((4, 4, 4), 16) == pytest.approx((0.3, 0.1))
    assert a.max_local_bsz((4, 4, 4)) == 32


def test_placements_are_keyed_by_their_smallest_rotation() -> None:
    assert canonical((4, 2, 4)) == canonical((2, 4, 4)) == canonical((4, 4, 2)) == (2, 4, 4)
    assert canonical((0, 4, 0, 4)) == (4, 4)
    assert canonical((16,)) != canonical((1, 6))  # 16 GPUs on a node is not 1 and 6 on two


def test_known_applications_carry_the_artifacts_restart_costs(tmp_path: Path) -> None:
    app = load_application(toy_application(tmp_path, "imagenet"))
    assert app.restart_s == RESTART_S["imagenet"] == 250.0 and app.slowdown == 1.2


@pytest.mark.parametrize(
    ("file", "header", "row", "field"),
    [
        ("placements-a.csv", "placement,local_bsz,step_time,sync_time", "40,16,0.1,0.0", "placement"),
        ("placements-a.csv", "placement,local_bsz,step_time,sync_time", "4,16,0.1,0.2", "sync_time"),
        ("placements-a.csv", "placement,local_bsz,step_time,sync_time", "4,16,nan,0.0", "step_time"),
        ("scalability-a.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time", "3,2,16,0.1,0.0", "num_replicas"),
        ("validation-32.csv", "progress,iteration,metric,grad_sqr,grad_var", "10,0,0.1,-1,1", "grad_sqr"),
    ],
)
def test_a_bad_value_names_file_line_and_column(
    sia_profiles: Path, file: str, header: str, row: str, field: str
) -> None:
    path = sia_profiles / "toy" / file
    path.write_text(f"{header}\n{row}\n")
    with pytest.raises(InputError) as error:
        load_application(sia_profiles / "toy")
    assert (error.value.path, error.value.line, error.value.field) == (str(path), 2, field)


def test_missing_columns_folders_and_files_are_named(sia_profiles: Path) -> None:
    path = sia_profiles / "toy" / "placements-a.csv"
    path.write_text("placement,local_bsz,step_time\n1,16,0.1\n")
    with pytest.raises(InputError, match="no column 'sync_time'"):
        load_application(sia_profiles / "toy")
    with pytest.raises(InputError, match="no profile for application 'bert'"):
        load_profiles(sia_profiles, ["bert"])
    with pytest.raises(InputError, match="profile folder not found"):
        load_profiles(sia_profiles / "nowhere", ["toy"])
    for validation in (sia_profiles / "toy").glob("validation-*.csv"):
        validation.unlink()
    path.write_text("placement,local_bsz,step_time,sync_time\n1,16,0.1,0\n")
    with pytest.raises(InputError, match="no validation-"):
        load_application(sia_profiles / "toy")


def test_too_few_shapes_to_interpolate_is_unknown_not_a_crash(sia_profiles: Path) -> None:
    app = sia_profiles / "toy"
    (app / "placements-a.csv").write_text("placement,local_bsz,step_time,sync_time\n1,16,0.1,0\n1,32,0.2,0\n")
    (app / "scalability-a.csv").unlink()
    a = load_application(app).types["a"]
    assert a.step((1,), 16) == pytest.approx((0.1, 0.0))
    assert a.step((3,), 16) is None
