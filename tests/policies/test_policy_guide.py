"""The policy guide (docs/policies.md) and README's policy table name every built-in policy and alias, and the guide
each policy's own parameters, as the registry has them."""

from __future__ import annotations

import re

from conftest import ROOT
from shockwave.policies.builtin import BUILTIN
from shockwave.policies.registry import ALIASES, MECHANISM, policy_info

SHARED = {param.name for param in MECHANISM}  # every Gavel-mechanism policy's; the page says so once


def table_rows(text: str) -> list[list[str]]:
    return [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| `")]


def guide_rows() -> dict[str, tuple[set[str], set[str]]]:
    """policy -> (its aliases, the parameters its row names)."""
    text = (ROOT / "docs" / "policies.md").read_text()
    table = text.split("<!-- policy-table:begin", 1)[1].split("<!-- policy-table:end -->", 1)[0]
    rows = {}
    for cells in table_rows(table):
        name, *aliases = re.findall(r"`(\w+)`", cells[0])
        params = set(re.findall(r"`(\w+)`", cells[3].split("(", 1)[0]))
        rows[name] = (set(aliases), params)
    return rows


def test_the_guide_has_a_row_per_policy_with_its_parameters() -> None:
    rows = guide_rows()
    assert set(rows) == set(BUILTIN)
    for name, (_, params) in rows.items():
        assert params == {p.name for p in policy_info(name).params} - SHARED, name


def test_the_guide_and_readme_name_every_alias() -> None:
    aliases = {alias for aliases, _ in guide_rows().values() for alias in aliases}
    assert aliases == set(ALIASES)
    readme = (ROOT / "README.md").read_text()
    assert all(f"`{alias}`" in readme for alias in ("gavel", "ossp", "mst"))


def test_readme_s_table_names_every_policy() -> None:
    """A row's `_suffix` entries extend its first name (`max_min_fairness`, `_perf` -> max_min_fairness_perf)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Policies", 1)[1].split("\n## ", 1)[0]
    named = set()
    for cells in table_rows(section):
        names = [n for n in re.findall(r"`(\w+)`", cells[0]) if n not in ALIASES]
        base = names[0]
        named |= {base + n if n.startswith("_") else n for n in names}
    assert named == set(BUILTIN)
