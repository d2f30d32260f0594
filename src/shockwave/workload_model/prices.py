"""GPU prices in dollars per GPU-hour: what the cost-aware policies divide throughput by, and what a result's cost is
counted in.

A small file, JSON or TOML (told apart by the suffix `.toml`):

    {"name": "gcp-2020", "prices": {"v100": 0.74, "p100": 0.43, "k80": 0.135}}

    name = "gcp-2020"                                 # the same in TOML; `name` is optional (default: the file's)
    [prices]
    v100 = 0.74
    p100 = 0.43
    k80 = 0.135

Every price is a positive, finite number of dollars per GPU-hour (a policy maximising throughput per dollar has no
answer at price 0). Type names are matched as `--cluster` writes them (lower case). Every error names the file and
the field. Without a file, `DEFAULT_PRICES` applies: Gavel's fixed GCP prices (GAVEL_SPEC.md §3.3, the row of
`max_sum_throughput_normalized_by_cost_perf`: "GCP is fixed at v100 0.74, p100 0.43, k80 0.135"). Spot-price time
series, which the reference can also read, are not modelled: prices are constant over a run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.io.jsonfile import object_with_keys, read_json_or_toml
from shockwave.io.text import PRICES_LIMIT

TOP_KEYS = ("name", "prices")


@dataclass(frozen=True)
class Prices:
    """Dollars per GPU-hour by GPU type, and where they came from (for results and error messages)."""

    by_type: Mapping[str, float]
    name: str
    path: Path | None = field(default=None, compare=False)

    def per_gpu_hour(self, gpu_type: str) -> float:
        """The type's price; an InputError naming the file when it lists none (a cluster type it forgot)."""
        try:
            return self.by_type[gpu_type]
        except KeyError:
            listed = ", ".join(self.by_type)
            raise InputError(
                f"no price for GPU type {gpu_type!r} (the file lists {listed})", path=self.path, field="prices"
            ) from None

    def require(self, gpu_types: Iterable[str]) -> None:
        """Fail before a run, not at its end, when a cluster type has no price."""
        for gpu_type in gpu_types:
            self.per_gpu_hour(gpu_type)

    def cost(self, gpu_hours_by_type: Mapping[str, float]) -> dict[str, float]:
        """Dollars per type for these GPU-hours."""
        return {t: hours * self.per_gpu_hour(t) for t, hours in gpu_hours_by_type.items()}

    def describe(self) -> dict[str, Any]:
        """What a result records: the name and the prices used."""
        return {"name": self.name, "usd_per_gpu_hour": dict(self.by_type)}


DEFAULT_PRICES = Prices({"v100": 0.74, "p100": 0.43, "k80": 0.135}, "gcp (Gavel's defaults)")
"""Gavel's GCP on-demand prices, $/GPU-hour (GAVEL_SPEC.md §3.3)."""


def read_prices(path: str | Path) -> Prices:
    """The prices file at `path` (JSON, or TOML when it ends in .toml); InputError naming file and field if bad."""
    return prices_from_mapping(read_json_or_toml(path, "prices", PRICES_LIMIT), Path(path))


def prices_from_mapping(raw: Any, path: Path | None = None) -> Prices:
    """Prices from a parsed file, every problem an InputError naming `path` and the field."""
    shape = 'an object: {"prices": {GPU type: dollars per GPU-hour}}'
    raw = object_with_keys(
        raw, TOP_KEYS, "prices", shape, "no 'prices': give each GPU type's dollars per GPU-hour", path
    )
    table = raw["prices"]
    if not isinstance(table, dict) or not table:
        raise InputError("expected an object: GPU type -> dollars per GPU-hour", path=path, field="prices")
    by_type: dict[str, float] = {}
    for gpu_type, price in table.items():
        where = f"prices.{gpu_type}"
        if isinstance(price, bool) or not isinstance(price, int | float):
            raise InputError(f"a price is a number of dollars per GPU-hour, not {price!r}", path=path, field=where)
        if not (math.isfinite(price) and price > 0):
            raise InputError(f"a price must be a positive number, got {price!r}", path=path, field=where)
        key = str(gpu_type).strip().lower()
        if key in by_type:
            raise InputError(f"GPU type {key!r} is priced twice", path=path, field=where)
        by_type[key] = float(price)
    name = raw.get("name", path.name if path is not None else "prices")
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"a name is a non-empty string, not {name!r}", path=path, field="name")
    return Prices(by_type, name, path)


def prices_of(source: Prices | str | Path | None) -> Prices:
    """Prices given as an object, a file, or nothing (the defaults)."""
    if source is None:
        return DEFAULT_PRICES
    return source if isinstance(source, Prices) else read_prices(source)
