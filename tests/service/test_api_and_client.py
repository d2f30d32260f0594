"""The scheduler service's first layer (issue 20): job specs, the SQLite queue, the HTTP API and the CLI's
`submit`, `status`, `cancel` and `logs`.

The API is exercised in-process (FastAPI's TestClient: no network, no Ray); the CLI commands as a user runs them,
in subprocesses, against a real uvicorn server on 127.0.0.1 (a port the system picks). No scheduler runs: a test
plays its part by writing to the store. Nothing waits on the wall clock; the store's clock is a counter.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import require_module, shockwave
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.service.api import SchedulerMetrics, make_app
from shockwave.service.endpoint import (
    ENDPOINT_FILE,
    SERVICE_DIR_VARIABLE,
    Endpoint,
    new_token,
    read_endpoint,
    write_endpoint,
)
from shockwave.service.server import RunningServer, start_server
from shockwave.service.spec import NAME_PATTERN, JobSpec, load_spec
from shockwave.service.store import STORE_FILE, Store
from shockwave.workload_model.catalog import FAMILIES, WORKLOAD_FAMILIES
from shockwave.workload_model.trace import MAX_EPOCHS

CLUSTER = ClusterSpec.parse("v100:4,k80:2")
TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RESNET = {"name": "a", "family": "ResNet-18", "gpus": 1, "steps": 200}


def counter() -> Any:
    """A store clock that ticks once per submission: no wall clock in these tests."""
    ticks = itertools.count(1000)
    return lambda: float(next(ticks))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "svc", clock=counter())


@pytest.fixture
def api(store: Store) -> TestClient:
    return TestClient(make_app(store, CLUSTER, TOKEN), headers=AUTH, raise_server_exceptions=False)


def refused(response: Any, status: int, field: str) -> str:
    """The message of an error answer, after checking its status and the field it names."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["field"] == field, body
    return body["detail"]


# ---- the API, in-process -------------------------------------------------------------------------------------------


def test_submit_list_get_cancel_round_trip(api: TestClient, store: Store) -> None:
    created = api.post("/jobs", json=RESNET)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/jobs/a"
    job = created.json()
    assert (job["id"], job["name"], job["state"], job["submitted_s"]) == (1, "a", "queued", 1000.0)
    assert (job["total_steps"], job["batch_size"], job["progress_steps"]) == (200, 32, 0)  # the template's
    assert job["spec"]["batch_size"] == 32 and job["spec"]["mode"] == "static"

    second = api.post("/jobs", json={"name": "b", "family": "LM", "epochs": 2, "gpu_types": ["K80"], "weight": 5})
    assert second.status_code == 201, second.text
    assert second.json()["spec"]["gpu_types"] == ["k80"]
    assert second.json()["total_steps"] == 2 * FAMILIES["LM"].iterations_per_epoch(5)

    assert [j["name"] for j in api.get("/jobs").json()] == ["a", "b"]
    assert api.get("/jobs/b").json()["spec"]["weight"] == 5.0

    cancelled = api.delete("/jobs/a")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled" and cancelled.json()["cancel_pending"]
    assert api.get("/jobs/a").json()["state"] == "cancelled"
    assert api.get("/jobs/b").json()["state"] == "queued"
    # The scheduler's side: it learns of the cancellation, stops the job and says so.
    assert [j.name for j in store.pending_cancellations()] == ["a"]
    store.cancellation_done(1)
    assert store.pending_cancellations() == []


def test_cancel_is_idempotent_and_refuses_a_job_that_is_over(api: TestClient, store: Store) -> None:
    for name in ("a", "b", "c", "d"):
        assert api.post("/jobs", json=RESNET | {"name": name}).status_code == 201
    assert store.update(2, state="running", gpu_type="v100", gpus=1)
    assert store.update(3, state="done", progress_steps=200)
    assert store.update(4, state="failed", reason="crashed 4 times")

    first, again = api.delete("/jobs/a"), api.delete("/jobs/a")
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert api.delete("/jobs/b").json()["state"] == "cancelled"  # a running job: the scheduler stops it
    assert "is done already" in refused(api.delete("/jobs/c"), 409, "name")
    assert "is failed already" in refused(api.delete("/jobs/d"), 409, "name")
    assert "no job named 'zz'" in refused(api.delete("/jobs/zz"), 404, "name")
    assert [j.state for j in store.jobs()] == ["cancelled", "cancelled", "done", "failed"]


