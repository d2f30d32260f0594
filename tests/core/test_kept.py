"""What a stateful piece keeps (`shockwave.core.kept`): saved and restored from its types, through JSON, exactly;
anything of another shape refused naming the attribute; a digest that moves whenever what is kept does."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shockwave.core.kept import KeepsState, Rng, schema_digest


@dataclass
class Tally:
    wins: int
    share: float


class Forecast(KeepsState):
    kept = ("observed", "slowdown")
    observed: list[int]
    slowdown: dict[str, float]


class Learner(KeepsState):
    kept = ("seen", "steps", "pairs", "tally", "rng", "forecasts", "inner")
    seen: dict[int, str]
    steps: dict[int, int | float]
    pairs: list[tuple[int, int]]
    tally: Tally
    rng: Rng
    forecasts: dict[int, Forecast]
    inner: Forecast

    def __init__(self, seed: int, setting: str = "built") -> None:
        self.setting = setting  # a construction setting: never kept
        self.seen, self.steps, self.pairs = {}, {}, []
        self.tally, self.rng, self.forecasts = Tally(0, 0.0), random.Random(seed), {}
        self.inner = Forecast.from_state_dict({"observed": [], "slowdown": {}})


def through_json(state: dict[str, Any]) -> Any:
    """As a journal keeps it: strict JSON, non-finite floats as strings (the snapshot's rule)."""

    def strict(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if isinstance(value, dict):
            return {k: strict(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strict(v) for v in value]
        return value

    return json.loads(json.dumps(strict(state), allow_nan=False))


KEPT = "['forecasts', 'inner', 'pairs', 'rng', 'seen', 'steps', 'tally']"
finite_or_inf = st.floats(allow_nan=False) | st.just(math.inf)


@given(
    seen=st.dictionaries(st.integers(0, 10**6), st.text(max_size=5)),
    steps=st.dictionaries(st.integers(0, 10**6), st.integers(0, 10**9) | st.floats(0, 1e9)),
    pairs=st.lists(st.tuples(st.integers(0, 99), st.integers(100, 199))),
    slowdown=st.dictionaries(st.sampled_from(["v100", "k80"]), finite_or_inf),
    draws=st.integers(0, 50),
)
def test_what_is_kept_comes_back_exactly_through_json(
    seen: dict[int, str],
    steps: dict[int, int | float],
    pairs: list[tuple[int, int]],
    slowdown: dict[str, float],
    draws: int,
) -> None:
    saved = Learner(seed=7)
    saved.seen, saved.steps, saved.pairs, saved.tally = seen, steps, pairs, Tally(3, 0.1 + 0.2)
    saved.forecasts = {4: Forecast.from_state_dict({"observed": [32, 64], "slowdown": slowdown})}
    saved.inner.slowdown = slowdown
    for _ in range(draws):
        saved.rng.random()
    restored = Learner(seed=0, setting="rebuilt")
    restored.load_state_dict(through_json(saved.state_dict()))
    assert restored.seen == seen and restored.pairs == pairs and restored.tally == Tally(3, 0.1 + 0.2)
    assert [(k, type(v), v) for k, v in restored.steps.items()] == [(k, type(v), v) for k, v in steps.items()]
    assert restored.forecasts[4].observed == [32, 64] and restored.forecasts[4].slowdown == slowdown
    assert restored.inner.slowdown == slowdown
    assert restored.rng.random() == saved.rng.random()  # the same draws from here on
    assert restored.setting == "rebuilt"  # settings are the new object's


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: {**s, "seen": {"x": "a"}}, "Learner.seen.x.[key]: Input should be a valid integer"),
        (lambda s: {**s, "steps": {"1": "many"}}, "Learner.steps.1"),
        (lambda s: {**s, "pairs": [[1, 2, 3]]}, "Learner.pairs.0: Tuple should have at most 2 items"),
        (lambda s: {**s, "tally": {"wins": 1.5, "share": 0}}, "Learner.tally.wins"),
        (lambda s: {**s, "rng": [1, 2]}, "Learner.rng: Value error, a random generator's state is a list of 625"),
        (lambda s: {**s, "inner": {"observed": []}}, "Forecast keeps ['observed', 'slowdown'], not ['observed']"),
        (
            lambda s: {k: v for k, v in s.items() if k != "rng"},
            f"Learner keeps {KEPT}, not ['forecasts', 'inner', ",
        ),
        (lambda s: [s], f"Learner keeps {KEPT}, not list"),
    ],
)
def test_a_state_of_another_shape_is_refused_naming_the_attribute(change: Any, message: str) -> None:
    learner = Learner(seed=1)
    learner.seen = {1: "a"}
    with pytest.raises(ValueError) as refused:
        learner.load_state_dict(change(through_json(learner.state_dict())))
    assert str(refused.value).startswith(message)
    assert learner.seen == {1: "a"}  # refused whole: nothing taken up


def test_the_digest_moves_when_what_is_kept_does() -> None:
    class Wider(Forecast):
        kept = ("observed", "slowdown", "extra")
        extra: int

    class Retyped(Forecast):
        slowdown: dict[str, int]  # type: ignore[assignment]

    digests = {schema_digest(kind) for kind in (Forecast, Wider, Retyped)}
    assert len(digests) == 3
    assert schema_digest(Learner(seed=1)) == schema_digest(Learner(seed=2))  # what is kept, not its values
