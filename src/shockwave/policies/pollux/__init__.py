"""Pollux (OSDI'21): GPUs per job by a fairness-weighted power mean of goodput speedups, blind to GPU types."""