def test_a_duplicate_name_is_refused(api: TestClient, store: Store) -> None:
    assert api.post("/jobs", json=RESNET).status_code == 201
    assert "exists already" in refused(api.post("/jobs", json=RESNET | {"family": "LM"}), 409, "name")
    assert [j.spec.family for j in store.jobs()] == ["ResNet-18"]


BAD_SPECS = [
    ({"family": "ResNet-152"}, "family", "unknown family 'ResNet-152'"),
    ({"gpus": 8}, "gpus", "a gang of 8 GPUs never fits: the cluster's largest pool has 4 (v100)"),
    ({"gpu_types": ["a100"]}, "gpu_types", "the cluster has no a100 GPUs"),
    ({"gpu_types": ["k80"], "gpus": 4}, "gpus", "the largest pool of its gpu_types has 2 (k80)"),
    ({"gpus": "2"}, "gpus", "valid integer"),
    ({"gpus": True}, "gpus", "valid integer"),
    ({"epochs": 3}, "steps", "not both"),
    ({"steps": None}, "steps", "not neither"),
    ({"steps": 10**15}, "steps", f"at most {MAX_EPOCHS}"),
    ({"name": "../etc"}, "name", "letters, digits"),
    ({"mode": "adaptive"}, "mode", "'static', 'accordion' or 'gns'"),
    ({"batch_size": 4096}, "batch_size", "batch sizes 16 to 256"),
    ({"family": "A3C"}, "command", "no built-in workload"),
    ({"family": "Recommendation", "gpus": 2, "mode": "gns"}, "gpus", "does not train distributed"),
    ({"weight": 0}, "weight", "greater than 0"),
    ({"command": "python train.py"}, "command", "valid list"),
    ({"command": ["python", ""]}, "command[1]", "at least 1 character"),
    ({"gpu_types": ["v100", "V100"]}, "gpu_types", "twice"),
    ({"priority": 2}, "priority", "unknown field"),
]


@pytest.mark.parametrize(("change", "field", "message"), BAD_SPECS, ids=[b[1] + ":" + str(b[0]) for b in BAD_SPECS])
def test_a_bad_spec_is_refused_with_its_field_and_nothing_is_queued(
    api: TestClient, store: Store, change: dict[str, Any], field: str, message: str
) -> None:
    spec = {k: v for k, v in (RESNET | change).items() if v is not None}
    assert message in refused(api.post("/jobs", json=spec), 422, field)
    assert store.jobs() == []


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b'{"name": "a", "family": ', 422, "not valid JSON"),
        (b"[1, 2]", 422, "expected a JSON object"),
        (b"", 422, "is required"),
        (b'{"name": "a", "family": "LM", "steps": 1' + b"0" * 5000 + b"}", 400, "error parsing the body"),
    ],
    ids=["truncated", "list", "empty", "5000-digit-number"],
)
def test_a_malformed_body_is_refused_and_nothing_is_queued(
    api: TestClient, store: Store, body: bytes, status: int, message: str
) -> None:
    response = api.post("/jobs", content=body, headers={"Content-Type": "application/json"})
    assert message in refused(response, status, "body")
    assert store.jobs() == []


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_refused_like_any_error(api: TestClient, store: Store, declared: bool) -> None:
    """A 10 MB body gets the API's JSON error, whether its Content-Length tells or its bytes do (issue 31: FastAPI's
    own limit answered `Content Too Large` in plain text)."""
    body = b'{"name": "a", "family": "LM", "steps": 1, "note": "' + b"x" * (10 << 20) + b'"}'
    chunks = [body[start : start + (1 << 20)] for start in range(0, len(body), 1 << 20)]
    content = body if declared else iter(chunks)
    response = api.post("/jobs", content=content, headers={"Content-Type": "application/json"})
    assert response.headers["content-type"] == "application/json"
    assert "over 1048576 bytes" in refused(response, 413, "body")
    assert store.jobs() == []


