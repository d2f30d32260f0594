"""The service's web dashboard (issue 20): its sign-in and the token it asks for, its event stream, the rounds the
store keeps for it, and the page itself in a real headless Chromium that sees jobs and a state change arrive without
a reload.

The browser is Debian's `chromium` driven through its `chromium-driver` with Selenium (`make test` installs all
three); a missing one skips the browser tests, or fails them under CI=true. No scheduler runs: a test plays its part
by writing to the store. Waits on the page are bounded and poll the DOM; none sleeps a fixed time.

Open streams share one snapshot per change of the store, read once (issue 31: each stream read and encoded the whole
queue in the API's thread pool, and 30 of them held submissions up for seconds): a test counts the store's reads.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2 as httpx
import pytest
from fastapi.testclient import TestClient

from shockwave.core.cluster import ClusterSpec
from shockwave.service import dashboard
from shockwave.service import store as store_module
from shockwave.service.api import make_app
from shockwave.service.dashboard import PAGE
from shockwave.service.server import RunningServer, start_server
from shockwave.service.spec import JobSpec
from shockwave.service.store import Placement, Store

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CLUSTER = ClusterSpec.parse("v100:4,k80:2")
TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RESNET = {"name": "a", "family": "ResNet-18", "gpus": 1, "steps": 200}
PAGE_WAIT_S = 20.0
"""The longest a page may take to show a change (it polls the store every 0.5 s; a busy machine is slow)."""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "svc")


@pytest.fixture
def api(store: Store) -> TestClient:
    """The app in-process, with no credentials unless a test gives them."""
    return TestClient(make_app(store, CLUSTER, TOKEN), raise_server_exceptions=False)


def refused(response: Any, field: str) -> str:
    assert response.status_code == 401, response.text
    assert response.json()["field"] == field, response.text
    return response.json()["detail"]


# ---- signing in ----------------------------------------------------------------------------------------------------


def test_the_dashboard_asks_for_the_token(api: TestClient) -> None:
    for path in ("/", "/events", "/api/rounds"):
        assert "open the dashboard as /?token=<token>" in refused(api.get(path), "Authorization")
        assert "wrong token" in refused(api.get(path, headers={"Authorization": "Bearer nope"}), "Authorization")
    assert "wrong token" in refused(api.get("/", params={"token": "nope"}, follow_redirects=False), "token")
    api.cookies.set("shockwave_dashboard_80", "forged")
    assert "open /?token=<token> again" in refused(api.get("/api/rounds"), "Cookie")


def test_the_token_in_the_address_becomes_a_read_only_cookie(api: TestClient) -> None:
    signed_in = api.get("/", params={"token": TOKEN}, follow_redirects=False)
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == "/"  # the token leaves the address bar
    cookie = signed_in.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert TOKEN not in cookie  # a value derived from it, which the API's Bearer check refuses
    page = api.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert api.get("/api/rounds").json() == []
    assert refused(api.get("/jobs"), "Authorization")  # the cookie reads the dashboard, nothing else
    assert refused(api.post("/jobs", json=RESNET), "Authorization")
    cookie_value = api.cookies["shockwave_dashboard_80"]
    assert refused(api.get("/jobs", headers={"Authorization": f"Bearer {cookie_value}"}), "Authorization")
    assert api.get("/api/rounds", headers=AUTH).status_code == 200  # the CLI's header works too


def test_the_page_builds_nothing_from_markup_and_runs_only_its_own_code(api: TestClient) -> None:
    """Job names are user input (the spec restricts them, but the page must not rely on it): text goes in with
    textContent, never through an HTML parser; the CSP allows the page's own inline script and style alone."""
    assert (
        re.findall(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|\bon\w+=", PAGE) == []
    )
    assert "http://" not in PAGE.replace("http://www.w3.org/2000/svg", "") and "https://" not in PAGE  # no CDN
    policy = api.get("/", headers=AUTH).headers["content-security-policy"]
    assert "default-src 'none'" in policy and "unsafe" not in policy
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+';", policy)
    hostile = api.post("/jobs", json=RESNET | {"name": "<img src=x onerror=alert(1)>"}, headers=AUTH)
    assert hostile.status_code == 422 and hostile.json()["field"] == "name"


# ---- what the store keeps for it ----------------------------------------------------------------------------------


def test_the_version_moves_on_every_change_and_only_then(store: Store) -> None:
    seen = [store.version()]

    def moved() -> bool:
        seen.append(store.version())
        return seen[-1] > seen[-2]

    store.submit(JobSpec.model_validate(RESNET))
    assert moved()
    store.update(1, state="running", gpu_type="v100", gpus=1)
    assert moved()
    store.record_round(10.0, {"v100": 1}, [Placement(job="a", gpu_type="v100", gpus=1)])
    assert moved()
    store.cancel("a")
    assert moved()
    store.cancel("a")  # changes nothing
    assert not store.update(1, progress_steps=5)  # a job that is over stays over
    assert not moved()
    assert Store(store.folder).version() == seen[-1]  # reopening keeps the count


def test_rounds_are_kept_in_order_checked_and_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "KEEP_ROUNDS", 3)
    for i in range(5):
        plan = [Placement(job="a", gpu_type="v100", gpus=i + 1)]
        recorded = store.record_round(100.0 + i, {"v100": i + 1, "k80": 0}, plan)
        assert recorded.id == i + 1
    kept = Store(store.folder).rounds(10)
    assert [(r.id, r.time_s, r.busy["v100"], r.plan[0].gpus) for r in kept] == [
        (3, 102.0, 3, 3),
        (4, 103.0, 4, 4),
        (5, 104.0, 5, 5),
    ]
    assert [r.id for r in store.rounds(2)] == [4, 5]
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        store.record_round(1.0, {"v100": -1}, [])
    with pytest.raises(ValueError, match="finite"):
        store.record_round(float("nan"), {}, [])
    assert len(store.rounds(10)) == 3  # nothing recorded from either


