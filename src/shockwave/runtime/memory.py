"""What the scheduler has learnt during a run, journaled so a resumed run decides as the killed one would have.

The job records say where each job is; the memory says how the policy sees it: its fairness accounting (Gavel's
time shares and deficits), Shockwave's forecasts, finish-time targets and plan, every admitted job's state, and the
rounds so far. Without it a resumed run would treat every job as newly arrived and forget whom it owes.

It is pickled: policies are plain Python objects and differ in what they keep. A memory written by another version
of shockwave that no longer loads is not fatal: the run resumes with a fresh policy, and says so.
"""

from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass

from shockwave.core.policy import Policy
from shockwave.core.state import JobState

log = logging.getLogger(__name__)


@dataclass
class RoundLog:
    time_s: float
    running_jobs: int
    busy_gpus: int


@dataclass
class Memory:
    policy: Policy
    jobs: dict[int, JobState]
    """The admitted jobs, as the policy last saw them."""
    rounds: list[RoundLog]

    def dumps(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def loads(cls, data: bytes | None, policy_name: str) -> Memory | None:
        """The journaled memory, or None when there is none or it cannot be read (the run then starts afresh)."""
        if data is None:
            return None
        try:
            memory = pickle.loads(data)
        except Exception as exc:
            log.warning("the journal's scheduler memory cannot be read (%s): the policy starts afresh", exc)
            return None
        if not isinstance(memory, cls) or memory.policy.name != policy_name:
            log.warning("the journal's scheduler memory is not a %s policy's: the policy starts afresh", policy_name)
            return None
        return memory