PROTECTED = [
    ("POST", "/jobs"),
    ("GET", "/jobs"),
    ("GET", "/jobs/a"),
    ("DELETE", "/jobs/a"),
    ("GET", "/jobs/a/logs"),
    ("GET", "/metrics"),
]


@pytest.mark.parametrize(("method", "path"), PROTECTED)
@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing token"),
        ({"Authorization": "Bearer not-the-token"}, "wrong token"),
        ({"Authorization": f"Basic {TOKEN}"}, "missing token"),
        ({"Authorization": "Bearer t\u00f6ken".encode("latin-1")}, "wrong token"),  # compare_digest must not raise
    ],
    ids=["missing", "wrong", "not-bearer", "latin-1"],
)
def test_every_route_but_health_needs_the_token(
    store: Store, method: str, path: str, headers: dict[str, str | bytes], message: str
) -> None:
    client = TestClient(make_app(store, CLUSTER, TOKEN), raise_server_exceptions=False)
    response = client.request(method, path, json=RESNET if method == "POST" else None, headers=headers)
    assert message in refused(response, 401, "Authorization")
    assert response.headers["www-authenticate"] == "Bearer"
    assert store.jobs() == []


def test_health_and_the_openapi_docs_need_no_token(store: Store) -> None:
    client = TestClient(make_app(store, CLUSTER, TOKEN))
    assert client.get("/healthz").json() == {"status": "ok"}
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/jobs", "/jobs/{name}", "/jobs/{name}/logs", "/metrics", "/healthz"} <= set(paths)
    assert client.get("/docs").status_code == 200


def test_metrics_count_jobs_by_state_and_show_what_the_scheduler_reports(store: Store) -> None:
    for name in ("a", "b", "c"):
        store.submit(JobSpec.model_validate(RESNET | {"name": name}))
    store.update(1, state="running")
    store.cancel("c")
    report = SchedulerMetrics(gpu_utilisation={"v100": 0.75, "k80": 0.0}, solve_seconds=0.25, round_seconds=12.0)
    bare = TestClient(make_app(store, CLUSTER, TOKEN), headers=AUTH).get("/metrics")
    full = TestClient(make_app(store, CLUSTER, TOKEN, lambda: report), headers=AUTH).get("/metrics")
    assert bare.headers["content-type"].startswith("text/plain")
    lines = set(full.text.splitlines())
    for state, count in (("queued", 1), ("running", 1), ("done", 0), ("cancelled", 1), ("failed", 0)):
        assert f'shockwave_jobs{{state="{state}"}} {count}.0' in lines
        assert f'shockwave_jobs{{state="{state}"}} {count}.0' in bare.text.splitlines()
    assert 'shockwave_gpu_utilisation_ratio{gpu_type="v100"} 0.75' in lines
    assert "shockwave_solve_seconds 0.25" in lines and "shockwave_round_seconds 12.0" in lines
    assert "shockwave_solve_seconds" not in bare.text


def test_logs_are_the_end_of_the_jobs_log_file(api: TestClient, store: Store) -> None:
    api.post("/jobs", json=RESNET)
    assert api.get("/jobs/a/logs").text == ""  # nothing written yet
    (store.folder / "logs").mkdir()
    (store.folder / "logs" / "a.log").write_text("".join(f"step {i}\n" for i in range(300)))
    assert api.get("/jobs/a/logs").text.splitlines() == [f"step {i}" for i in range(100, 300)]
    assert api.get("/jobs/a/logs", params={"lines": 2}).text == "step 298\nstep 299\n"
    assert "no job named" in refused(api.get("/jobs/zz/logs"), 404, "name")
    assert refused(api.get("/jobs/a/logs", params={"lines": 0}), 422, "query.lines")


def test_a_submission_does_not_wait_for_a_reader_of_the_store(api: TestClient, store: Store) -> None:
    """The scheduler reading the queue (a transaction open mid-round) never holds a submission up: WAL mode."""
    reader = sqlite3.connect(store.path)
    try:
        assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM jobs").fetchone() == (0,)
        assert api.post("/jobs", json=RESNET).status_code == 201
        assert reader.execute("SELECT COUNT(*) FROM jobs").fetchone() == (0,)  # its snapshot, undisturbed
    finally:
        reader.close()
    assert [j.name for j in store.jobs()] == ["a"]


