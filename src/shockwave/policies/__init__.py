"""Scheduling policies: one short module per policy, found by name through `registry`."""
