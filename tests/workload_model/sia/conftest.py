"""The toy application's goodput model (`tests/sia_files.py`), for the tests of goodput-adaptive jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from shockwave.core.cluster import ClusterSpec
from shockwave.workload_model.goodput import goodput_of
from shockwave.workload_model.sia.goodput import SiaGoodput
from shockwave.workload_model.sia.rigid import read_sia_workload


@pytest.fixture
def model(sia_workload: Path, sia_profiles: Path) -> SiaGoodput:
    """On `a:8:4,b:8:8`."""
    _, _, tm = read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse("a:8:4,b:8:8"), elastic=True)
    found = goodput_of(tm)
    assert isinstance(found, SiaGoodput)
    return found