# ---- the store -----------------------------------------------------------------------------------------------------


def test_the_store_survives_reopening(tmp_path: Path) -> None:
    folder = tmp_path / "svc"
    first = Store(folder, clock=counter())
    for name in ("a", "b", "c", "d"):
        first.submit(JobSpec.model_validate(RESNET | {"name": name}))
    first.update(1, state="done", progress_steps=200, rho=0.9)
    first.update(2, state="running", gpu_type="k80", gpus=1, progress_steps=50, estimated_finish_s=2000.0)
    first.cancel("c")
    reopened = Store(folder, clock=counter())
    assert reopened.jobs() == first.jobs()
    assert [(j.name, j.state) for j in reopened.jobs()] == [
        ("a", "done"),
        ("b", "running"),
        ("c", "cancelled"),
        ("d", "queued"),
    ]
    assert [j.name for j in reopened.pending_cancellations()] == ["c"]
    assert [j.name for j in reopened.new_since(2)] == ["c", "d"]
    e = reopened.submit(JobSpec.model_validate(RESNET | {"name": "e"}))
    assert e.id == 5  # submission order goes on
    assert (folder / STORE_FILE).is_file()


def test_a_job_that_is_over_stays_over(store: Store) -> None:
    store.submit(JobSpec.model_validate(RESNET))
    store.cancel("a")
    assert not store.update(1, state="running", progress_steps=10)  # the scheduler had not heard yet
    job = store.get("a")
    assert (job.state, job.progress_steps) == ("cancelled", 0)
    with pytest.raises(ValueError, match="cannot change"):
        store.update(1, name="b")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="unknown state"):
        store.update(1, state="paused")  # type: ignore[typeddict-item]


def test_a_folder_that_is_not_a_store_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / STORE_FILE).write_text("not a database, just text " * 100)
    with pytest.raises(InputError, match="cannot open the service's store") as info:
        Store(tmp_path)
    assert info.value.path == str(tmp_path / STORE_FILE)


# ---- specs and the endpoint file -----------------------------------------------------------------------------------


def test_a_spec_becomes_the_job_the_scheduler_admits() -> None:
    spec = JobSpec.model_validate(
        {"name": "g", "family": "ResNet-50", "mode": "gns", "gpus": 2, "epochs": 3, "batch_size": 32, "weight": 5}
    )
    job = spec.job(arrival=12.5)
    assert (job.model, job.batch_size, job.scale_factor, job.mode) == ("ResNet-50", 32, 2, "gns")
    assert job.total_steps == 3 * FAMILIES["ResNet-50"].iterations_per_epoch(32)
    assert (job.priority_weight, job.arrival) == (5.0, 12.5)


def test_spec_files_name_the_file_and_the_field(tmp_path: Path) -> None:
    good = tmp_path / "a.toml"
    good.write_text(
        'name = "a"\nfamily = "ResNet-18"\nsteps = 200\ngpu_types = ["v100"]\ncommand = ["python", "t.py"]\n'
    )
    spec = load_spec(good, {"gpus": 2})
    assert (spec.gpus, spec.command, spec.gpu_types) == (2, ["python", "t.py"], ["v100"])
    cases = {
        "bad.toml": ('name = "a"\nfamily = \n', None, "not valid TOML"),
        "bad.json": ('{"name": "a",', 1, "not valid JSON"),
        "list.json": ("[1]", None, "expected a job spec"),
        "family.toml": ('name = "a"\nfamily = "GPT-5"\nsteps = 1\n', None, "unknown family"),
        "empty.json": ("", None, "empty"),
    }
    for file_name, (text, line, message) in cases.items():
        path = tmp_path / file_name
        path.write_text(text)
        with pytest.raises(InputError, match=message) as info:
            load_spec(path)
        assert info.value.path == str(path)
        assert info.value.line == line
    with pytest.raises(InputError) as info:
        load_spec(tmp_path / "family.toml")
    assert info.value.field == "family"


def test_the_built_in_workloads_are_those_training_provides() -> None:
    require_module("torch", "the built-in workloads need torch: pip install 'shockwave[workloads]'")
    from shockwave.training.train import MODELS

    assert set(MODELS) == set(WORKLOAD_FAMILIES)


