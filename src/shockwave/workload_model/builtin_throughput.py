"""The built-in V100 throughput model, used when the user gives no measured throughput table.

A table's throughput for (model, batch size B, gang of g GPUs) grows about linearly with g at fixed B, so B is a
per-GPU batch and the rate counts minibatches of B samples completed by the whole gang: g of them per synchronous
step. Hence, per family,

    t(B, g) = a + c * (B / 64) ** p + sync(g)                        [ms per synchronous step]
    sync(g) = 0 if g == 1 else s0 + s_intra * log2(min(g, 4)) + s_inter * log2(ceil(g / 4))
    throughput = g / t(B, g)                                         [minibatches of B samples per second]

`a` is the fixed per-step overhead, `c * (B/64)**p` the batch-dependent compute (p > 1 where large batches become
memory-bound), and sync(g) a hierarchical all-reduce: log-depth inside a 4-GPU node (TACC Longhorn has 4 V100s per
node), plus a slower log-depth stage across nodes. With a, s >= 0 and c > 0, throughput falls strictly as B grows,
and samples/s = B * throughput is unimodal in B: it rises for ever when p <= 1, else up to
B* = 64 * ((a + sync(g)) / (c * (p - 1))) ** (1 / p) and falls beyond (the tables show that drop for Recommendation).

The constants are fitted by `benchmarks/fit_throughput_model.py` to the isolated ("null") v100 entries of the public
Gavel/Shockwave table `tacc_throughputs.json` only (the table the canonical trace was made with), minimising the sum
of squared log errors (i.e. relative error); p is rounded to 0.01, the rest refitted with it and rounded to 3
significant digits. Median relative error vs that table is 3.8% (worst 39.5%, an outlier ResNet-50 2-GPU entry);
vs wisr_throughputs.json, which disagrees with tacc by 43% at the median, it is 37%. Accuracy is known only for the
measured batch sizes and gangs 1/2/4/8; other sizes are the formula's extrapolation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from shockwave.workload_model.catalog import FAMILIES
from shockwave.workload_model.throughput import DEFAULT_GPU_TYPE, UnknownThroughput

GPUS_PER_NODE = 4
REFERENCE_BATCH = 64
PARAMETERS = ("a", "c", "p", "s0", "s_intra", "s_inter")

# Fitted to v100 "null" entries of tacc_throughputs.json, least squares on log throughput; times in ms.
V100_CONSTANTS: dict[str, dict[str, float]] = {
    "LM": {"a": 6.55, "c": 29.4, "p": 1.19, "s0": 3.5, "s_intra": 4.57, "s_inter": 19.4},
    "Recommendation": {"a": 3.6, "c": 0.154, "p": 1.3, "s0": 0.0, "s_intra": 0.0, "s_inter": 0.0},
    "ResNet-18": {"a": 9.21, "c": 34.3, "p": 1.08, "s0": 4.53, "s_intra": 1.99, "s_inter": 11.8},
    "ResNet-50": {"a": 8.42, "c": 317.0, "p": 0.95, "s0": 33.2, "s_intra": 0.0, "s_inter": 0.0},
    "Transformer": {"a": 0.0, "c": 473.0, "p": 1.03, "s0": 22.7, "s_intra": 6.09, "s_inter": 49.1},
}


def step_time_ms(k: Mapping[str, float], batch_size: int, gpus: int) -> float:
    """Milliseconds per synchronous step of a gang of `gpus`, each GPU on a minibatch of `batch_size`."""
    compute = k["a"] + k["c"] * (batch_size / REFERENCE_BATCH) ** k["p"]
    if gpus == 1:
        return compute
    nodes = math.ceil(gpus / GPUS_PER_NODE)
    sync = k["s0"] + k["s_intra"] * math.log2(min(gpus, GPUS_PER_NODE)) + k["s_inter"] * math.log2(nodes)
    return compute + sync


class BuiltinThroughputs:
    """ThroughputModel from per-family formulas; answers any positive batch size and gang size on v100."""

    name = "builtin"

    def __init__(self, constants: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.constants = V100_CONSTANTS if constants is None else constants

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> float:
        if batch_size < 1 or gpus < 1:
            raise ValueError(f"batch size and gang size must be >= 1, got batch size {batch_size}, {gpus} GPU(s)")
        if gpu_type != "v100":
            raise UnknownThroughput(f"the built-in throughput model only knows v100 GPUs, not {gpu_type!r}")
        fam = FAMILIES.get(model)
        if fam is None or model not in self.constants:
            raise UnknownThroughput(f"the built-in throughput model has no data for model {model!r}")
        if gpus > 1 and not fam.distributable:
            raise UnknownThroughput(f"{model} does not train distributed; it cannot run on {gpus} GPUs")
        return 1000.0 * gpus / step_time_ms(self.constants[model], batch_size, gpus)
