"""A CSV file with a header, read by column name (the artifact's files list the same columns in different
orders), every value checked: an error names the file, line and column."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shockwave.core.errors import InputError
from shockwave.io.text import TRACE_LIMIT, read_text

MAX_ROWS = 1_000_000
"""Far above any real file (a profile has some hundreds of rows, a workload under a thousand jobs)."""


@dataclass(frozen=True)
class Row:
    """One data line: its values by column name, and where it came from."""

    path: Path
    line: int
    values: dict[str, str]

    def text(self, column: str) -> str:
        value = self.values[column].strip()
        if not value:
            raise InputError("is empty", path=self.path, line=self.line, field=column)
        return value

    def number(self, column: str, *, positive: bool = False) -> float:
        """A finite number (> 0 with `positive`, else >= 0)."""
        raw = self.text(column)
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"expected a number, got {raw!r}", path=self.path, line=self.line, field=column) from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            want = "a finite number > 0" if positive else "a finite number >= 0"
            raise InputError(f"expected {want}, got {raw!r}", path=self.path, line=self.line, field=column)
        return value

    def whole(self, column: str, *, least: int = 1) -> int:
        """An integer >= `least` (written as 12 or 12.0)."""
        value = self.number(column)
        if value != int(value) or value < least or value > 2**31:
            raise InputError(
                f"expected a whole number >= {least}, got {self.values[column].strip()!r}",
                path=self.path,
                line=self.line,
                field=column,
            )
        return int(value)


def rows(path: Path, what: str, columns: tuple[str, ...], optional: tuple[str, ...] = ()) -> Iterator[Row]:
    """The data lines of `path` (a `what`), which must have every one of `columns` in its header."""
    text = read_text(path, what, TRACE_LIMIT)
    reader = csv.reader(text.splitlines())
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise InputError(f"{what} is empty: expected a header line with {', '.join(columns)}", path=path) from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(
            f"{what} has no column {', '.join(map(repr, missing))} (its header: {', '.join(header)})",
            path=path,
            line=1,
        )
    wanted = [c for c in (*columns, *optional) if c in header]
    index = {c: header.index(c) for c in wanted}
    count = 0
    for line, fields in enumerate(reader, start=2):
        if not fields or not any(f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise InputError(
                f"expected {len(header)} comma-separated values, found {len(fields)}", path=path, line=line
            )
        count += 1
        if count > MAX_ROWS:
            raise InputError(f"{what} has more than {MAX_ROWS:,} rows: not read", path=path, line=line)
        yield Row(path, line, {c: fields[i] for c, i in index.items()})
    if count == 0:
        raise InputError(f"{what} has a header but no data lines", path=path)
