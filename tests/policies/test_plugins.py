"""Policies as plug-ins: the docs' own policy through simulate, compare, sweep and run; installed packages' entry
points; every way a plug-in can be wrong; the parameters policies declare."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, shockwave
from runtime_trace import write_runtime_trace
from shockwave.assembly.inputs import assemble
from shockwave.core.clock import VirtualClock
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.policy import Policy
from shockwave.experiments.cell import Cell
from shockwave.policies.gavel.mechanism import GavelPolicy
from shockwave.policies.registry import POLICIES, canonical_names, known_policies, make_policy, policy_info
from shockwave.policies.shockwave.policy import ShockwavePolicy
from shockwave.runtime.backend import Launch
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.runtime.journal import Journal
from shockwave.runtime.run import RunRequest, replay_arguments, run
from shockwave.simulator.mechanics import preset
from shockwave.simulator.run import simulate

OWN_POLICY = ROOT / "docs" / "own-policy.md"


def docs_policy() -> str:
    """The first code block of the "Your own policy" page."""
    section = OWN_POLICY.read_text()
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)  # type: ignore[union-attr]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A user's folder: the docs' policy as my_policy.py beside a small trace."""
    (tmp_path / "my_policy.py").write_text(docs_policy())
    write_runtime_trace(tmp_path / "small.trace")
    return tmp_path


def write(path: Path, code: str) -> Path:
    path.write_text(textwrap.dedent(code))
    return path


# -- the docs' example ---------------------------------------------------------------------------------------------
def test_the_docs_example_is_the_examples_file() -> None:
    assert docs_policy() == (ROOT / "examples" / "my_policy.py").read_text()
    assert 15 <= len(docs_policy().splitlines()) <= 30
    assert "--policy examples/my_policy.py:ShortestFirst" in OWN_POLICY.read_text()


def test_simulate_runs_the_docs_policy_from_a_relative_path(folder: Path) -> None:
    arguments = ("--trace", "small.trace", "--gpus", 4, "--policy", "my_policy.py:ShortestFirst", "--json")
    done = shockwave("simulate", *arguments, cwd=folder)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["policy"] == "shortest_first" and result["complete"] and len(result["jobs"]) == 8


