"""A snapshot of what the scheduler has learnt during a run, journaled so a resumed run decides as the killed one
would have.

The job records say where each job is; the snapshot says how the policy sees it: its fairness accounting (Gavel's
time shares and deficits), Shockwave's forecasts, finish-time targets and plan, every admitted job's state, and the
rounds so far. Without it a resumed run would treat every job as newly arrived and forget whom it owes.

It is plain, versioned data, one JSON object in the journal's `memory` table:

    {"format": 6, "policy": "shockwave", "kept": <digest of what the policy and a job keep>,
     "state": <the policy's state_dict()>,
     "jobs": {"<job id>": <JobState.state_dict(): the fields that change as the job runs>, ...},
     "rounds": [[round, time_s, running_jobs, busy_gpus], ...]}

A job's trace line, profile and model family are not stored: the resumed run rebuilds them from the trace it loads
anyway. Finite floats round-trip exactly; JSON has no inf or nan, so those are written as the strings "inf", "-inf"
and "nan", which the policies' float() conversions read back.

Nothing read back is ever code. Journals of earlier versions held a pickle, which runs whatever it names when
loaded, so a run folder from someone else could do anything; a pickle is never loaded now. A snapshot that is missing,
not JSON (an old pickle included), of another format or another policy, or not shaped as that policy's state, is
refused with an InputError naming the journal, and the run does not start: resuming with a fresh policy would
silently drop the fairness accounting the run has built. There is no migration. The snapshot records a digest of
what the policy and a job keep (`shockwave.core.kept.schema_digest`: the kept names and their types), and a journal
whose digest is not this version's is resumed by the version that wrote it (or its run is started anew), so adding,
removing or retyping what a policy keeps needs nothing by hand. FORMAT counts the rest: changes to the snapshot's own
layout, and to how a kept value is written or what it means under the same type (an `EntryKey`'s text, say).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.core.kept import schema_digest
from shockwave.core.loop import RoundRecord
from shockwave.core.policy import Policy
from shockwave.core.state import JobState
from shockwave.workload_model.job import Job
from shockwave.workload_model.profile import JobProfile

FORMAT = 6
"""Version of the snapshot's layout (2: rates per GPU type, numbered rounds; 3: Gavel-style policies keep their time
records per GPU type; 4: Gavel's mechanism keeps them per entry, a pair of jobs sharing GPUs an entry of its own; 5:
Shockwave plans and measures per GPU type; 6: what is kept is checked by its digest)."""


@dataclass
class Snapshot:
    policy: Policy
    jobs: dict[int, JobState]
    """The admitted jobs, as the policy last saw them."""
    rounds: list[RoundRecord]

    def dumps(self) -> str:
        snapshot = {
            "format": FORMAT,
            "policy": self.policy.name,
            "kept": _kept(self.policy),
            "state": self.policy.state_dict(),
            "jobs": {job_id: job.state_dict() for job_id, job in self.jobs.items()},
            "rounds": [[r.round, r.time_s, r.running_jobs, r.busy_gpus] for r in self.rounds],
        }
        return json.dumps(_strict(snapshot), allow_nan=False, separators=(",", ":"))

    @classmethod
    def loads(
        cls,
        data: str | bytes | None,
        policy: Policy,
        trace: list[Job],
        profiles: list[JobProfile],
        path: Path,
    ) -> Snapshot:
        """The snapshot journaled at `path`, taken up by `policy` (freshly built with the run's settings), the jobs
        rebuilt from the run's `trace` and `profiles`. Raises InputError when it cannot be used as it is."""

        def refused(reason: str) -> InputError:
            return InputError(f"cannot resume: the journal's scheduler snapshot {reason}", path=path)

        if data is None:
            raise refused("is missing")
        if isinstance(data, bytes):
            raise refused(
                "is binary, not JSON: shockwave before snapshot format 1 pickled it, and a pickle is never loaded "
                "(it can run any code); resume with the version that started the run, or start it anew"
            )
        try:
            snapshot = json.loads(data)
        except (TypeError, ValueError, RecursionError) as exc:
            raise refused(f"is not JSON ({exc})") from None
        if not isinstance(snapshot, dict):
            raise refused(f"is not a JSON object but {type(snapshot).__name__}")
        if snapshot.get("format") != FORMAT:
            raise refused(
                f"has format {snapshot.get('format')!r} and this shockwave reads format {FORMAT} only: resume with "
                "the version that started the run, or start it anew"
            )
        if snapshot.get("policy") != policy.name:
            raise refused(f"is the {snapshot.get('policy')!r} policy's, not the run's {policy.name!r}")
        if snapshot.get("kept") != _kept(policy):
            raise refused(
                f"keeps the {policy.name} policy's state in another shape than this shockwave does (digest "
                f"{snapshot.get('kept')!r}, not {_kept(policy)!r}): resume with the version that started the run, or "
                "start it anew"
            )
        try:
            policy.load_state_dict(snapshot["state"])
            jobs = {}
            for key, state in snapshot["jobs"].items():
                job_id = int(key)
                if not 0 <= job_id < len(trace):
                    raise IndexError(f"job {job_id} is not in the trace")
                jobs[job_id] = JobState.restore(job_id, trace[job_id], profiles[job_id], state)
            rounds = [
                RoundRecord(int(index), float(t), int(running), int(busy))
                for index, t, running, busy in snapshot["rounds"]
            ]
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise refused(f"is not a {policy.name} snapshot of format {FORMAT} ({type(exc).__name__}: {exc})") from None
        return cls(policy, jobs, rounds)


def _kept(policy: Policy) -> str:
    return schema_digest(policy, JobState)


def _strict(value: Any) -> Any:
    """`value` with every non-finite float as a string ("inf", "-inf", "nan"): strict JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value
