"""The Python API: the docs' example (docs/simulation.md) runs as written, and gives what the CLI gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import shockwave
from conftest import ROOT
from conftest import shockwave as cli
from shockwave.core.errors import InputError
from shockwave.results.model import Result

PAGE = ROOT / "docs" / "simulation.md"


@pytest.fixture(scope="module")
def my_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("api")
    cli("trace", "generate", "--jobs", "12", "--lam", "300", "--seed", "4", "-o", str(folder / "my.trace"))
    return folder / "my.trace"


def docs_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    return next(block for block in blocks if "shockwave.simulate(" in block)


def test_the_docs_example_runs(my_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(my_trace.parent)
    namespace: dict[str, object] = {}
    exec(compile(docs_example(), str(PAGE), "exec"), namespace)  # the project's own docs, not data
    result = namespace["result"]
    assert isinstance(result, Result) and len(result.jobs) == 12


def test_the_api_gives_what_simulate_json_prints(my_trace: Path) -> None:
    typed = shockwave.simulate(my_trace, policy="gavel", cluster="v100:32")
    printed = json.loads(
        cli("simulate", "--trace", str(my_trace), "--policy", "gavel", "--gpus", "32", "--json").stdout
    )
    ours = typed.to_json_dict()
    for volatile in ("wall_seconds", "provenance"):
        ours.pop(volatile), printed.pop(volatile)
    assert ours == printed
    assert [r.round for r in typed.rounds] == list(range(typed.num_rounds))
    assert shockwave.simulate(my_trace, policy="gavel", cluster=32).makespan_s == typed.makespan_s


def test_the_api_refuses_bad_input_with_input_errors(my_trace: Path) -> None:
    with pytest.raises(InputError, match="is not TYPE:GPUS"):
        shockwave.simulate(my_trace, cluster="v100")
    with pytest.raises(InputError, match="unknown policy 'nope'"):
        shockwave.simulate(my_trace, policy="nope", cluster=8)
