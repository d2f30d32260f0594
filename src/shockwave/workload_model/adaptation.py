"""Batch-size schedules of adaptive jobs (spec §1.5a): the per-epoch "profile" plan of Accordion and GNS jobs.

Accordion trains at the initial batch size inside critical regimes and at the family maximum outside them; in the
profile the first 30% of epochs also count as critical. GNS doubles the batch size at fixed epochs (per family,
initial batch size and gang size), capped at the family maximum; in the reference profile the final epoch of a
multi-stage schedule falls back to the initial batch size, a quirk kept here because T_iso depends on it.
"""

from __future__ import annotations

from shockwave.workload_model.catalog import ModelFamily


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


def gns_batch_size(family: ModelFamily, initial_bs: int, scale_factor: int, epoch: int, epochs: int) -> int:
    """Planned batch size of `epoch` in a GNS schedule of `epochs` epochs."""
    switches = family.gns_switch_epochs.get((initial_bs, scale_factor), ())
    if not switches or epochs <= switches[0] or epoch < switches[0]:
        return initial_bs
    stage = sum(epoch >= start for start in switches)
    if stage > 1 and epoch == epochs - 1:
        return initial_bs  # later stages never reach the final epoch: the reference's quirk (spec §1.5a)
    return min(initial_bs * 2**stage, family.max_batch_size)


def gns_profile(family: ModelFamily, initial_bs: int, scale_factor: int, epochs: int) -> list[int]:
    return [gns_batch_size(family, initial_bs, scale_factor, e, epochs) for e in range(epochs)]


def profile_batch_sizes(family: ModelFamily, mode: str, initial_bs: int, scale_factor: int, epochs: int) -> list[int]:
    if mode == "accordion":
        return accordion_profile(family, initial_bs, epochs)
    if mode == "gns":
        return gns_profile(family, initial_bs, scale_factor, epochs)
    return [initial_bs] * epochs
