"""Policies from outside the package: a class in a Python file, or one an installed package registers.

A file is named as `path/to/file.py:ClassName` wherever a policy name goes (`simulate --policy`, `compare
--policies`, a sweep's `policies`, `run --policy`). The file is run, as the user asked by naming it, and the class
is a policy (it subclasses `shockwave.core.policy.Policy`) or an allocator: a new program on Gavel's round mechanism,
which subclasses `shockwave.policies.gavel.mechanism.Stateless` (or defines `allocate`, `state_dict` and
`load_state_dict`) and runs as Gavel's policies do. An installed package registers either by name under the entry
point group `shockwave.policies`, in its pyproject.toml:

    [project.entry-points."shockwave.policies"]
    shortest_first = "my_package.policies:ShortestFirst"

Results call a file's policy by the class's own `name` attribute, else by the class name, and a package's by its
entry point name. Code only ever comes from the file or package the user named: a resumed run loads the file its
operator names again (the journal only checks it is the run's), and nothing read from a journal or a results file is
ever executed.

This module loads classes; `registry` says which parameters they take and builds them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from shockwave.core.errors import InputError
from shockwave.core.policy import Policy
from shockwave.io.text import read_text

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "shockwave.policies"
LABEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z")
"""What a policy's name in results may look like: it names a folder of a comparison."""


@dataclass(frozen=True)
class FileSpec:
    """A class in a Python file: `path/to/file.py:ClassName`, its path absolute."""

    path: Path
    class_name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.class_name}"


def is_file_spec(spec: str) -> bool:
    """Does `spec` name a file (`file.py:Class`, or a bare `file.py` that forgot its class) rather than a policy?"""
    return ".py:" in spec or spec.endswith(".py")


def parse_file_spec(spec: str, base: Path | None = None) -> FileSpec:
    """The file and class `spec` names; a relative path is taken from `base` (default: the working folder)."""
    file, colon, class_name = spec.rpartition(":")
    if not colon or not file.endswith(".py"):
        raise InputError(f"policy {spec!r} names a file but not the class in it: write {spec}:ClassName")
    if not class_name.isidentifier():
        raise InputError(f"policy {spec!r}: {class_name!r} is not a Python class name")
    path = Path(file).expanduser()
    return FileSpec(((base or Path.cwd()) / path).resolve(), class_name)


def absolute_spec(spec: str, base: Path | None = None) -> str:
    """`spec` with a file's relative path made absolute (from `base`), without loading anything."""
    return str(parse_file_spec(spec, base)) if is_file_spec(spec) else spec


def source_of(spec: str) -> str | None:
    """The text of the file a file spec names (None for any other policy): what a sweep or comparison cell carries,
    so it runs where the file is not, and is computed again when the file changes."""
    return read_text(parse_file_spec(spec).path, "policy file") if is_file_spec(spec) else None


def short_name(spec: str) -> str:
    """A file spec's class name (a readable part of file names), any other policy's name unchanged."""
    return spec.rpartition(":")[2] if is_file_spec(spec) else spec


def file_identity(spec: str, text: str) -> str:
    """What decides a file policy's decisions: its class and its file's bytes, not where the file is."""
    return f"{short_name(spec)}@sha256:{hashlib.sha256(text.encode()).hexdigest()}"


def copy_into(spec: str, text: str, folder: Path) -> str:
    """Write a file policy's `text` into `folder` under its file name; the spec of the copy."""
    parsed = parse_file_spec(spec)
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / parsed.path.name
    copy.write_text(text)
    return str(FileSpec(copy, parsed.class_name))


# -- loading ----------------------------------------------------------------------------------------------------------
_modules: dict[tuple[Path, str], types.ModuleType] = {}
"""Files already run in this process, by path and content: a changed file is run again."""


def load_file_class(spec: FileSpec) -> type:
    """The class `spec` names, after running its file (once per content); InputError naming the file and class when
    the file is missing or fails, has no such class, or the class is neither a policy nor an allocator."""
    text = read_text(spec.path, "policy file")
    module = _module(spec, text)
    found = vars(module).get(spec.class_name)
    if found is None:
        mine = sorted(
            name
            for name, value in vars(module).items()
            if _is_plugin_class(value) and value.__module__ == module.__name__
        )
        also = f"; the policies it defines: {', '.join(mine)}" if mine else "; it defines no policy or allocator"
        raise InputError(f"no class {spec.class_name!r} in this policy file{also}", path=spec.path)
    return plugin_class(found, f"class {spec.class_name!r}", spec.path)


