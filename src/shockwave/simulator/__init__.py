"""Trace-driven simulation: the scheduling core on a simulated clock."""
