"""Shared fixtures. Tests that read ../shared/reference fail under CI=true when it is missing, else skip."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import pytest

from shockwave.core.cluster import ClusterSpec
from shockwave.workload_model.goodput import goodput_of
from shockwave.workload_model.sia.goodput import SiaGoodput
from shockwave.workload_model.sia.rigid import read_sia_workload
from sia_files import toy_application, toy_workload

ROOT = Path(__file__).resolve().parents[1]
"""The project's folder (tests/ mirrors src/shockwave/ below it, so a test finds the project from here)."""
REFERENCE = ROOT.parent / "shared" / "reference"
CANONICAL_TRACE = "120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace"


def require_reference(*parts: str) -> Path:
    """Path inside ../shared/reference; missing data fails in CI and skips elsewhere."""
    path = REFERENCE.joinpath(*parts)
    if not path.exists():
        message = f"reference data {path} is missing (clone ../shared beside the project)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message, allow_module_level=True)
    return path


def shockwave(*args: str | Path | int, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "shockwave", *map(str, args)], capture_output=True, text=True, cwd=cwd, check=False
    )


def require_module(name: str, install: str) -> None:
    """A module the full suite needs (`make test` installs it): missing fails in CI, skips elsewhere."""
    try:
        __import__(name)
    except ImportError:
        message = f"{name} is not installed ({install})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message, allow_module_level=True)


REAL_PROCESSES = (
    "test_ray_backend.py",
    "test_serve_on_ray.py",
    "test_workloads.py",
    "test_lifetime.py",
    "test_two_nodes.py",
)
"""Files whose tests run real jobs on the wall clock (Ray instances, PyTorch training, kills): one worker runs them
one after another while the other runs the rest (`make test`: pytest -n 2 --dist loadgroup), so two of them never
compete for the two cores."""
REAL_PROCESS_TESTS = ("test_compare_and_sweep.py::test_scale_sweep_locally_and_on_ray_gives_identical_results",)
REAL_PROCESS_LOCK = Path(tempfile.gettempdir()) / "shockwave-tests-real-processes.lock"
"""Held while a real-process test runs, by whichever worker (or pytest session on this machine) runs it."""


def runs_real_processes(item: pytest.Item) -> bool:
    """Whether `item` is one of REAL_PROCESSES' or REAL_PROCESS_TESTS' tests."""
    test = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"  # parametrised: the function's name
    return item.path.name in REAL_PROCESSES or test in REAL_PROCESS_TESTS


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if runs_real_processes(item):
            item.add_marker(pytest.mark.xdist_group("real-processes"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """Real-process tests also wait for each other on a file lock: xdist's grouping is silently lost wherever it
    cannot tag the test's id (pytest 9.2, pytest-xdist#1386; or `pytest -n 2` without `--dist loadgroup`), and two
    of them at once starve the Ray nodes they start (one was declared dead for missed heartbeats mid-test)."""
    if not runs_real_processes(item):
        return (yield)
    with REAL_PROCESS_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return (yield)


@pytest.fixture(scope="session")
def reference() -> Path:
    return require_reference()


@pytest.fixture(scope="session")
def tacc_path() -> Path:
    return require_reference("throughputs", "tacc_throughputs.json")


@pytest.fixture(scope="session")
def wisr_path() -> Path:
    return require_reference("throughputs", "wisr_throughputs.json")


@pytest.fixture(scope="session")
def canonical_trace() -> Path:
    return require_reference("traces", CANONICAL_TRACE)


def check_results(results: list[dict]) -> None:
    """Every result validates against the result format's JSON Schema."""
    from shockwave.results.model import result_schema

    schema = result_schema()
    for result in results:
        jsonschema.validate(result, schema)


# -- Sia's formats (tests/sia_files.py writes them) -------------------------------------------------------------------
@pytest.fixture
def sia_profiles(tmp_path: Path) -> Path:
    """A Sia-format profile folder with one application, `toy`, on GPU types `a` and `b`."""
    folder = tmp_path / "traces"
    toy_application(folder)
    return folder


@pytest.fixture
def sia_workload(tmp_path: Path) -> Path:
    """A Sia-format workload of four `toy` jobs."""
    return toy_workload(tmp_path)


@pytest.fixture
def toy_goodput(sia_workload: Path, sia_profiles: Path) -> SiaGoodput:
    """The `toy` application's goodput model on `a:8:4,b:8:8`."""
    _, _, tm = read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse("a:8:4,b:8:8"), elastic=True)
    found = goodput_of(tm)
    assert isinstance(found, SiaGoodput)
    return found
