"""One way to assemble a run, whichever driver runs it (`inputs.py`): the simulator, a comparison's or a sweep's cells,
`shockwave run`, `shockwave serve` and the Python API resolve the policy, read the throughput model, Shockwave's
config, prices and entities, and build the policy the same way, with the same parameters."""
