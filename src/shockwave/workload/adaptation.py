"""Batch-size schedules of adaptive jobs (spec §1.5a): the per-epoch "profile" plan of Accordion and GNS jobs.

Accordion trains at the initial batch size inside critical regimes and at the family maximum outside them; in the
profile the first 30% of epochs also count as critical. GNS doubles the batch size at fixed epochs (per family,
initial batch size and gang size), capped at the family maximum; in the reference profile the final epoch of a
multi-stage schedule falls back to the initial batch size, a quirk kept here because T_iso depends on it.
"""

from __future__ import annotations

import itertools

from shockwave.workload.catalog import ModelFamily


def accordion_profile(family: ModelFamily, initial_bs: int, epochs: int) -> list[int]:
    rule = family.accordion
    if rule is None:
        return [initial_bs] * epochs
    return [
        initial_bs
        if rule.is_critical(e, initial_bs, with_profile_windows=True) or e <= epochs * 0.3
        else family.max_batch_size
        for e in range(epochs)
    ]


def gns_profile(family: ModelFamily, initial_bs: int, scale_factor: int, epochs: int) -> list[int]:
    switches = family.gns_switch_epochs.get((initial_bs, scale_factor), ())
    schedule = [initial_bs] * epochs
    if not switches or epochs <= switches[0]:
        return schedule
    bounds = (*switches, epochs)
    for stage, (start, end) in enumerate(itertools.pairwise(bounds), start=1):
        # Later stages never touch the final epoch: the reference's quirk (spec §1.5a).
        stop = min(end, epochs) if stage == 1 else min(end, epochs - 1)
        for e in range(start, stop):
            schedule[e] = min(initial_bs * 2**stage, family.max_batch_size)
    return schedule


def profile_batch_sizes(family: ModelFamily, mode: str, initial_bs: int, scale_factor: int, epochs: int) -> list[int]:
    if mode == "accordion":
        return accordion_profile(family, initial_bs, epochs)
    if mode == "gns":
        return gns_profile(family, initial_bs, scale_factor, epochs)
    return [initial_bs] * epochs
