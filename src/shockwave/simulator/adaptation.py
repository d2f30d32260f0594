"""When a running adaptive job asks for a new batch size (spec §1.5b), evaluated at every round boundary.

The reference's run-time Accordion rule differs from its profile (no "first 30% of epochs" rule, no extra
Recommendation windows); `profile_rule=True` instead asks for whatever the profile plans for the epoch in progress.
GNS doubles the batch size one epoch ahead of each planned switch.
"""

from __future__ import annotations

from shockwave.core.state import JobState
from shockwave.workload_model.adaptation import gns_batch_size

GNS_LOOKAHEAD_EPOCHS = 760  # length of the switch table the reference consults; longer than any job


def requested_batch_size(job: JobState, *, profile_rule: bool) -> int | None:
    fam, bs, bs0 = job.family, job.batch_size, job.initial_batch_size
    if job.spec.mode == "gns":
        epoch = job.epochs_started
        horizon = max(GNS_LOOKAHEAD_EPOCHS, epoch + 2)
        planned = max(gns_batch_size(fam, bs0, job.scale_factor, e, horizon) for e in (epoch, epoch + 1))
        return 2 * bs if planned > bs and bs != fam.max_batch_size else None
    if job.spec.mode != "accordion" or fam.accordion is None:
        return None
    if profile_rule:
        return planned_batch_size(job)
    critical = fam.accordion.is_critical(job.epochs_started, bs0, with_profile_windows=False)
    if bs == bs0 and not critical and bs != fam.max_batch_size:
        return fam.max_batch_size
    if bs != bs0 and critical and bs != fam.min_batch_size:
        return bs0
    return None


def planned_batch_size(job: JobState) -> int | None:
    """What the profile gives the epoch the job is in, if it is not the current batch size."""
    plan = job.profile.batch_sizes
    wanted = plan[min(job.epochs_completed, len(plan) - 1)]
    return wanted if wanted != job.batch_size else None


def next_planned_switch(job: JobState) -> tuple[int, int] | None:
    """(step at the current batch size where it begins, batch size) of the next epoch after the one in progress
    whose profile batch size differs from the current one; None if there is none."""
    plan = job.profile.batch_sizes
    epoch = next((e for e in range(job.epochs_completed + 1, len(plan)) if plan[e] != job.batch_size), None)
    return None if epoch is None else (epoch * job.iterations_per_epoch, plan[epoch])
