"""A run's (or a service's) state folder: self-contained, relocatable, and never a source of orders.

The folder holds the journal, the checkpoints and a copy of every input file the run reads (`inputs/`: the trace,
the throughput table, Shockwave's config, an entities or prices file), each journaled by its name in the folder and
its SHA-256. A resumed run reads the copies, checked against their digests, so it sees the jobs it started with
wherever the folder has moved and whatever became of the originals; and a copy of the folder resumes on its own
files, never touching the original's.

What runs is the operator's to say on every start: a resumed run takes its policy and job command from its command
line, and the journal's are only compared with them (`require_same`): a journal edited to name another command or a
policy file is refused, never obeyed.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

from pydantic import Field

from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically
from shockwave.io.private import private_subfolder
from shockwave.io.text import (
    CONFIG_LIMIT,
    DEFAULT_LIMIT,
    ENTITIES_LIMIT,
    PRICES_LIMIT,
    THROUGHPUT_LIMIT,
    TRACE_LIMIT,
    read_bytes,
)
from shockwave.runtime.journal import SETTLED, JobRecord, row
from shockwave.workload_model.catalog import family
from shockwave.workload_model.job import Job

INPUTS = "inputs"
CHECKPOINTS = "checkpoints"
LIMITS = {
    "trace": TRACE_LIMIT,
    "throughputs": THROUGHPUT_LIMIT,
    "config": CONFIG_LIMIT,
    "entities": ENTITIES_LIMIT,
    "prices": PRICES_LIMIT,
}
"""How large each kind of input may be (`shockwave.io.text`)."""
KeptName = Annotated[str, Field(pattern=rf"^{INPUTS}/[A-Za-z0-9][\w.-]{{0,63}}$")]
"""An input's copy in the folder, by its name there: a journal cannot point anywhere else."""
Digests = dict[KeptName, Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]]
"""Each copied input's SHA-256, by its name in the folder."""
BUILTIN_ARGUMENTS = ("-m", "shockwave.training.train", "--family", "{family}", "--mode", "{mode}", "--seed", "{job_id}")
"""The built-in workload's command after the interpreter: {family}, {mode} and {job_id} are filled in per job."""
DEFAULT_COMMAND = shlex.join([sys.executable, *BUILTIN_ARGUMENTS])
"""The job command when the operator gives none: this interpreter running the built-in workload."""


def keep_input(folder: Path, source: Path, key: str, what: str, stem: str | None = None) -> tuple[str, str]:
    """Copy the input file `source` (a `what`, a kind of `LIMITS`) into `folder/inputs/` as `stem` (default: `key`)
    with the file's suffix, which says how to read it (`.toml` or JSON); returns its name there and its SHA-256."""
    suffix = source.suffix if re.fullmatch(r"\.[A-Za-z0-9]{1,8}", source.suffix) else ""
    name = (stem or key) + suffix
    data = read_bytes(source, what, LIMITS.get(key, DEFAULT_LIMIT))
    write_atomically(private_subfolder(folder / INPUTS) / name, data, private=True)
    return f"{INPUTS}/{name}", hashlib.sha256(data).hexdigest()


def kept_input(folder: Path, name: str, digests: dict[str, str], journal: Path, key: str) -> Path:
    """The input the journal's setting `key` names (a file of `folder/inputs/`, checked by the settings' model),
    whose content must still be what the run started with."""
    if name not in digests:
        raise InputError(f"no digest of {name} is journaled", path=journal, row=row("settings", "inputs"))
    path = folder / name
    digest = hashlib.sha256(read_bytes(path, "copied input file", LIMITS.get(key, DEFAULT_LIMIT))).hexdigest()
    if digest != digests[name]:
        raise InputError(
            f"this copy of the run's {key} changed since the run started (SHA-256 {digest[:12]}..., the journal says "
            f"{digests[name][:12]}...): a resumed run must see the inputs it started with",
            path=path,
        )
    return path


FILE_PARAMS = ("entities", "prices")
"""Policy parameters that name a file (`--policy-param entities=teams.toml`): kept like the other inputs."""


def file_param(text: str) -> tuple[str, str] | None:
    """(key, file) of a `KEY=FILE` policy parameter that names a file, else None."""
    key, sep, value = (part.strip() for part in text.partition("="))
    return (key, value) if sep and key in FILE_PARAMS and value.lower() not in ("none", "null") else None