def _module(spec: FileSpec, text: str) -> types.ModuleType:
    digest = hashlib.sha256(text.encode()).hexdigest()
    key = (spec.path, digest)
    if key in _modules:
        return _modules[key]
    place = hashlib.sha256(str(spec.path).encode()).hexdigest()[:8]
    stem = re.sub(r"\W", "_", spec.path.stem)
    name = f"shockwave_plugin_{stem}_{place}_{digest[:8]}"
    module_spec = importlib.util.spec_from_file_location(name, spec.path)
    if module_spec is None:
        raise InputError(f"cannot load class {spec.class_name!r}: not a Python file", path=spec.path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickle look classes up by module
    try:
        # The text read (and hashed) above, not the file again: no stale bytecode cache, no change in between.
        exec(compile(text, str(spec.path), "exec", dont_inherit=True), vars(module))
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise InputError(
            f"loading class {spec.class_name!r} failed: the file raised {describe(exc)}",
            path=spec.path,
            line=line_in(exc, spec.path),
        ) from None
    _modules[key] = module
    return module


def entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Installed packages' policies by name (the first of a name wins); nothing is imported until one is used."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if not LABEL.match(point.name):
            log.warning("ignoring the %s entry point %r: not a usable policy name", ENTRY_POINT_GROUP, point.name)
            continue
        found.setdefault(point.name, point)
    return found


def entry_point_origin(point: importlib.metadata.EntryPoint) -> str:
    package = f"the installed package {point.dist.name}" if point.dist is not None else "an installed package"
    return f"policy {point.name!r} ({point.value} from {package}, entry point group {ENTRY_POINT_GROUP})"


def load_entry_point(point: importlib.metadata.EntryPoint) -> type:
    where = entry_point_origin(point)
    try:
        found = point.load()
    except (Exception, SystemExit) as exc:
        raise InputError(f"{where}: loading it failed: {describe(exc)}") from None
    return plugin_class(found, where)


def plugin_class(found: object, where: str, path: Path | None = None) -> type:
    """`found` if it is a policy or an allocator class, else an InputError saying what it is."""
    if _is_plugin_class(found):
        return found  # type: ignore[return-value]
    if found is Policy:
        what = "the Policy base class itself"
    elif isinstance(found, type):
        what = f"the class {found.__qualname__}, which is neither"
    else:
        what = f"a {type(found).__name__}"
    raise InputError(
        f"{where} is not a policy: a policy subclasses shockwave.core.policy.Policy, an allocator subclasses "
        f"shockwave.policies.gavel.mechanism.Stateless (or defines allocate, state_dict and load_state_dict); this "
        f"is {what}",
        path=path,
    )


def is_allocator_class(value: object) -> bool:
    """An allocator: a program on Gavel's round mechanism (`shockwave.policies.gavel.mechanism.Allocator`)."""
    return (
        isinstance(value, type)
        and not issubclass(value, Policy)
        and all(callable(getattr(value, method, None)) for method in ("allocate", "state_dict", "load_state_dict"))
    )


def class_label(cls: type, where: str, path: Path | None = None) -> str:
    """What results call a file's policy: the `name` its own code sets (on the class or a base of its own), else the
    class name (a `name` inherited from the package's classes is not the plug-in's)."""
    owner = next((k for k in cls.__mro__ if "name" in vars(k)), object)
    label = cls.__name__ if owner is object or owner.__module__.split(".")[0] == "shockwave" else vars(owner)["name"]
    if not isinstance(label, str) or not LABEL.match(label):
        raise InputError(
            f"{where}: its name {label!r} cannot name results (letters, digits and _ . + - only)", path=path
        )
    return label


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def line_in(exc: BaseException, path: Path) -> int | None:
    """The line of `path` where `exc` was raised (the deepest frame in that file), if it was raised there."""
    if isinstance(exc, SyntaxError) and exc.filename == str(path):
        return exc.lineno
    line, trace = None, exc.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == str(path):
            line = trace.tb_lineno
        trace = trace.tb_next
    return line


def _is_plugin_class(value: object) -> bool:
    return (isinstance(value, type) and issubclass(value, Policy) and value is not Policy) or is_allocator_class(value)
