"""The runtime: leases on Ray (or an in-process fake), the wall clock, the journal a run resumes from."""
