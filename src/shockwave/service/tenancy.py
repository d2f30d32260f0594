"""A service shared by tenants (`serve --tenants FILE`): who a token is, what each may ask, and the file reloaded
while serving.

Each tenant has a token of its own, `DIR/tenants/NAME.token` (0600, made once and kept across restarts and
reloads), beside the admin's in `DIR/endpoint.json`. A request's token is compared with every token, each in
constant time, so neither which one matched nor how far it matched shows in the answer's timing. The tenants file
is the operator's: `reload` (SIGHUP, or `shockwave tenants reload`) reads it again, and takes it only when it is
valid for the cluster and for every job already acked (each unfinished job's tenant still exists and its cap still
holds the job's gang); otherwise the tenants stay as they were and the refusal names file, tenant and field.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically
from shockwave.io.private import private_subfolder
from shockwave.service.endpoint import new_token
from shockwave.service.spec import JobSpec
from shockwave.service.store import FINAL_STATES, Job, Store
from shockwave.workload_model.tenants import Tenants, read_tenants

log = logging.getLogger(__name__)
TENANTS_FOLDER = "tenants"
TOKEN_SUFFIX = ".token"


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the admin (`tenant` None) or one tenant."""

    tenant: str | None = None

    @property
    def admin(self) -> bool:
        return self.tenant is None

    def sees(self, job: Job) -> bool:
        """A tenant sees its own jobs only; the admin every one."""
        return self.admin or job.tenant == self.tenant


class Refused(Exception):
    """A tenant asked for what is not its own (the API answers 403)."""

    def __init__(self, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail, self.field = detail, field


def token_path(folder: Path, name: str) -> Path:
    return folder / TENANTS_FOLDER / f"{name}{TOKEN_SUFFIX}"


class TenantBook:
    """The service's tenants as of now and their tokens; `current` is what the policy reads each round."""

    def __init__(self, path: Path, folder: Path, cluster: ClusterSpec, store: Store) -> None:
        self.path, self.folder, self.cluster, self.store = path, folder, cluster, store
        self._lock = threading.Lock()
        self._tenants = self._checked(read_tenants(path))
        self._tokens = self._issue(self._tenants.names())

    def current(self) -> Tenants:
        return self._tenants

    def reload(self) -> Tenants:
        """Read the file again; raises InputError (and keeps the tenants as they were) when it cannot be taken."""
        with self._lock:
            tenants = self._checked(read_tenants(self.path))
            self._tokens = self._issue(tenants.names())
            self._tenants = tenants
        log.info("tenants reloaded from %s: %s", self.path, ", ".join(tenants.names()))
        return tenants

    def reload_quietly(self) -> None:
        """`reload` for a signal: a refusal is logged, never raised into the scheduler's thread."""
        try:
            self.reload()
        except InputError as exc:
            log.error("the tenants file was not reloaded: %s", exc)

    def caller(self, token: str) -> Caller | None:
        """The tenant whose token this is (Caller() for the admin's, checked by the API), or None."""
        given = token.encode()
        found = None
        for name, expected in self._tokens.items():  # every comparison made: the match's place does not show
            if secrets.compare_digest(given, expected.encode()):
                found = name
        return None if found is None else Caller(found)

    def admitted(self, spec: JobSpec, caller: Caller) -> JobSpec:
        """The spec in its tenant: a tenant's own name filled in (another's is refused), the admin's named; the
        tenant must exist and its cap must hold the job's gang."""
        if not caller.admin:
            if spec.tenant not in (None, caller.tenant):
                raise Refused(f"this token is tenant {caller.tenant}'s: it submits as {caller.tenant} only", "tenant")
            spec = spec.model_copy(update={"tenant": caller.tenant})
        elif spec.tenant is None:
            names = ", ".join(self._tenants.names())
            raise InputError(f"this service is shared between tenants: name the job's ({names})", field="tenant")
        self._tenants.require_fits(spec.tenant, spec.gpus, where=f"job {spec.name}")
        return spec

    def _checked(self, tenants: Tenants) -> Tenants:
        tenants.require_cluster(self.cluster)
        for job in _unfinished(self.store.jobs()):
            assert job.spec is not None
            tenants.require_fits(job.tenant, job.spec.gpus, where=f"queued or running job {job.name}")
        return tenants

    def _issue(self, names: Iterable[str]) -> dict[str, str]:
        """Each tenant's token: its file's, or a new one written 0600."""
        folder = private_subfolder(self.folder / TENANTS_FOLDER)
        tokens = {}
        for name in names:
            path = folder / f"{name}{TOKEN_SUFFIX}"
            token = _read_token(path)
            if token is None:
                token = new_token()
                write_atomically(path, token + "\n", private=True)
            tokens[name] = token
        return tokens


def _unfinished(jobs: Iterable[Job]) -> Iterable[Job]:
    return (job for job in jobs if job.spec is not None and job.state not in FINAL_STATES)


def _read_token(path: Path) -> str | None:
    """A tenant's token as its file holds it, or None where there is none (an empty or unreadable one is replaced:
    the tenant asks the operator for the new one)."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) >= 32 and text.isprintable() and " " not in text else None


def read_tenant_token(folder: Path, name: str) -> str:
    """The token `--tenant NAME` sends, or an InputError naming the file."""
    path = token_path(folder, name)
    if not path.exists():
        raise InputError(
            f"no token for tenant {name!r} here: `shockwave serve --tenants FILE` writes one per tenant", path=path
        )
    token = _read_token(path)
    if token is None:
        raise InputError("expected a token (`shockwave serve` writes it)", path=path)
    return token
