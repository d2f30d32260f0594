"""Input files are data, never orders (issue 31): every read is bounded and of regular files only, and no output is
written through a symbolic link planted at its name.

A FIFO or /dev/zero given as an input is only ever tried in a process of its own, under a limit on its address
space and a generous time limit: the unbounded reads these tests replace grew without end (6.6 GB in 12 s) or
blocked forever, and must not take the test run or the machine with them. An oversized file is sparse (truncate),
so making one costs nothing.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import shockwave
from shockwave.core.errors import InputError
from shockwave.experiments import store
from shockwave.experiments.sweep_spec import load_toml
from shockwave.io.atomic import write_atomically
from shockwave.io.text import read_bytes
from shockwave.training.lease import LeaseError, Terms, read_progress
from shockwave.workload_model.entities import read_entities
from shockwave.workload_model.prices import read_prices
from shockwave.workload_model.profile import read_schedules

MIB = 1024 * 1024
GOOD = (
    "ResNet-18 (batch size 32)\tpython3 main.py --data_dir=%s/cifar10 --batch_size 32\t"
    "image_classification/cifar10\t--num_steps\t1\t2000\t1\tstatic\t1\t-1.000000\t100\t0"
)
ADDRESS_SPACE = 2 * 1024 * MIB
"""Enough for the CLI to import and simulate; the old whole-file read of /dev/zero ended in a MemoryError here."""


def limited_shockwave(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, within ADDRESS_SPACE; the time limit only stops a read that blocks forever
    (a refusal takes a second)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    return subprocess.run(
        [sys.executable, "-m", "shockwave", *map(str, args)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=300,
        check=False,
    )


def sparse(path: Path, size: int) -> Path:
    with path.open("wb") as f:
        f.truncate(size)
    return path


@pytest.fixture
def good_trace(tmp_path: Path) -> Path:
    path = tmp_path / "good.trace"
    path.write_text(GOOD + "\n")
    return path


# -- bounded reads: the CLI ---------------------------------------------------------------------------------------
COMMANDS: dict[str, tuple[Callable[[Path, Path, Path], list[str | Path]], str, int]] = {
    # name: (arguments given the bad file, a good trace and a scratch folder; what the file is called; its cap)
    "trace check": (lambda bad, trace, tmp: ["trace", "check", bad], "trace file", 64),
    "simulate --throughputs": (
        lambda bad, trace, tmp: ["simulate", "--trace", trace, "--gpus", "2", "--policy", "fifo", "--throughputs", bad],
        "throughput file",
        64,
    ),
    "simulate --config": (
        lambda bad, trace, tmp: ["simulate", "--trace", trace, "--gpus", "2", "--policy", "shockwave", "--config", bad],
        "config file",
        1,
    ),
    "submit": (lambda bad, trace, tmp: ["submit", "--out", tmp / "service", bad], "job spec file", 1),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("bad", ["/dev/zero", "fifo", "oversized"])
def test_inputs_that_are_not_bounded_regular_files_are_refused(
    tmp_path: Path, good_trace: Path, command: str, bad: str
) -> None:
    """Today /dev/zero ended in a MemoryError traceback (or ate the machine's memory), a FIFO blocked forever, and
    a file of any size was read whole."""
    arguments, what, cap_mib = COMMANDS[command]
    if bad == "fifo":
        path = tmp_path / "input.fifo"
        os.mkfifo(path)
        expected = f"{path}: expected a {what}, found a FIFO (named pipe)"
    elif bad == "oversized":
        path = sparse(tmp_path / "input.big", cap_mib * MIB + 1)
        expected = f"{path}: {what} is larger than {cap_mib} MiB"
    else:
        path = Path(bad)
        expected = f"{path}: expected a {what}, found a device"
    result = limited_shockwave(*arguments(path, good_trace, tmp_path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert expected in result.stderr
    assert not (tmp_path / "service").exists()  # submit read its spec before looking for a service


# -- bounded reads: every other kind of input ----------------------------------------------------------------------
def _lease(path: Path) -> object:
    """A lease file is read by the job; its errors are LeaseErrors, turned into InputErrors to compare."""
    try:
        return Terms.read(path.parent)
    except LeaseError as exc:
        raise InputError(str(exc)) from None


READERS: dict[str, tuple[Callable[[Path], object], str, str, int]] = {
    # kind: (reader, file name, what it is called, cap in MiB)
    "sweep": (load_toml, "sweep.toml", "sweep file", 4),
    "prices": (read_prices, "prices.json", "prices file", 1),
    "entities": (read_entities, "entities.json", "entities file", 16),
    "batch sizes": (lambda path: read_schedules(path, []), "batch_sizes.json", "batch-size schedule file", 256),
    "results": (store.read_json, "results.json", "results file", 256),
    "lease": (_lease, "lease.json", "lease file", 1),
}


@pytest.mark.parametrize("kind", sorted(READERS))
def test_every_kind_of_input_has_a_cap(tmp_path: Path, kind: str) -> None:
    """Today each was read whole, whatever its size."""
    reader, name, what, cap_mib = READERS[kind]
    path = sparse(tmp_path / name, cap_mib * MIB + 1)
    with pytest.raises(InputError, match=f"{what} is larger than {cap_mib} MiB") as caught:
        reader(path)
    assert str(path) in str(caught.value)


def test_a_file_at_its_cap_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    at_cap = tmp_path / "prices.json"
    at_cap.write_bytes(b'{"prices": {"v100": 1.0}}'.ljust(MIB))
    assert read_prices(at_cap).per_gpu_hour("v100") == 1.0
    at_cap.write_bytes(at_cap.read_bytes() + b" ")
    with pytest.raises(InputError, match="larger than 1 MiB"):
        read_prices(at_cap)


def test_a_file_that_says_it_is_small_is_still_read_only_up_to_the_cap(tmp_path: Path) -> None:
    """What the file system says of a size is not trusted (/proc's files say 0): the read itself stops."""
    assert os.stat("/proc/self/maps").st_size == 0
    with pytest.raises(InputError, match="maps file is larger than"):
        read_bytes("/proc/self/maps", "maps file", 100)


def test_a_progress_report_that_is_not_a_regular_file_reads_as_none(tmp_path: Path) -> None:
    """The runtime polls a job's progress.json: a FIFO there (the job's to write) must not block the scheduler."""
    os.mkfifo(tmp_path / "progress.json")
    assert read_progress(tmp_path) is None


# -- outputs never follow links -------------------------------------------------------------------------------------
def planted(folder: Path, names: list[str], elsewhere: Path) -> dict[Path, Path]:
    """A link at each output name of `folder`, each to a file of its own in `elsewhere` that must stay untouched."""
    links = {}
    elsewhere.mkdir(exist_ok=True)
    for index, name in enumerate(names):
        target = elsewhere / f"target-{index}"
        target.write_text("precious\n")
        link = folder / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        links[link] = target
    return links


def assert_untouched(links: dict[Path, Path]) -> None:
    for link, target in links.items():
        assert target.read_text() == "precious\n", f"written through {link}"
        assert not link.is_symlink() and link.stat().st_size > 0, link


def test_simulate_out_replaces_links_instead_of_writing_through_them(tmp_path: Path, good_trace: Path) -> None:
    """Today `DIR/result.json -> elsewhere` overwrote `elsewhere`."""
    out = tmp_path / "out"
    links = planted(out, ["result.json", "rounds.csv"], tmp_path / "elsewhere")
    result = shockwave("simulate", "--trace", good_trace, "--gpus", 2, "--policy", "fifo", "--out", out)
    assert result.returncode == 0, result.stderr
    assert_untouched(links)
    assert json.loads((out / "result.json").read_text())["policy"] == "fifo"


def test_compare_outputs_and_figures_replace_links(tmp_path: Path, good_trace: Path) -> None:
    out = tmp_path / "cmp"
    names = ["results.json", "results.csv", "fifo/result.json", "figures/metrics.png", "figures/rho_cdf.svg"]
    links = planted(out, names, tmp_path / "elsewhere")
    result = shockwave("compare", "--trace", good_trace, "--gpus", 2, "--policies", "fifo", "--out", out)
    assert result.returncode == 0, result.stderr
    assert_untouched(links)
    assert (out / "figures" / "metrics.png").read_bytes().startswith(b"\x89PNG")


def test_trace_generate_replaces_a_link(tmp_path: Path) -> None:
    links = planted(tmp_path, ["new.trace"], tmp_path / "elsewhere")
    result = shockwave("trace", "generate", "--jobs", 3, "-o", tmp_path / "new.trace")
    assert result.returncode == 0, result.stderr
    assert_untouched(links)


def test_a_link_at_a_sweep_folders_lock_is_refused_not_followed(tmp_path: Path, good_trace: Path) -> None:
    """Opening the lock to append created the file the link pointed to."""
    out = tmp_path / "sweep"
    out.mkdir()
    (out / ".shockwave.lock").symlink_to(tmp_path / "created-elsewhere")
    result = shockwave("sweep", "--trace", good_trace, "--gpus", 2, "--policies", "fifo", "--out", out)
    assert result.returncode == 2, result.stderr
    assert ".shockwave.lock: cannot open the folder's lock file: it is a link" in result.stderr
    assert not (tmp_path / "created-elsewhere").exists()


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    write_atomically(path, "old")
    with pytest.raises(TypeError):
        write_atomically(path, 5)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
