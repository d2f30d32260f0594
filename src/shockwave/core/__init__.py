"""The scheduling core: the one loop, the plan contract, job state and the cluster, which every driver shares."""
