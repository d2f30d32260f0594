"""The HTTP API's reference page, from the schema the service itself serves, so that it cannot go stale: `python
benchmarks/http_api_doc.py` (part of `make docs-tables`) rewrites the routes table of docs/http-api.md and
docs/openapi.json; `--check` only compares and exits 1 when either differs (the docs test runs it)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.service.api import make_app
from shockwave.service.store import Store

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "http-api.md"
SCHEMA = ROOT / "docs" / "openapi.json"
BEGIN, END = "<!-- http-api:begin (make docs-tables) -->", "<!-- http-api:end -->"
WHO = {
    "/healthz": "anyone",
    "/metrics": "admin",
    "/tenants/reload": "admin",
    "/events": "admin (dashboard)",
    "/api/rounds": "admin (dashboard)",
}


def schema() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        return make_app(Store(Path(folder)), ClusterSpec.parse("v100:1"), "documentation").openapi()


def table(spec: dict[str, Any]) -> str:
    lines = ["| method | path | who | what | errors |", "|---|---|---|---|---|"]
    for path, methods in spec["paths"].items():
        for method, route in methods.items():
            summary = " ".join((route.get("description") or route.get("summary") or "").split())
            errors = ", ".join(code for code in route.get("responses", {}) if code[0] in "45")
            who = WHO.get(path, "admin, or the job's own tenant" if "{name}" in path else "admin or any tenant")
            lines.append(f"| {method.upper()} | `{path}` | {who} | {summary.replace('|', '/')} | {errors} |")
    return "\n".join([BEGIN, *lines, END])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when a file differs")
    args = parser.parse_args()
    spec = schema()
    text = PAGE.read_text()
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    page = text[:start] + table(spec) + text[stop:]
    dumped = json.dumps(spec, indent=1, sort_keys=True) + "\n"
    if args.check:
        stale = [p.name for p, new in ((PAGE, page), (SCHEMA, dumped)) if not p.exists() or p.read_text() != new]
        if stale:
            print(f"stale: {', '.join(stale)}: run `make docs-tables`")
        sys.exit(1 if stale else 0)
    PAGE.write_text(page)
    SCHEMA.write_text(dumped)
    print(f"rewrote {PAGE} and {SCHEMA}")


if __name__ == "__main__":
    main()
