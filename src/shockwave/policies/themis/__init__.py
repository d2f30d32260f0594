"""Themis (Mahajan et al., NSDI'20): finish-time fairness by partial-allocation auctions over leases of GPUs.

`rho.py` estimates each job's finish-time fairness and what a lease of its gang on each GPU type is worth to it,
`auction.py` is the partial-allocation mechanism over those valuations, `policy.py` the lease periods around them.
"""
