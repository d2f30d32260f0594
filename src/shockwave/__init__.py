"""Fair and efficient scheduling of adaptive ML training jobs on shared GPU clusters."""

__version__ = "0.1.0"