def test_the_endpoint_file_is_its_owners_alone(tmp_path: Path) -> None:
    token = new_token()
    assert len(token) >= 43 and token != new_token()
    path = write_endpoint(tmp_path, Endpoint("http://127.0.0.1:1234", token))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_endpoint(tmp_path) == Endpoint("http://127.0.0.1:1234", token)
    write_endpoint(tmp_path, Endpoint("http://127.0.0.1:99", token))  # replaced, still private
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_endpoint(tmp_path).url == "http://127.0.0.1:99"


@pytest.mark.parametrize(
    ("content", "field", "message"),
    [
        (None, None, "no scheduler service here"),
        ("{", None, "not valid JSON"),
        ('{"url": "http://x"}', "token", "expected a token"),
        ('{"url": 3, "token": "t"}', "url", "expected a url"),
        ('{"url": "http://x", "token": ""}', "token", "empty"),
        ('{"url": "http://x", "token": "a\\nb"}', "token", "expected a token"),
    ],
)
def test_a_missing_or_malformed_endpoint_file_is_named(
    tmp_path: Path, content: str | None, field: str | None, message: str
) -> None:
    if content is not None:
        (tmp_path / ENDPOINT_FILE).write_text(content)
    with pytest.raises(InputError, match=message) as info:
        read_endpoint(tmp_path)
    assert info.value.path == str(tmp_path / ENDPOINT_FILE)
    assert info.value.field == field


# ---- the CLI against a real server ---------------------------------------------------------------------------------


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Path, Store]]:
    """A service without its scheduler: the API on 127.0.0.1 (port 0) and its endpoint.json."""
    folder = tmp_path / "service"
    store = Store(folder)
    token = new_token()
    running: RunningServer = start_server(make_app(store, CLUSTER, token))
    try:
        assert running.url.startswith("http://127.0.0.1:")
        write_endpoint(folder, Endpoint(running.url, token))
        yield folder, store
    finally:
        running.stop()
    assert not running.thread.is_alive()


def test_the_interface_commands(service: tuple[Path, Store]) -> None:
    folder, store = service
    submitted = shockwave(
        "submit", "--out", folder, "--name", "a", "--family", "ResNet-18", "--gpus", 1, "--steps", 200
    )
    assert submitted.returncode == 0, submitted.stderr
    assert "submitted a (job 1)" in submitted.stdout
    job = store.get("a")
    assert (job.state, job.spec.gpus, job.total_steps) == ("queued", 1, 200)
    store.update(job.id, state="done", progress_steps=200, rho=0.95)  # what the scheduler will do

    status = shockwave("status", "--out", folder)
    assert status.returncode == 0, status.stderr
    row = next(line for line in status.stdout.splitlines() if " a " in line)
    assert "done" in row and "200/200 (100%)" in row and "0.95" in row

    cancel = shockwave("cancel", "--out", folder, "a")
    assert cancel.returncode == 2
    assert "is done already: nothing to cancel" in cancel.stderr and "Traceback" not in cancel.stderr


