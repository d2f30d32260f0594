"""What a policy (or a job's state) learns as a run goes, saved and read back as data, by one rule: from the types.

A class that keeps state names the attributes that hold it (`kept`) and annotates them; `state_dict` dumps them as
JSON-ready data through pydantic, and `load_state_dict` validates what a journal holds against the same annotations
(a wrong shape raises ValueError, never runs anything). A kept attribute that keeps state itself is restored in place
(it keeps the settings it was built with); one inside a container is rebuilt from its own kept attributes.

`state_schema` describes what a class keeps, recursively; a snapshot records its digest, so a journal written by a
version that kept something else is refused without a hand-bumped format number.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Protocol, Self, runtime_checkable

from pydantic import GetCoreSchemaHandler, PlainSerializer, PlainValidator, TypeAdapter, ValidationError
from pydantic_core import core_schema

MT_WORDS = 625
"""A Mersenne Twister state: 624 words and a position (Python's `random.Random.getstate()[1]`)."""


def _rng_state(rng: random.Random) -> list[int]:
    return list(rng.getstate()[1])


def _rng_from(words: Any) -> random.Random:
    if not isinstance(words, list) or len(words) != MT_WORDS:
        raise ValueError(f"a random generator's state is a list of {MT_WORDS} integers")
    if not all(type(w) is int and 0 <= w < 2**32 for w in words) or words[-1] > MT_WORDS - 1:
        raise ValueError("a random generator's state holds 32-bit words and a position up to 624")
    rng = random.Random()
    rng.setstate((3, tuple(words), None))
    return rng


Rng = Annotated[random.Random, PlainValidator(_rng_from), PlainSerializer(_rng_state)]
"""A random generator, kept as its Mersenne Twister state."""


@runtime_checkable
class SavesState(Protocol):
    """Anything that saves and restores what it learns: a `KeepsState`, or a plug-in with a hand-written pair."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Any) -> None: ...


class KeepsState:
    kept: ClassVar[tuple[str, ...]] = ()
    """The attributes holding what the object learns as the run goes (settings given at construction are not)."""

    def state_dict(self) -> dict[str, Any]:
        """What it has learnt, as data `json.dumps` writes (dicts, lists, numbers, strings; integer keys become
        strings there, and come back as integers; inf and nan stay floats, which JSON writers must spell)."""
        return {name: _dumped(type(self), name, getattr(self, name)) for name in self.kept}

    def load_state_dict(self, state: Any) -> None:
        """Take up `state` (from `state_dict`, through JSON) so it decides as the one that saved it would; raises
        ValueError when `state` is not of that shape. Its own attributes are all checked before any is set; what
        keeps state itself is loaded after them, in place (a failure there may leave that part loaded: a snapshot
        refused for it is never used)."""
        if not isinstance(state, Mapping) or set(state) != set(self.kept):
            got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"{type(self).__name__} keeps {sorted(self.kept)}, not {got}")
        nested = {name: value for name in self.kept if isinstance(value := getattr(self, name, None), SavesState)}
        values = {name: self._validated(name, state[name]) for name in self.kept if name not in nested}
        for name, current in nested.items():
            current.load_state_dict(state[name])  # in place: it keeps its settings
        for name, value in values.items():
            setattr(self, name, value)

    def _validated(self, name: str, value: Any) -> Any:
        try:
            return _adapter(type(self), name).validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in (name, *first["loc"]))
            raise ValueError(f"{type(self).__name__}.{where}: {first['msg']}") from None

    @classmethod
    def from_state_dict(cls, state: Any) -> Self:
        """A new object that is only what it kept (its class needs no settings beyond that)."""
        made = cls.__new__(cls)
        made.load_state_dict(state)
        return made

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """Inside a kept container it is its `state_dict`, and is rebuilt from one."""
        return core_schema.no_info_plain_validator_function(
            cls.from_state_dict,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda value: value.state_dict()),
        )

    @classmethod
    def state_schema(cls) -> dict[str, Any]:
        """What the class keeps: each kept attribute's type, classes that keep state described in turn."""
        return _class_schema(cls)


Shape = tuple[type[KeepsState], tuple[tuple[str, "Shape"], ...]]
"""A class that keeps state, with the shapes of the attributes that keep state themselves (what a digest covers)."""


def schema_digest(*kinds: KeepsState | type[KeepsState]) -> str:
    """A short digest of what the objects (or classes) keep: it changes whenever what they keep does. Computed once
    per shape (a run journals its snapshot every round)."""
    return _digest(tuple((kind, ()) if isinstance(kind, type) else _shape(kind) for kind in kinds))


def _shape(kept: KeepsState) -> Shape:
    """Its class, and what its attributes that keep state hold now (an allocator of any class behind a protocol's
    annotation, say): such an attribute holds it from construction on, so a resumed run finds the same digest."""
    nested = ((name, getattr(kept, name, None)) for name in kept.kept)
    return type(kept), tuple((name, _shape(value)) for name, value in nested if isinstance(value, KeepsState))


def _schema_of(shape: Shape) -> dict[str, Any]:
    cls, nested = shape
    return {**_class_schema(cls), **{name: {inner[0].__qualname__: _schema_of(inner)} for name, inner in nested}}


@functools.cache
def _digest(shapes: tuple[Shape, ...]) -> str:
    schema = [[cls.__qualname__, _schema_of((cls, nested))] for cls, nested in shapes]
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:16]


@functools.cache
def _class_schema(cls: type[KeepsState]) -> dict[str, Any]:
    hints = _hints(cls)
    return {name: _describe(hints[name]) for name in cls.kept}


def _dumped(cls: type[KeepsState], name: str, value: Any) -> Any:
    if type(value) in _AS_IS:  # what the adapter would give back unchanged (a job's counters, every round)
        return value
    return value.state_dict() if isinstance(value, SavesState) else _adapter(cls, name).dump_python(value)


_AS_IS = frozenset({int, float, str, bool, type(None)})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


@functools.cache
def _adapter(cls: type[KeepsState], name: str) -> TypeAdapter[Any]:
    return TypeAdapter(_hints(cls)[name])


def _describe(kind: Any) -> Any:
    """A type as plain data, recursing into what classes that keep state, and dataclasses, hold."""
    if isinstance(kind, type) and issubclass(kind, KeepsState):
        return {kind.__qualname__: kind.state_schema()}
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        hints = _hints(kind)
        return {kind.__qualname__: {f.name: _describe(hints[f.name]) for f in dataclasses.fields(kind)}}
    args = typing.get_args(kind)
    if typing.get_origin(kind) is Annotated:
        return _describe(args[0])
    if args:
        origin = typing.get_origin(kind)
        name = "Union" if origin is types.UnionType else getattr(origin, "__qualname__", str(origin))
        return [name, *(_describe(arg) for arg in args)]
    return getattr(kind, "__qualname__", str(kind))
