"""One error type for bad user input, so the CLI can report it uniformly and exit non-zero."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad input: names the file, line and field so the user can fix it."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        row: str | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.row = row
        """Where in a database file: `table jobs, row 3`."""
        self.field = field
        self.reason = message
        where = ""
        if self.path is not None:
            where = self.path
            if line is not None:
                where += f":{line}"
            where += ": "
        if row is not None:
            where += f"{row}: "
        if field is not None:
            where += f"field '{field}': "
        super().__init__(where + message)


def require_extra(module: str, extra: str, what: str) -> None:
    """Fail with the install command when an optional dependency is missing."""
    try:
        __import__(module)
    except ImportError:
        raise InputError(f"{what} needs {module}: pip install 'shockwave[{extra}]'") from None


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what was kept on disk and how to go on, for the CLI to say."""

    def __init__(self, kept: str) -> None:
        super().__init__(kept)
        self.kept = kept