def test_the_cli_finds_the_service_from_the_environment(
    service: tuple[Path, Store], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, store = service
    monkeypatch.setenv(SERVICE_DIR_VARIABLE, str(folder))
    spec = tmp_path / "b.toml"
    spec.write_text('name = "b"\nfamily = "LM"\nepochs = 1\nmode = "accordion"\n')
    assert shockwave("submit", spec, "--gpu-types", "k80").returncode == 0
    assert store.get("b").spec.gpu_types == ["k80"]
    for _ in range(2):  # cancelling again changes nothing
        cancelled = shockwave("cancel", "b")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "cancelled b" in cancelled.stdout
    (folder / "logs").mkdir()
    (folder / "logs" / "b.log").write_text("epoch 0\nepoch 1\n")
    logs = shockwave("logs", "b", "--lines", 1)
    assert (logs.returncode, logs.stdout) == (0, "epoch 1\n")
    listed = shockwave("status", "--json")
    assert [(j["name"], j["state"]) for j in json.loads(listed.stdout)] == [("b", "cancelled")]


def test_the_cli_refuses_bad_submissions_naming_the_field(service: tuple[Path, Store], tmp_path: Path) -> None:
    folder, store = service
    malformed = tmp_path / "bad.toml"
    malformed.write_text('name = "x"\nfamily = "ResNet-18\n')
    too_big = tmp_path / "big.json"
    too_big.write_text(json.dumps(RESNET | {"gpus": 16}))
    cases = [
        (("submit", "--out", folder, malformed), f"{malformed}: not valid TOML"),
        (("submit", "--out", folder, too_big), f"{too_big}: field 'gpus': a gang of 16 GPUs never fits"),
        (("submit", "--out", folder, "--name", "x", "--family", "BERT", "--steps", 9), "field 'family': unknown"),
        (("submit", "--out", folder, "--name", "x", "--family", "LM", "--steps", 9, "--gpu-types", "a100"), "a100"),
    ]
    for args, message in cases:
        result = shockwave(*args)
        assert result.returncode == 2, result.stdout
        assert message in result.stderr and "Traceback" not in result.stderr
    assert store.jobs() == []


def test_the_cli_with_a_wrong_token_or_no_service(
    service: tuple[Path, Store], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, store = service
    monkeypatch.delenv(SERVICE_DIR_VARIABLE, raising=False)
    url = read_endpoint(folder).url
    write_endpoint(folder, Endpoint(url, "not-the-token"))
    wrong = shockwave("submit", "--out", folder, "--name", "a", "--family", "ResNet-18", "--steps", 200)
    assert wrong.returncode == 2
    assert "refused the token" in wrong.stderr and "'Authorization'" in wrong.stderr
    assert store.jobs() == []
    nowhere = shockwave("status", "--out", tmp_path / "elsewhere")
    assert nowhere.returncode == 2
    assert f"{tmp_path / 'elsewhere' / ENDPOINT_FILE}: no scheduler service here" in nowhere.stderr
    unset = shockwave("status")
    assert (
        unset.returncode == 2
        and f"give --out DIR (the folder of `shockwave serve`) or set {SERVICE_DIR_VARIABLE}" in unset.stderr
    )


# ---- random bodies -------------------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
PLAUSIBLE = st.fixed_dictionaries(
    {"name": st.from_regex(NAME_PATTERN, fullmatch=True), "family": st.sampled_from(WORKLOAD_FAMILIES)},
    optional={
        "command": st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3),
        "mode": st.sampled_from(["static", "accordion", "gns"]),
        "batch_size": st.integers(1, 300),
        "gpus": st.integers(1, 5),
        "gpu_types": st.lists(st.sampled_from(["v100", "k80", "K80", "a100"]), min_size=1, max_size=2),
        "weight": st.floats(0.0, 10.0),
        "entity": st.text(min_size=1, max_size=10),
    },
)
LENGTH = st.fixed_dictionaries({"steps": st.integers(1, 10**7)}) | st.fixed_dictionaries({"epochs": st.integers(1, 50)})


@st.composite
def spec_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A plausible spec (the cluster may still refuse it), often with one field dropped, replaced or added."""
    body = draw(PLAUSIBLE) | draw(LENGTH)
    change = draw(st.sampled_from(["none", "drop", "replace", "add"]))
    if change in ("drop", "replace"):
        key = draw(st.sampled_from(sorted(body)))
        body.pop(key)
        if change == "replace":
            body[key] = draw(JSON)
    elif change == "add":
        body[draw(st.text(max_size=10))] = draw(JSON)
    return body


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=spec_bodies() | JSON)
def test_random_bodies_never_fail_the_server_nor_queue_an_invalid_job(api: TestClient, store: Store, body: Any) -> None:
    before = len(store.jobs())
    response = api.post("/jobs", content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert response.status_code in (201, 400, 409, 422), response.text
    event(f"HTTP {response.status_code}")  # --hypothesis-show-statistics: how often a body was queued
    if response.status_code != 201:
        assert response.json()["field"], response.text  # every refusal names what to fix
    assert len(store.jobs()) == before + (response.status_code == 201)
    for job in store.jobs():  # every queued job is one the cluster can run
        spec = JobSpec.model_validate(job.spec.model_dump())
        spec.check(CLUSTER)
        assert job.total_steps == spec.total_steps