def test_compare_runs_it_beside_a_built_in_policy(folder: Path) -> None:
    done = shockwave(
        "compare",
        *("--trace", "small.trace", "--gpus", 4, "--out", "cmp", "-j", 1),
        *("--policies", "gavel,my_policy.py:ShortestFirst"),
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads((folder / "cmp" / "results.json").read_text())
    assert [r["policy"] for r in results] == ["max_min_fairness", "shortest_first"]
    assert results[1]["cell"]["policy"] == f"{folder / 'my_policy.py'}:ShortestFirst"
    assert json.loads((folder / "cmp" / "shortest_first" / "result.json").read_text())["complete"]


def test_a_sweep_finds_the_file_beside_it_and_recomputes_it_when_it_changes(folder: Path, tmp_path: Path) -> None:
    study = folder / "study"
    study.mkdir()
    (study / "sweep.toml").write_text(
        'policies = ["fifo", "../my_policy.py:ShortestFirst"]\ntraces = ["../small.trace"]\ngpus = [4]\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = shockwave("sweep", study / "sweep.toml", "--out", study / "out", "-j", 1, cwd=elsewhere)
    assert first.returncode == 0, first.stderr
    assert "2 computed, 0 reused" in first.stdout
    policies = sorted(r["policy"] for r in json.loads((study / "out" / "results.json").read_text()))
    assert policies == ["fifo", "shortest_first"]
    (folder / "my_policy.py").write_text(docs_policy().replace("1e-9", "1e-6"))
    second = shockwave("sweep", study / "sweep.toml", "--out", study / "out", "-j", 1, cwd=elsewhere)
    assert second.returncode == 0, second.stderr
    assert "1 computed, 1 reused" in second.stdout  # the changed file's cell, not fifo's


def test_a_cell_digest_follows_the_file_bytes_not_its_place(tmp_path: Path) -> None:
    def cell(place: str, text: str) -> Cell:
        return Cell("t", "trace", 4, f"/{place}/my_policy.py:ShortestFirst", policy_text=text)

    assert cell("a", "x = 1").digest == cell("b", "x = 1").digest
    assert cell("a", "x = 1").digest != cell("a", "x = 2").digest
    assert "ShortestFirst" in cell("a", "x = 1").key and "/" not in cell("a", "x = 1").key
    assert cell("a", "x").comparison_identity() == Cell("t", "trace", 4, "fifo").comparison_identity()


class Dying(FakeBackend):
    """The scheduler "dies" (Ctrl-C out of the backend) at its `starts`-th job start."""

    def __init__(self, gpus: int, starts: int, clock: VirtualClock) -> None:
        super().__init__(gpus, steps_per_s=400.0, clock=clock)
        self.left = starts

    def start(self, launch: Launch) -> bool:
        self.left -= 1
        if self.left < 0:
            raise KeyboardInterrupt
        return super().start(launch)


def test_run_and_resume_rebuild_the_same_plug_in(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    request = RunRequest(
        trace=folder / "small.trace",  # the journal keeps the trace's path as given
        policy="my_policy.py:ShortestFirst",
        gpus=4,
        out=folder / "run",
        round_seconds=0.1,
        time_scale=4,
    )
    clock = VirtualClock()  # one time line across the kill and the resume, as the wall clock is
    with pytest.raises(KeyboardInterrupt):
        run(request, lambda req: Dying(req.gpus, 4, clock))
    spec = f"{folder / 'my_policy.py'}:ShortestFirst"
    assert Journal(folder / "run" / "journal.sqlite").settings()["policy"] == spec  # absolute: resumable anywhere
    monkeypatch.chdir(folder.parent)  # the operator names the file again, from wherever they are
    resumed = RunRequest(
        trace=Path(), policy=f"{folder.name}/my_policy.py:ShortestFirst", gpus=1, out=folder / "run", resume=True
    )
    result = run(resumed, lambda req: FakeBackend(req.gpus, steps_per_s=400.0, clock=clock))
    assert result["policy"] == "shortest_first" and result["policy_spec"] == spec
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 8
    arguments = replay_arguments(folder / "run", result)
    assert arguments[arguments.index("--policy") + 1] == spec


# -- installed packages ---------------------------------------------------------------------------------------------
@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package installed on sys.path, with a dist-info registering policies under `shockwave.policies`."""
    site = tmp_path / "site"
    (site / "sfq_policies-1.0.dist-info").mkdir(parents=True)
    (site / "sfq_policies-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: sfq-policies\n")
    (site / "sfq_policies-1.0.dist-info" / "entry_points.txt").write_text(
        "[shockwave.policies]\n"
        "shortest = sfq_policies:ShortestFirst\n"
        "broken = sfq_policies_missing:Nothing\n"
        "notapolicy = sfq_policies:helper\n"
        "fifo = sfq_policies:ShortestFirst\n"
    )
    (site / "sfq_policies.py").write_text(docs_policy() + "\n\ndef helper() -> None:\n    pass\n")
    monkeypatch.syspath_prepend(str(site))
    return site


def test_entry_points_are_known_by_name_and_run(installed: Path, tmp_path: Path) -> None:
    assert "shortest" in known_policies() and known_policies()[: len(POLICIES)] == list(POLICIES)
    assert known_policies().count("fifo") == 1  # a built-in name stays the built-in policy
    assert type(make_policy("fifo")).__name__ == "FifoPolicy"
    assert policy_info("shortest").name == policy_info("shortest").label == "shortest"
    assert type(make_policy("shortest")).__name__ == "ShortestFirst"
    trace = write_runtime_trace(tmp_path / "small.trace")
    result, _ = simulate(trace, "shortest", ClusterSpec.of(4), preset("corrected"))
    assert result["policy"] == "shortest" and result["complete"]
    with pytest.raises(InputError, match=r"unknown policy 'nosuch'; known policies: .*shortest"):
        policy_info("nosuch")


def test_a_broken_entry_point_names_itself_and_its_package(installed: Path) -> None:
    with pytest.raises(InputError, match=r"'broken' \(sfq_policies_missing:Nothing from the installed package "):
        make_policy("broken")
    with pytest.raises(InputError, match=r"'notapolicy' .* is not a policy: .* this is a function"):
        make_policy("notapolicy")


def test_entry_points_come_from_importlib_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint, EntryPoints

    point = EntryPoint("gavel_again", "shockwave.policies.gavel.fifo:FifoPolicy", "shockwave.policies")
    seen: list[str] = []

    def entry_points(*, group: str) -> EntryPoints:
        seen.append(group)
        return EntryPoints([point])

    monkeypatch.setattr("importlib.metadata.entry_points", entry_points)
    assert "gavel_again" in known_policies() and seen == ["shockwave.policies"]
    policy = policy_info("gavel_again").offered(min_realloc_interval_s=30.0, config=None)
    assert isinstance(policy, GavelPolicy) and policy.min_realloc_interval_s == 30.0


# -- a plug-in that is wrong ----------------------------------------------------------------------------------------
PLUGIN = """\
    from shockwave.core.policy import Policy

    def helper():
        pass

    class NotMine:
        pass

    class Good(Policy):
        def plan(self, view):
            return view.plan_on_default_type(view.jobs)

    class Fussy(Good):
        def __init__(self, level):
            raise ValueError(f"level {level} is too low")
"""


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("missing.py:Good", r"missing\.py: policy file not found"),
        ("plugin.py:Absent", r"plugin\.py: no class 'Absent' in this policy file; the policies it defines: Fussy, Go"),
        ("plugin.py:helper", r"plugin\.py: class 'helper' is not a policy: .*load_state_dict\); this is a function"),
        ("plugin.py:NotMine", r"plugin\.py: class 'NotMine' is not a policy: .*the class NotMine, which is neither"),
        ("plugin.py:Policy", r"plugin\.py: class 'Policy' is not a policy: .*the Policy base class itself"),
        ("plugin.py", r"plugin\.py' names a file but not the class in it: write .*plugin\.py:ClassName"),
        ("plugin.py:1st", r"'1st' is not a Python class name"),
        ("raises.py:Good", r"raises\.py:3: loading class 'Good' failed: the file raised ZeroDivisionError"),
        ("syntax.py:Good", r"syntax\.py:1: loading class 'Good' failed: the file raised SyntaxError"),
    ],
)
def test_each_plug_in_error_names_the_file_and_class(tmp_path: Path, spec: str, message: str) -> None:
    write(tmp_path / "plugin.py", PLUGIN)
    write(tmp_path / "raises.py", "import math\n\nx = 1 / 0\n")
    write(tmp_path / "syntax.py", "class Good(:\n")
    with pytest.raises(InputError, match=message):
        make_policy(spec if spec.startswith("missing") else str(tmp_path / spec))


def test_a_failing_constructor_names_the_class_and_line(tmp_path: Path) -> None:
    spec = f"{write(tmp_path / 'plugin.py', PLUGIN)}:Fussy"
    with pytest.raises(InputError, match=r"plugin\.py:15: policy class 'Fussy': building it failed: ValueError: level"):
        make_policy(spec, level=1)
    with pytest.raises(InputError, match=r"policy class 'Fussy': parameter 'level' has no default and was not given"):
        make_policy(spec)


def test_the_cli_reports_a_plug_in_error_in_one_line(tmp_path: Path) -> None:
    write(tmp_path / "plugin.py", PLUGIN)
    trace = write_runtime_trace(tmp_path / "small.trace")
    done = shockwave("simulate", "--trace", trace, "--gpus", 4, "--policy", "plugin.py:helper", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "plugin.py: class 'helper' is not a policy" in done.stderr
    done = shockwave(
        "compare", "--trace", trace, "--gpus", 4, "--out", "cmp", "--policies", "fifo,plugin.py:Absent", cwd=tmp_path
    )
    assert done.returncode == 2 and "no class 'Absent'" in done.stderr and "Traceback" not in done.stderr
    done = shockwave(
        "simulate", "--trace", trace, "--gpus", 4, "--policy", "plugin.py:Good", "--config", trace, cwd=tmp_path
    )
    assert done.returncode == 2 and "policy 'Good' has none" in done.stderr


def test_results_call_a_plug_in_by_a_name_of_its_own(tmp_path: Path) -> None:
    write(
        tmp_path / "names.py",
        """\
        from shockwave.core.policy import Policy
        from shockwave.policies.gavel.fifo import FifoPolicy
        from shockwave.policies.shockwave.policy import ShockwavePolicy

        class MyFifo(FifoPolicy):
            pass

        class Named(Policy):
            name = "named"

        class Renamed(Named):
            pass

        class Impostor(ShockwavePolicy):
            name = "shockwave"

        class Slashed(Policy):
            name = "../up"

        class Again(Policy):
            name = "named"
        """,
    )
    spec = f"{tmp_path / 'names.py'}:"
    assert policy_info(spec + "MyFifo").label == "MyFifo"  # "fifo" is the package's class's name, not this one's
    assert policy_info(spec + "Named").label == policy_info(spec + "Renamed").label == "named"
    with pytest.raises(InputError, match="is named 'shockwave', as a built-in policy is"):
        policy_info(spec + "Impostor")
    with pytest.raises(InputError, match=r"its name '\.\./up' cannot name results"):
        policy_info(spec + "Slashed")
    with pytest.raises(InputError, match="are both called 'named' in results"):
        canonical_names([spec + "Named", "fifo", spec + "Again"])
    assert canonical_names(["gavel", "max_min_fairness", spec + "Named"]) == ["max_min_fairness", spec + "Named"]


def test_a_changed_file_is_loaded_again(tmp_path: Path) -> None:
    path = write(tmp_path / "p.py", "from shockwave.core.policy import Policy\n\nclass P(Policy):\n    name = 'one'\n")
    assert policy_info(f"{path}:P").label == "one"
    path.write_text(path.read_text().replace("'one'", "'two'"))  # same size, same second: no stale bytecode
    assert policy_info(f"{path}:P").label == "two"


# -- declared parameters -------------------------------------------------------------------------------------------
def test_every_built_in_policy_takes_its_constructor_s_parameters() -> None:
    base = {"min_realloc_interval_s", "seed", "round_robin"}
    quirks = ("fifo", "finish_time_fairness", "finish_time_fairness_perf", "finish_time_fairness_packed")
    costly = (
        "max_sum_throughput_normalized_by_cost_perf",
        "max_sum_throughput_normalized_by_cost_perf_SLOs",
        "max_sum_throughput_normalized_by_cost_packed_SLOs",
    )
    expected = {
        "shockwave": {"config"},
        "themis": {"lease_s", "fairness_knob"},
        "sia": {"p", "lambda_n", "project_throughputs"},
        "pollux": {"p"},
        "allox": {*base, "alpha"},
        **{key: {*base, "reference_quirks"} for key in (*quirks, "max_min_fairness_packed")},
        **{key: {*base, "classes"} for key in ("max_min_fairness", "max_min_fairness_perf")},
        **{
            key: {*base, "entities"}
            for key in ("max_min_fairness_water_filling", "max_min_fairness_water_filling_perf")
        },
        **{key: {*base, "prices"} for key in costly},
    }
    for name, info in POLICIES.items():
        assert {p.name for p in info.params} == expected.get(name, base), name
    interval = {p.name: p for p in policy_info("gavel").params}["min_realloc_interval_s"]
    assert interval.default == 1000.0 and interval.types == (float,)
    assert policy_info("shockwave").takes_config and not policy_info("themis").takes_config


def test_make_policy_checks_names_and_types() -> None:
    policy = make_policy("gavel", min_realloc_interval_s=240)
    assert isinstance(policy, GavelPolicy) and policy.min_realloc_interval_s == 240.0
    assert isinstance(policy.min_realloc_interval_s, float)
    with pytest.raises(InputError, match=r"policy 'shockwave' has no parameter 'min_realloc_interval_s' \(its para"):
        make_policy("shockwave", min_realloc_interval_s=240.0)
    with pytest.raises(InputError, match=r"policy 'fifo': parameter 'min_realloc_interval_s' must be float, not str"):
        make_policy("fifo", min_realloc_interval_s="soon")
    with pytest.raises(InputError, match="must be float, not bool"):
        make_policy("ossp", min_realloc_interval_s=True)
    with pytest.raises(InputError, match="parameter 'config' must be ShockwaveConfig or None, not int"):
        make_policy("shockwave", config=3)
    with pytest.raises(InputError, match="unknown policy 'nosuch'"):
        make_policy("nosuch")


def test_shockwave_takes_a_config_file(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"k": 0.5}))
    policy = assemble("shockwave", ClusterSpec.of(4), config=tmp_path / "c.json").build(60.0)
    assert isinstance(policy, ShockwavePolicy) and policy.config.k == 0.5


def test_a_driver_offers_and_each_policy_takes_what_it_declares(tmp_path: Path) -> None:
    spec = f"{write(tmp_path / 'keen.py', KEEN)}:Keen"
    offered = {"min_realloc_interval_s": 60.0, "config": None}
    assert isinstance(policy_info("shockwave").offered(**offered), ShockwavePolicy)
    assert policy_info("fifo").offered(**offered).min_realloc_interval_s == 60.0  # type: ignore[attr-defined]
    keen = policy_info(spec).offered(**offered)
    assert (keen.interval, keen.greed) == (60.0, 2)  # type: ignore[attr-defined]
    assert [p.name for p in policy_info(spec).params] == ["min_realloc_interval_s", "greed"]
    assert make_policy(spec, greed=5).greed == 5  # type: ignore[attr-defined]
    with pytest.raises(InputError, match=r"policy class 'Keen': parameter 'greed' must be int, not str"):
        make_policy(spec, greed="lots")
    with pytest.raises(InputError, match=r"keen\.py: policy class 'Keen' has no parameter 'verbose'"):
        make_policy(spec, verbose=True)


KEEN = """\
    from __future__ import annotations

    from shockwave.core.policy import Policy

    class Keen(Policy):
        def __init__(self, min_realloc_interval_s: float = 1.0, *, greed: int = 2, **ignored: object) -> None:
            self.interval, self.greed = min_realloc_interval_s, greed
"""


def test_a_policy_is_a_policy() -> None:
    assert all(isinstance(make_policy(name), Policy) for name in POLICIES)


# -- allocators: a new program on Gavel's mechanism -----------------------------------------------------------------
def docs_allocator() -> str:
    page = OWN_POLICY.read_text()
    section = page[page.index("**A new program on Gavel's mechanism.**") :]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)  # type: ignore[union-attr]


def test_the_docs_allocator_is_the_examples_file_and_short() -> None:
    assert docs_allocator() == (ROOT / "examples" / "my_allocator.py").read_text()
    assert len(docs_allocator().splitlines()) <= 30


def test_an_allocator_from_a_file_runs_on_gavels_mechanism_in_simulate_and_compare(folder: Path) -> None:
    (folder / "my_allocator.py").write_text(docs_allocator())
    policy = "my_allocator.py:ThroughputPlusFairness"
    done = shockwave(
        "simulate",
        "--trace",
        "small.trace",
        "--gpus",
        4,
        "--policy",
        policy,
        "--policy-param",
        "fairness=2",
        "--json",
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["policy"] == "throughput_plus_fairness" and result["complete"] and len(result["jobs"]) == 8
    assert result["policy_params"] == {"fairness": 2.0}
    built = make_policy(str(folder / policy), fairness=0.5, min_realloc_interval_s=60.0)
    assert isinstance(built, GavelPolicy) and built.allocator.fairness == 0.5
    compared = shockwave(
        "compare",
        *("--trace", "small.trace", "--gpus", 4, "--out", "cmp", "-j", 1),
        "--policies",
        f"gavel,{policy}",
        cwd=folder,
    )
    assert compared.returncode == 0, compared.stderr
    results = json.loads((folder / "cmp" / "results.json").read_text())
    assert [r["policy"] for r in results] == ["max_min_fairness", "throughput_plus_fairness"]
    assert all(r["complete"] for r in results)


def test_an_allocator_s_parameters_are_checked_like_a_policy_s(folder: Path) -> None:
    (folder / "my_allocator.py").write_text(docs_allocator())
    with pytest.raises(InputError, match=r"has no parameter 'lease_s' \(its parameters: fairness, min_realloc"):
        make_policy(str(folder / "my_allocator.py:ThroughputPlusFairness"), lease_s=3.0)
    write(folder / "neither.py", "class Neither:\n    def allocate(self, inputs): ...\n")
    with pytest.raises(InputError, match=r"is neither"):
        make_policy(str(folder / "neither.py:Neither"))


def test_a_mistyped_policy_name_suggests_the_closest() -> None:
    with pytest.raises(InputError, match=r"unknown policy 'shockwve'; did you mean 'shockwave'\?"):
        make_policy("shockwve")