def keep_inputs(
    folder: Path, files: Mapping[str, Path | None], params: Sequence[str]
) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """Copy a new run's input `files` (by setting) and the files its policy parameters name into `folder`: each
    setting's name there, the parameters naming their copies, and each copy's SHA-256 by name."""
    names, digests = {}, {}
    for key, path in files.items():
        if path is not None:
            names[key], digests[names[key]] = keep_input(folder, path, key, f"{key} file")
    kept_params = []
    for text in params:
        named = file_param(text)
        if named is not None:
            key, path = named
            name, digests[name] = keep_input(folder, Path(path), key, f"{key} file", f"param-{key}")
            text = f"{key}={name}"
        kept_params.append(text)
    return names, kept_params, digests


def read_inputs(
    folder: Path,
    names: Mapping[str, str | None],
    params: Sequence[str],
    digests: dict[str, str],
    journal: Path | None = None,
) -> tuple[dict[str, Path | None], tuple[str, ...]]:
    """Where a run's kept inputs are (by setting, None where it has none), and its policy parameters naming them;
    resuming (`journal` given), each copy is checked against its digest first."""

    def where(key: str, name: str | None) -> Path | None:
        if name is None:
            return None
        return folder / name if journal is None else kept_input(folder, name, digests, journal, key)

    paths = {key: where(key, name) for key, name in names.items()}
    named = [(text, file_param(text)) for text in params]
    return paths, tuple(text if kept is None else f"{kept[0]}={where(*kept)}" for text, kept in named)


def is_builtin(command: str | None) -> bool:
    """Whether a job command is the built-in workload's (with whichever interpreter wrote it)."""
    if command is None:
        return True
    try:
        return tuple(shlex.split(command)[1:]) == BUILTIN_ARGUMENTS
    except ValueError:
        return False


def require_same_program(
    saved_policy: str, saved_command: str | None, policy: str, command: str | None, journal: Path
) -> None:
    """What a resume would run (the operator's policy and job command) is what the journal says the run ran: one
    line naming both, else. The built-in workload's command is one, whichever interpreter wrote it."""
    _require_same("policy", saved_policy, policy, "--policy", journal)
    builtin = [None if is_builtin(c) else c for c in (saved_command, command)]
    _require_same("command", builtin[0], builtin[1], "--job-command", journal)


def _require_same(key: str, journaled: str | None, given: str | None, flag: str, journal: Path) -> None:
    if journaled == given:
        return
    shown = {value: "none (the default)" if value is None else shlex.quote(value) for value in (journaled, given)}
    raise InputError(
        f"the run was started with {flag} {shown[journaled]}, and this resume gives {shown[given]}: what runs is "
        f"never taken from the journal, so resume with the same {flag} (or start a new run)",
        path=journal,
        row=row("settings", key),
    )


def require_resumable(records: Mapping[int, JobRecord], jobs: Sequence[Job], checkpoints: Path, journal: Path) -> None:
    """The journal's records fit the run's jobs: one per job at most, a finished job finished after it arrived, and
    every checkpoint named for a job still to run is in the folder (else its progress is gone, and the operator
    should know before the run goes on: restore the file, or start the run anew)."""
    for job_id, record in records.items():
        where = row("jobs", job_id)
        if job_id >= len(jobs):
            raise InputError(
                f"the run has {len(jobs)} jobs: there is no job {job_id}", path=journal, row=where, field="id"
            )
        fam = family(jobs[job_id].model)
        if not fam.min_batch_size <= record.batch_size <= fam.max_batch_size:
            raise InputError(
                f"{fam.name} trains at batch sizes {fam.min_batch_size} to {fam.max_batch_size}",
                path=journal,
                row=where,
                field="batch_size",
            )
        if record.status == "done" and (record.finish_s is None or record.finish_s < jobs[job_id].arrival):
            raise InputError(
                f"a finished job needs its finish time, after its arrival ({jobs[job_id].arrival:g} s)",
                path=journal,
                row=where,
                field="finish_s",
            )
        name = record.checkpoint
        if record.status not in SETTLED and name is not None and not (checkpoints / name).is_file():
            raise InputError(
                f"job {job_id}'s checkpoint {CHECKPOINTS}/{name} is missing from the run's folder: restore it, or "
                "start the run anew",
                path=journal,
                row=where,
                field="checkpoint",
            )
