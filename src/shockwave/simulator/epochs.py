"""Training through epoch ends on whole seconds, as Sia's simulator steps a job (`Mechanics.whole_second_epochs`).

Sia's simulator advances a job epoch by epoch, and the time to each epoch's end it reaches within its time is
rounded to whole seconds (the artifact's `job.py`, aaf7a0d): a job of short epochs loses (or gains) up to half a
second at each. On a cluster of cifar10 jobs, whose late epochs last 3-4 s on ten GPUs, that is a round's worth of
a job's training (ten rounding errors at +0.4 s), and it decides which jobs are still active when the policy next
allocates: without it Gavel's policy on Saturn 5 averaged 9% short of the artifact's JCT, with it 0.01%.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence


def through_epochs(done: float, rate: float, seconds: float, ends: Sequence[float]) -> tuple[float, float]:
    """(work done, seconds trained) after training for at most `seconds` at `rate` from `done`, each epoch end
    (`ends`, ascending, the last the whole work) reached in a whole number of seconds from where the job stood."""
    trained = 0.0
    epoch = bisect.bisect_right(ends, done)
    while epoch < len(ends) and trained < seconds:
        to_end = (ends[epoch] - done) / rate
        if to_end > seconds - trained:
            return done + rate * (seconds - trained), seconds
        done, trained = ends[epoch], min(seconds, trained + round(to_end))
        epoch += 1
    return done, trained
