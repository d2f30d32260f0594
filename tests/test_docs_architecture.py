"""The architecture page's table (docs/architecture.md) names every package of the code, and only modules that exist."""

from __future__ import annotations

import re

from conftest import ROOT

PACKAGE = ROOT / "src" / "shockwave"


def architecture_rows() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return [line for line in text.splitlines() if line.startswith("| `")]


def test_every_package_has_a_row_and_every_named_module_exists() -> None:
    rows = architecture_rows()
    named = {name.rstrip("/") for row in rows for name in re.findall(r"^\| `([\w/.]+)`", row)}
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert packages <= named, f"packages without a row: {sorted(packages - named)}"
    for row in rows:
        for folder, module in named_modules(row.split("|")[1], row.split("|")[2]):
            assert (PACKAGE / folder / module).exists(), f"{module} is not in src/shockwave/{folder}"


def named_modules(first_cell: str, text: str) -> list[tuple[str, str]]:
    """(folder, module) of each module a row names: in the row's package (its first cell's folder, or the top), or in
    the sub-folder named last before it (`gavel/`: ... `mechanism.py`)."""
    base = next((name for name in re.findall(r"`([\w/.]+)`", first_cell) if name.endswith("/")), "")
    folder, found = base, []
    for name in re.findall(r"`([\w/.]+)`", first_cell + " " + text):
        if name.endswith("/") and name != base:
            folder = base + name
        elif name.endswith(".py"):
            found.append((folder, name))
    return found


def test_a_module_is_looked_for_where_its_row_says_it_is() -> None:
    assert named_modules("`policies/`", "`registry.py`; `gavel/`: `mechanism.py`") == [
        ("policies/", "registry.py"),
        ("policies/gavel/", "mechanism.py"),
    ]


def test_only_the_package_s_face_sits_at_its_top() -> None:
    """Everything else lives in a folder that says what it serves."""
    top = {p.name for p in PACKAGE.glob("*.py")}
    assert top <= {"__init__.py", "__main__.py", "cli.py", "api.py"}, sorted(top)


def test_tests_mirror_the_packages() -> None:
    """A module's tests are found at once: tests/<package>/ beside src/shockwave/<package>/."""
    tests = ROOT / "tests"
    for folder in (p for p in tests.rglob("*") if p.is_dir() and any(p.glob("test_*.py"))):
        mirrored = folder.relative_to(tests)
        assert (PACKAGE / mirrored).is_dir(), f"tests/{mirrored} mirrors no package"
