"""A service shared by tenants, on the fake cluster in virtual time: each tenant's token, what it may see and do
(the threat model's guarantees, one test each), its cap in every round, the shares by weight, reloading the file,
and the accounts."""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from fastapi.testclient import TestClient

from conftest import shockwave
from service_world import World, backend_on, request, spec
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.service.accounting import accounts
from shockwave.service.api import make_app
from shockwave.service.endpoint import read_endpoint
from shockwave.service.serve import serve
from shockwave.service.store import Store
from shockwave.service.tenancy import TenantBook, token_path

ALICE_AND_BOB = "[tenants.alice]\nweight = 2\n\n[tenants.bob]\nweight = 1\nmax_gpus = 1\n"


def tenants_file(folder: Path, text: str = ALICE_AND_BOB) -> Path:
    path = folder / "tenants.toml"
    path.write_text(text)
    return path


class Caller:
    """HTTP as one token (the admin's, or a tenant's) of the service in `out`."""

    def __init__(self, out: Path, tenant: str | None = None) -> None:
        endpoint = read_endpoint(out)
        token = endpoint.token if tenant is None else token_path(out, tenant).read_text().strip()
        self.url, self.headers = endpoint.url, {"Authorization": f"Bearer {token}"}

    def __call__(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(method, f"{self.url}{path}", headers=self.headers, trust_env=False, **kwargs)


def job(name: str, steps: int = 100_000, **fields: Any) -> dict[str, Any]:
    return {"name": name, "family": "ResNet-18", "steps": steps, **fields}


def test_two_tenants_with_their_tokens_a_cap_that_holds_and_their_accounts(tmp_path: Path) -> None:
    """alice (weight 2) and bob (weight 1, max_gpus 1) on two V100s, through the CLI as each tenant: the tokens are
    0600; bob neither lists nor cancels alice's job; he never holds more than one GPU though his two jobs wait; the
    status rows name tenant, state and GPUs; the accounts charge both."""
    out, world, fakes, stop = tmp_path / "service", World(), [], threading.Event()
    answers: dict[str, Any] = {}

    def as_tenants() -> None:
        for mode in (token_path(out, "alice").stat().st_mode, token_path(out, "bob").stat().st_mode):
            assert stat.S_IMODE(mode) == 0o600
        for name, tenant in (("a1", "alice"), ("b1", "bob"), ("b2", "bob")):
            done = shockwave("submit", "--out", out, "--tenant", tenant, "--name", name, "--family", "ResNet-18",
                             "--steps", 100_000)  # fmt: skip
            assert done.returncode == 0, done.stderr

    def bob_tries() -> None:
        bob = Caller(out, "bob")
        answers["cancel"] = bob("POST", "/jobs/a1/cancel").status_code
        answers["delete"] = bob("DELETE", "/jobs/a1").status_code
        answers["read"] = bob("GET", "/jobs/a1").status_code
        answers["logs"] = bob("GET", "/jobs/a1/logs").status_code
        answers["listed"] = [row["name"] for row in bob("GET", "/jobs").json()]
        answers["as_alice"] = bob("POST", "/jobs", json=job("b3", tenant="alice")).status_code
        listed = shockwave("status", "--out", out, "--tenant", "bob", "--json")
        answers["status"] = json.loads(listed.stdout)
        answers["admin"] = json.loads(shockwave("status", "--out", out, "--json").stdout)

    world.at(0.5, as_tenants)
    world.at(30.0, bob_tries)
    world.at(300.0, stop.set)
    serve(request(out, tenants=tenants_file(tmp_path)), stop, backend_on(world, fakes))
    assert answers["cancel"] == answers["delete"] == answers["read"] == answers["logs"] == 404
    assert answers["listed"] == ["b1", "b2"] and answers["as_alice"] == 403
    assert {row["tenant"] for row in answers["status"]} == {"bob"}
    rows = {row["name"]: row for row in answers["admin"]}
    assert {name: (row["tenant"], row["state"]) for name, row in rows.items()} == {
        "a1": ("alice", "running"),
        "b1": ("bob", "running"),
        "b2": ("bob", "queued"),
    }
    assert rows["b1"]["gpus"] == 1 and rows["b2"]["gpus"] is None
    rounds = Store(out).rounds(10_000)
    assert len(rounds) > 20
    for held in rounds:  # every round: bob's jobs together on at most his cap, and both GPUs busy
        assert sum(p.gpus for p in held.plan if p.job.startswith("b")) <= 1
    assert sum(p.gpus for p in rounds[len(rounds) // 2].plan) == 2
    summary = json.loads(shockwave("accounting", "--out", out, "--json").stdout)
    shares = {row["tenant"]: row for row in summary["tenants"]}
    assert shares["alice"]["gpu_seconds"] > 0 and shares["bob"]["gpu_seconds"] > 0
    assert shares["alice"]["entitled_share"] == pytest.approx(2 / 3)


ADMIN = "admin-token-" + "x" * 40


@pytest.fixture
def shared(tmp_path: Path) -> tuple[TestClient, TenantBook, Path]:
    """The API of a service shared by alice and bob (no scheduler: each request only reads or writes the queue)."""
    out = tmp_path / "service"
    store = Store(out)
    book = TenantBook(tenants_file(tmp_path), out, ClusterSpec.parse("v100:2"), store)
    return TestClient(make_app(store, ClusterSpec.parse("v100:2"), ADMIN, book=book)), book, out


def as_(client: TestClient, token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def tokens(out: Path) -> dict[str, str]:
    return {name: token_path(out, name).read_text().strip() for name in ("alice", "bob")}


def test_a_tenant_sees_and_touches_its_own_jobs_only(shared: tuple[TestClient, TenantBook, Path]) -> None:
    """Another tenant's job is 404 to it on every route, as a job that does not exist; the admin sees all."""
    client, _, out = shared
    alice, bob = (as_(client, t) for t in tokens(out).values())
    assert client.post("/jobs", json=job("a1"), headers=alice).json()["tenant"] == "alice"
    for method, path in (("GET", "/jobs/a1"), ("GET", "/jobs/a1/logs"), ("DELETE", "/jobs/a1"),
                         ("POST", "/jobs/a1/cancel")):  # fmt: skip
        answer = client.request(method, path, headers=bob)
        assert answer.status_code == 404 and answer.json() == {"detail": "no job named 'a1'", "field": "name"}
    assert client.get("/jobs", headers=bob).json() == []
    assert [j["name"] for j in client.get("/jobs", headers=as_(client, ADMIN)).json()] == ["a1"]
    assert client.post("/jobs/a1/cancel", headers=alice).json()["state"] == "cancelled"


def test_a_tenant_submits_as_itself_within_its_cap(shared: tuple[TestClient, TenantBook, Path]) -> None:
    """A tenant's token cannot submit as another (403); a gang above its cap, a job of no tenant or of an unknown
    one from the admin are refused naming the field; nothing refused is queued."""
    client, _, out = shared
    bob, admin = as_(client, tokens(out)["bob"]), as_(client, ADMIN)
    assert client.post("/jobs", json=job("x", tenant="alice"), headers=bob).status_code == 403
    over = client.post("/jobs", json=job("y", gpus=2), headers=bob)
    assert over.status_code == 422 and over.json()["field"] == "tenants.bob.max_gpus"
    assert client.post("/jobs", json=job("z"), headers=admin).json()["field"] == "tenant"
    assert client.post("/jobs", json=job("z", tenant="carol"), headers=admin).json()["field"] == "tenant"
    assert client.get("/jobs", headers=admin).json() == []
    assert client.post("/jobs", json=job("z", tenant="bob"), headers=admin).status_code == 201


def test_only_the_admin_reloads_scrapes_metrics_or_opens_the_dashboard(
    shared: tuple[TestClient, TenantBook, Path],
) -> None:
    client, _, out = shared
    bob = as_(client, tokens(out)["bob"])
    for method, path in (("POST", "/tenants/reload"), ("GET", "/metrics"), ("GET", "/api/rounds")):
        assert client.request(method, path, headers=bob).status_code == 403
    assert client.get("/", params={"token": tokens(out)["bob"]}).status_code == 401
    assert client.get("/jobs", headers=as_(client, "not-a-token")).status_code == 401
    assert [t["name"] for t in client.get("/tenants", headers=bob).json()] == ["bob"]
    metrics = client.get("/metrics", headers=as_(client, ADMIN)).text
    assert 'shockwave_jobs{state="queued",tenant=""} 0.0' in metrics


def test_tokens_are_private_and_kept_across_restarts(tmp_path: Path) -> None:
    out = tmp_path / "service"
    path = tenants_file(tmp_path)
    TenantBook(path, out, ClusterSpec.parse("v100:2"), Store(out))
    first = tokens(out)
    assert all(stat.S_IMODE(token_path(out, n).stat().st_mode) == 0o600 for n in first)
    assert stat.S_IMODE((out / "tenants").stat().st_mode) == 0o700
    TenantBook(path, out, ClusterSpec.parse("v100:2"), Store(out))
    assert tokens(out) == first and len(set(first.values())) == 2


def test_a_reload_takes_a_valid_file_and_refuses_one_that_would_lose_a_job(
    shared: tuple[TestClient, TenantBook, Path], tmp_path: Path
) -> None:
    """A new tenant gets its token at the reload; a file with a bad field, or without the tenant of a queued job,
    is refused naming file and field, and the tenants stay as they were."""
    client, book, out = shared
    admin = as_(client, ADMIN)
    client.post("/jobs", json=job("b1"), headers=as_(client, tokens(out)["bob"]))
    path = tmp_path / "tenants.toml"
    path.write_text(ALICE_AND_BOB + "\n[tenants.carol]\nweight = 3\n")
    assert [t["name"] for t in client.post("/tenants/reload", headers=admin).json()] == ["alice", "bob", "carol"]
    assert stat.S_IMODE(token_path(out, "carol").stat().st_mode) == 0o600
    path.write_text(ALICE_AND_BOB.replace("weight = 2", "weight = -2"))
    bad = client.post("/tenants/reload", headers=admin)
    assert bad.status_code == 422 and bad.json()["field"] == "tenants.alice.weight"
    path.write_text("[tenants.alice]\nweight = 2\n")
    lost = client.post("/tenants/reload", headers=admin)
    assert lost.status_code == 422 and "b1" in lost.json()["detail"]
    assert book.current().names() == ["alice", "bob", "carol"]
    with pytest.raises(InputError):
        book.reload()
    book.reload_quietly()  # what SIGHUP calls: logged, never raised
    assert book.current().names() == ["alice", "bob", "carol"]


def test_three_tenants_share_a_service_by_weight_as_in_simulation(tmp_path: Path) -> None:
    """The tenants file of the simulation's test (1:2:3), on the fake cluster of three types: four long jobs each,
    submitted at once; while all wait, each one's share of the progress is its weight's within 5%."""
    tenants = tmp_path / "tenants.toml"
    tenants.write_text("".join(f"[tenants.{n}]\nweight = {w}\n" for n, w in (("a", 1), ("b", 2), ("c", 3))))
    out, world, fakes, stop = tmp_path / "service", World(), [], threading.Event()
    queue = Store(out, clock=world.now)
    for i in range(12):
        name = "abc"[i % 3]
        world.at(0.0, lambda i=i, name=name: queue.submit(spec(f"{name}{i}", steps=10_000_000, tenant=name)))
    world.at(1500.0, stop.set)
    changes = {"cluster": "v100:2,p100:2,k80:2", "policy": "max_min_fairness_perf", "tenants": tenants}
    result = serve(request(out, **changes), stop, backend_on(world, fakes))
    rows = {row["tenant"]: row for row in result["tenants"]}
    assert result["contended_rounds"] > 200
    for name, weight in (("a", 1), ("b", 2), ("c", 3)):
        assert rows[name]["contended_share"] == pytest.approx(weight / 6, rel=0.05)
    account = {row["tenant"]: row for row in accounts(out)["tenants"]}
    assert all(account[name]["gpu_seconds"] > 0 and account[name]["jobs"] == 4 for name in "abc")


def test_a_resumed_service_keeps_its_tenants_and_what_they_received(tmp_path: Path) -> None:
    """Stopped mid-run and resumed without --tenants (the journal names the file): the tenant sharing's accounts go
    on from where they were, every acked job finishes, and bob's cap still holds."""
    out, world, fakes, stop = tmp_path / "service", World(), [], threading.Event()
    queue = Store(out, clock=world.now)
    for name, tenant in (("a1", "alice"), ("a2", "alice"), ("b1", "bob"), ("b2", "bob")):
        world.at(0.0, lambda name=name, tenant=tenant: queue.submit(spec(name, steps=3000, tenant=tenant)))
    world.at(22.0, stop.set)
    first = serve(request(out, tenants=tenants_file(tmp_path)), stop, backend_on(world, fakes))
    received = {row["tenant"]: row["gpu_seconds"] for row in first["tenants"]}
    assert received["alice"] > 0 and received["bob"] > 0
    stop = threading.Event()
    world.at(world.now() + 300.0, stop.set)
    resumed = serve(request(out, resume=True), stop, backend_on(world, fakes))
    assert resumed["complete"] and {job.state for job in queue.jobs()} == {"done"}
    again = {row["tenant"]: row["gpu_seconds"] for row in resumed["tenants"]}
    assert all(again[name] > received[name] for name in received)
    assert all(sum(p.gpus for p in r.plan if p.job.startswith("b")) <= 1 for r in queue.rounds(10_000))