def test_the_rounds_route(api: TestClient, store: Store) -> None:
    for i in range(3):
        store.record_round(50.0 * i, {"v100": i}, [])
    rounds = api.get("/api/rounds", params={"limit": 2}, headers=AUTH).json()
    assert [(r["id"], r["time_s"], r["busy"], r["plan"]) for r in rounds] == [
        (2, 50.0, {"v100": 1}, []),
        (3, 100.0, {"v100": 2}, []),
    ]
    assert api.get("/api/rounds", params={"limit": 0}, headers=AUTH).status_code == 422


# ---- against a real server -----------------------------------------------------------------------------------------


@pytest.fixture
def service(store: Store) -> Iterator[tuple[str, Store]]:
    """The API on 127.0.0.1 (a port the system picks), without its scheduler."""
    running: RunningServer = start_server(make_app(store, CLUSTER, TOKEN))
    try:
        yield running.url, store
    finally:
        running.stop()
    assert not running.thread.is_alive()  # no stream was left open


def submit_two(url: str) -> None:
    with httpx.Client(base_url=url, headers=AUTH, trust_env=False) as client:
        for name, family in (("resnet-a", "ResNet-18"), ("lm_b", "LM")):
            response = client.post("/jobs", json={"name": name, "family": family, "steps": 400})
            assert response.status_code == 201, response.text


