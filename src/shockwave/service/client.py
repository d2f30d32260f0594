"""The CLI's side of the API: find the service from its folder, call it with the token, and turn every refusal or
network failure into one InputError naming the field (or the file) to fix.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2 as httpx

from shockwave.core.errors import InputError
from shockwave.service.endpoint import ENDPOINT_FILE, read_endpoint, service_dir
from shockwave.service.spec import JobSpec
from shockwave.service.store import Job
from shockwave.service.tenancy import read_tenant_token, token_path

logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per request would bury the CLI's own output
TIMEOUT = httpx.Timeout(10.0, connect=3.0)
"""The API answers from the store without waiting on the scheduler: a slow answer means a service in trouble."""


class ServiceClient:
    def __init__(self, folder: Path, tenant: str | None = None) -> None:
        """The service whose `endpoint.json` is in `folder`, as its admin or (`tenant`) with that tenant's token."""
        self.endpoint_path = folder / ENDPOINT_FILE
        endpoint = read_endpoint(folder)
        token = endpoint.token if tenant is None else read_tenant_token(folder, tenant)
        self.token_path = self.endpoint_path if tenant is None else token_path(folder, tenant)
        """The file of the token sent: what a refusal of it names."""
        # trust_env=False: no proxy from the environment sees the token, and loopback is never proxied.
        self.http = httpx.Client(
            base_url=endpoint.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT,
            trust_env=False,
        )

    @classmethod
    def find(cls, out: Path | None, tenant: str | None = None) -> ServiceClient:
        """The service of `--out DIR`, else of $SHOCKWAVE_SERVICE_DIR (as `tenant`, where given)."""
        return cls(service_dir(out), tenant)

    def _call(self, method: str, path: str, *, spec_path: Path | None = None, **kwargs: Any) -> httpx.Response:
        """The answer to a request, or an InputError: the service's message with its field (and `spec_path`, the
        file the refused spec came from), or why the service could not be reached."""
        url = self.http.base_url
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise InputError(
                f"the scheduler service at {url} did not answer within {TIMEOUT.read:g} s", path=self.endpoint_path
            ) from None
        except httpx.HTTPError as exc:
            raise InputError(
                f"cannot reach the scheduler service at {url} ({exc}): is `shockwave serve` running?",
                path=self.endpoint_path,
            ) from None
        if response.is_success:
            return response
        detail, field = _refusal(response)
        if response.status_code == 401:
            raise InputError(f"the service refused the token of {self.token_path}: {detail}", field=field)
        raise InputError(detail, path=spec_path if response.status_code == 422 else None, field=field)

    def submit(self, spec: JobSpec, spec_path: Path | None = None) -> Job:
        body = spec.model_dump(mode="json", exclude_none=True)
        return Job.model_validate(self._call("POST", "/jobs", json=body, spec_path=spec_path).json())

    def jobs(self) -> list[Job]:
        return [Job.model_validate(job) for job in self._call("GET", "/jobs").json()]

    def cancel(self, name: str) -> Job:
        return Job.model_validate(self._call("DELETE", f"/jobs/{_segment(name)}").json())

    def logs(self, name: str, lines: int) -> str:
        return self._call("GET", f"/jobs/{_segment(name)}/logs", params={"lines": lines}).text

    def tenants(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/tenants").json())

    def reload_tenants(self) -> list[dict[str, Any]]:
        return list(self._call("POST", "/tenants/reload").json())


def _segment(name: str) -> str:
    """A job name as one URL path segment, whatever the user typed."""
    return quote(name, safe="")


def _refusal(response: httpx.Response) -> tuple[str, str | None]:
    """(message, field) of an error answer: the API's `{"detail", "field"}`, else the status line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        field = body.get("field")
        return body["detail"], field if isinstance(field, str) else None
    return f"the service answered {response.status_code} {response.reason_phrase}", None
