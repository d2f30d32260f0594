"""README's architecture table names every package of the code, and only modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "shockwave"


def architecture_rows() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| `")]


def test_every_package_has_a_row_and_every_named_module_exists() -> None:
    rows = architecture_rows()
    named = {name.rstrip("/") for row in rows for name in re.findall(r"^\| `([\w/.]+)`", row)}
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert packages <= named, f"packages without a row: {sorted(packages - named)}"
    for row in rows:
        first = re.findall(r"`([\w/.]+)`", row.split("|")[1])
        folder = first[0].rstrip("/") if first[0].endswith("/") else ""
        for module in re.findall(r"`(\w+\.py)`", row):
            candidates = [PACKAGE / folder / module, *PACKAGE.rglob(module)]
            assert any(c.exists() for c in candidates), f"{module} (row {first[0]}) is not in the code"
