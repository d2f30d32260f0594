"""What `shockwave serve` tells its operator once it listens."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from shockwave.cli.service import _stopping_on_signals


def test_the_ready_line_names_the_real_endpoint_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        _stopping_on_signals(threading.Event(), tmp_path / "svc")("http://127.0.0.1:8000")
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    err = capsys.readouterr().err
    # rich wraps the line at the terminal's width, at a space or inside the path: compare without whitespace
    assert "".join(f"{tmp_path / 'svc' / 'endpoint.json'} has its token".split()) in "".join(err.split())
    assert "DIR/" not in err
