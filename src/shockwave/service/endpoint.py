"""Where a running service listens and the token it asks for: `DIR/endpoint.json`, readable by its owner only.

`serve` writes it once it listens; the CLI reads it to find the service (`--out DIR` or SHOCKWAVE_SERVICE_DIR), so
whoever can read the file can command the scheduler, and nobody else.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically
from shockwave.io.jsonfile import read_json_object

ENDPOINT_FILE = "endpoint.json"
SERVICE_DIR_VARIABLE = "SHOCKWAVE_SERVICE_DIR"


@dataclass(frozen=True)
class Endpoint:
    url: str
    token: str


def new_token() -> str:
    """256 random bits, URL-safe: what a client sends as `Authorization: Bearer <token>`."""
    return secrets.token_urlsafe(32)


def write_endpoint(folder: Path, endpoint: Endpoint) -> Path:
    """Write `folder/endpoint.json` atomically and privately: readers see the old file or the new one, and the token
    is never readable by others, not even during the write (the file is 0600 from its creation)."""
    path = folder / ENDPOINT_FILE
    write_atomically(path, json.dumps(asdict(endpoint), indent=1) + "\n", private=True)
    return path


def service_dir(out: Path | None) -> Path:
    """The service's folder: `--out DIR`, else $SHOCKWAVE_SERVICE_DIR."""
    if out is not None:
        return out
    env = os.environ.get(SERVICE_DIR_VARIABLE)
    if not env:
        raise InputError(
            f"which service? give --out DIR (the folder of `shockwave serve`) or set {SERVICE_DIR_VARIABLE}"
        )
    return Path(env)


def read_endpoint(folder: Path) -> Endpoint:
    """The endpoint `serve` wrote in `folder`, or an InputError naming the file."""
    path = folder / ENDPOINT_FILE
    if not path.exists():
        raise InputError("no scheduler service here: `shockwave serve --out DIR` writes this file", path=path)
    raw = read_json_object(path, "service endpoint", 'an object {"url": ..., "token": ...}')
    for key, prefix in (("url", "http"), ("token", "")):
        value = raw.get(key)
        if not (isinstance(value, str) and value.startswith(prefix) and value.isascii() and value.isprintable()):
            raise InputError(f"expected a {key} string (`shockwave serve` writes it)", path=path, field=key)
        if not value:
            raise InputError(f"the {key} is empty (`shockwave serve` writes it)", path=path, field=key)
    return Endpoint(raw["url"], raw["token"])
