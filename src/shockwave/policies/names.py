"""The built-in policies' names alone, for help texts: importing the policies themselves costs seconds that
`--help` should not pay (`builtin.BUILTIN` maps the same names, in the same order, to their classes; a test keeps
the two equal)."""

BUILTIN_NAMES = (
    "shockwave", "max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed",
    "max_min_fairness_water_filling", "max_min_fairness_water_filling_perf", "max_min_fairness_strategy_proof",
    "max_min_fairness_strategy_proof_perf", "finish_time_fairness", "finish_time_fairness_perf",
    "finish_time_fairness_packed", "min_total_duration", "min_total_duration_perf", "min_total_duration_packed",
    "max_sum_throughput_perf", "max_sum_throughput_normalized_by_cost_perf",
    "max_sum_throughput_normalized_by_cost_perf_SLOs", "max_sum_throughput_normalized_by_cost_packed_SLOs", "allox",
    "gandiva_fair", "gandiva", "isolated", "proportional", "themis", "sia", "pollux", "fifo", "fifo_perf",
    "fifo_packed",
)  # fmt: skip
