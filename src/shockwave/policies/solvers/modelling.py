"""cvxpy, imported on first use: importing it costs about a second of start-up (it pulls in scipy.stats), and most
runs build no cvxpy model at all (the Gavel programs that decide reproduced numbers go to ECOS as matrices,
`gavel.cone`). The standard library's lazy loader: the module object exists at once, its code runs on the first
attribute read."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """`name` as a module whose import happens when one of its attributes is first read (an imported one as it is)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


cp = lazy_module("cvxpy")