def snapshots(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The data of the stream's `snapshot` events as they come, until it ends."""
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event.get("event") == "snapshot":
                yield json.loads(event["data"])
            event = {}
        elif not line.startswith(":"):  # a comment keeps the connection alive
            key, _, value = line.partition(": ")
            event[key] = value


def next_snapshot(lines: Iterator[str]) -> dict[str, Any]:
    """The data of the stream's next `snapshot` event."""
    snapshot = next(snapshots(lines), None)
    assert snapshot is not None, "the stream ended"
    return snapshot


def test_the_stream_sends_the_queue_and_then_each_change(service: tuple[str, Store]) -> None:
    url, store = service
    submit_two(url)
    with (
        httpx.Client(base_url=url, headers=AUTH, trust_env=False, timeout=PAGE_WAIT_S) as client,
        client.stream("GET", "/events") as stream,
    ):
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        first = next_snapshot(lines)
        assert first["cluster"] == {"v100": 4, "k80": 2} and first["rounds"] == []
        assert [(j["name"], j["state"], j["requested_types"]) for j in first["jobs"]] == [
            ("resnet-a", "queued", []),
            ("lm_b", "queued", []),
        ]
        store.update(2, state="running", gpu_type="k80", gpus=1, progress_steps=100, rho=0.8, batch_size=10)
        second = next_snapshot(lines)
        assert second["version"] > first["version"]
        lm = second["jobs"][1]
        assert (lm["state"], lm["gpu_type"], lm["progress_steps"], lm["rho"], lm["batch_size"]) == (
            "running",
            "k80",
            100,
            0.8,
            10,
        )
        assert "command" not in json.dumps(second)


def test_a_silent_stream_keeps_the_connection_alive(
    service: tuple[str, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard, "KEEPALIVE_S", 0.05)
    url, store = service
    with (
        httpx.Client(base_url=url, headers=AUTH, trust_env=False, timeout=PAGE_WAIT_S) as client,
        client.stream("GET", "/events") as stream,
    ):
        lines = stream.iter_lines()
        first = next_snapshot(lines)
        assert next(lines) == ": keepalive"  # nothing changed: a comment, which proxies see as traffic
        store.submit(JobSpec.model_validate(RESNET))
        assert next_snapshot(lines)["version"] > first["version"]


def count_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often a snapshot's reads (`jobs`, `rounds`) hit the store from now on."""
    reads: Counter[str] = Counter()

    def counting(name: str, read: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            reads[name] += 1
            return read(*args)

        return counted

    for name in ("jobs", "rounds"):
        monkeypatch.setattr(store, name, counting(name, getattr(store, name)))
    return reads


def test_open_streams_share_one_read_of_the_store_per_change(
    service: tuple[str, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, store = service
    submit_two(url)
    reads = count_reads(store, monkeypatch)
    changes = 3
    with (
        httpx.Client(base_url=url, headers=AUTH, trust_env=False, timeout=PAGE_WAIT_S) as client,
        contextlib.ExitStack() as streams,
    ):
        readers = [streams.enter_context(client.stream("GET", "/events")).iter_lines() for _ in range(4)]
        sent = [next_snapshot(lines) for lines in readers]
        for change in range(changes):
            if change == 1:
                store.record_round(100.0, {"v100": 1}, [Placement(job="resnet-a", gpu_type="v100", gpus=1)])
            else:
                store.update(1, state="running", gpu_type="v100", gpus=1, progress_steps=10 * (change + 1))
            news = [next_snapshot(lines) for lines in readers]
            assert all(snapshot == news[0] for snapshot in news)  # the same snapshot on every stream
            assert news[0]["version"] == store.version() > sent[0]["version"]
            sent = news
        assert sent[0]["rounds"][0]["plan"] == [{"job": "resnet-a", "gpu_type": "v100", "gpus": 1}]
        assert sent[0]["jobs"][0]["progress_steps"] == 30
    assert reads == {"jobs": changes + 1, "rounds": changes + 1}  # once each at the start and per change, not x4


def new_stream_answer(client: httpx.Client) -> int:
    """The status a new stream is answered with; when it is 200, after its first snapshot arrived."""
    with client.stream("GET", "/events") as stream:
        if stream.status_code == 200:
            next_snapshot(stream.iter_lines())
        return stream.status_code


def test_a_stream_past_the_cap_is_refused_until_one_ends(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "MAX_STREAMS", 2)
    running = start_server(make_app(store, CLUSTER, TOKEN))
    try:
        with (
            httpx.Client(base_url=running.url, headers=AUTH, trust_env=False, timeout=PAGE_WAIT_S) as client,
            client.stream("GET", "/events") as first,
        ):
            with client.stream("GET", "/events") as second:
                assert (first.status_code, second.status_code) == (200, 200)
                refusal = client.get("/events")
                assert refusal.status_code == 503 and refusal.headers["content-type"] == "application/json"
                assert refusal.json() == {
                    "detail": "2 dashboard streams are open, the most this service serves: try again later",
                    "field": None,
                }
            # The second one hung up: its place frees once the server has seen it go (bounded, polled).
            deadline = time.monotonic() + PAGE_WAIT_S
            while (answer := new_stream_answer(client)) != 200 and time.monotonic() < deadline:
                assert answer == 503
                time.sleep(0.05)
            assert answer == 200
    finally:
        running.stop()


def test_a_store_that_cannot_be_read_ends_the_streams(
    service: tuple[str, Store], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The browser reconnects after an ended stream (its page says `disconnected` meanwhile), and gets snapshots
    again once the store can be read."""
    url, store = service
    submit_two(url)
    with httpx.Client(base_url=url, headers=AUTH, trust_env=False, timeout=PAGE_WAIT_S) as client:
        with client.stream("GET", "/events") as stream:
            lines = stream.iter_lines()
            next_snapshot(lines)

            def locked() -> list[Any]:
                raise sqlite3.OperationalError("database is locked")

            monkeypatch.setattr(store, "jobs", locked)
            store.update(1, progress_steps=5)
            assert list(snapshots(lines)) == []  # it ends, and sends nothing more
        assert "the dashboard cannot read the service's store" in caplog.text
        monkeypatch.undo()

        def first_snapshot() -> dict[str, Any] | None:
            with client.stream("GET", "/events") as stream:
                return next(snapshots(stream.iter_lines()), None)

        deadline = time.monotonic() + PAGE_WAIT_S  # a stream opened before the feed retried ends at once
        while (snapshot := first_snapshot()) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert snapshot is not None and snapshot["jobs"][0]["progress_steps"] == 5


# ---- in a real browser ---------------------------------------------------------------------------------------------


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    """Headless Chromium under chromedriver, both Debian's (no browser is downloaded)."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    missing = [name for name, found in (("chromium", chromium), ("chromium-driver", chromedriver)) if not found]
    if importlib.util.find_spec("selenium") is None:
        missing.append("selenium")
    if missing:
        message = (
            f"the dashboard's browser test needs {' and '.join(missing)}: `make test` installs Debian's chromium "
            "and chromium-driver, and selenium with the dev extra"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to start as root with its sandbox
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=chromedriver))
    try:
        yield driver
    finally:
        driver.quit()


def shown(driver: WebDriver, table: str) -> list[list[str]]:
    """The text of each body row of a table, read in one step (the page replaces rows as news comes)."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'),"
        " row => Array.from(row.cells, cell => cell.textContent));",
        table,
    )


def wait_for(driver: WebDriver, what: str, check: Any) -> None:
    """Poll the page until `check(driver)` holds, at most PAGE_WAIT_S."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(driver, PAGE_WAIT_S, poll_frequency=0.2).until(check)
    except TimeoutException:
        jobs, plan = shown(driver, "#jobs"), shown(driver, "#plan")
        pytest.fail(f"the page did not show {what} within {PAGE_WAIT_S:g} s; jobs: {jobs}; plan: {plan}")


def state_of(driver: WebDriver, name: str) -> str | None:
    return next((row[3] for row in shown(driver, "#jobs") if row[1] == name), None)


def test_the_dashboard_shows_jobs_and_news_without_reloading(service: tuple[str, Store], browser: WebDriver) -> None:
    url, store = service
    submit_two(url)
    browser.get(f"{url}/?token={TOKEN}")
    assert browser.current_url == f"{url}/"  # signed in, and the token is out of the address
    wait_for(
        browser,
        "both queued jobs",
        lambda d: [(r[1], r[3]) for r in shown(d, "#jobs")] == [("resnet-a", "queued"), ("lm_b", "queued")],
    )
    wait_for(browser, "that it is live", lambda d: d.find_element("id", "status").text == "live")
    browser.execute_script("window.sameDocument = true;")  # gone if the page reloads

    store.update(1, state="running", gpu_type="v100", gpus=2, progress_steps=100, rho=0.93, batch_size=64)
    wait_for(browser, "resnet-a running", lambda d: state_of(d, "resnet-a") == "running")
    row = next(r for r in shown(browser, "#jobs") if r[1] == "resnet-a")
    assert row[4:8] == ["2x v100", "25%", "0.93", "64"]
    assert state_of(browser, "lm_b") == "queued"

    now = time.time()
    store.record_round(now, {"v100": 2, "k80": 0}, [Placement(job="resnet-a", gpu_type="v100", gpus=2)])
    wait_for(browser, "the round's plan", lambda d: shown(d, "#plan") == [["resnet-a", "2x v100"]])
    store.record_round(
        now + 60,
        {"v100": 2, "k80": 1},
        [
            Placement(job="resnet-a", gpu_type="v100", gpus=2),
            Placement(job="lm_b", gpu_type="k80", gpus=1),
        ],
    )
    wait_for(browser, "the second round's plan", lambda d: len(shown(d, "#plan")) == 2)
    charts = browser.execute_script(
        "return Array.from(document.querySelectorAll('#occupancy figure'), f => [f.dataset.gpuType, f.dataset.rounds,"
        " f.querySelector('.busy').textContent, f.querySelector('svg path').getAttribute('d')]);"
    )
    assert [chart[:3] for chart in charts] == [["v100", "2", "2 of 4 busy"], ["k80", "2", "1 of 2 busy"]]
    assert all(chart[3].startswith("M 0 ") for chart in charts)

    assert browser.execute_script("return window.sameDocument === true;")  # all of it without a reload
    errors = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []  # among others: no script or style refused by the page's Content-Security-Policy
