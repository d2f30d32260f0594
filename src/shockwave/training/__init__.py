"""Real PyTorch training jobs, their adaptive controllers, profiling, and the lease client jobs train through."""
