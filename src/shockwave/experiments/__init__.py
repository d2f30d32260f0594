"""Experiments: many simulations side by side (compare, sweep), stored so they can be resumed and re-reported."""
