"""Metrics and the dashboard of a real server, the pages in a real headless Chromium.

Screenshots of every page go to ``test-output/screenshots/`` at the repository's root
(``EVENTQ_TEST_OUTPUT`` moves ``test-output``), for a person to look at.
"""

from __future__ import annotations

import os
import re
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from eventq.client import Client, NotFound, TimedOut
from support.browser import Browser, chromium_path

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("EVENTQ_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"


@pytest.fixture(scope="module")
def server(kafka_bootstrap, tmp_path_factory):
    from tools.servers import ServerProcess

    process = ServerProcess(kafka_bootstrap, f"m{os.getpid()}-dashboard",
                            tmp_path_factory.mktemp("server"), http_actions="true")
    process.create_topics()
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


@pytest.fixture(scope="module")
def browser():
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: `make browser` should have installed it")
        pytest.skip("chromium is not installed and could not be (run `make browser` as "
                    "root, or install Debian's chromium package)")
    with Browser.open() as opened:
        yield opened


@pytest.fixture(scope="module")
def workload(server):
    """mail: 6 added, 3 completed, 1 leased (held), 2 ready. bills: 2 added with
    max-fails 1, one failed."""
    with Client("127.0.0.1", server.port) as c:
        mail = [c.add("mail", f"letter {i}", ttr_ms=600_000) for i in range(6)]
        for _ in range(3):
            c.complete(c.lease("mail", 1000).id, "sent")
        held = c.lease("mail", 1000)
        bills = [c.add("bills", b"\x00\x01invoice", max_fails=1) for _ in range(2)]
        failed = c.lease("bills", 1000)
        c.fail(failed.id, "boom: printer on fire")
    return {"mail": mail, "held": held.id, "failed": failed.id, "bills": bills}


def get(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def metrics(server) -> dict[tuple[str, tuple], float]:
    _, text = get(server.http_url() + "metrics")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples, name: str, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_metrics_count_the_queues_commands_times_and_partitions(server, workload):
    deadline = time.monotonic() + 20
    while True:  # the lag gauge follows the consumer's fetches
        m = metrics(server)
        lags = [v for (name, _), v in m.items() if name == "eventq_consumer_lag"]
        if len(lags) == 4 and not any(lags) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert lags == [0, 0, 0, 0]
    assert value(m, "eventq_queue_jobs", queue="mail", state="ready") == 2
    assert value(m, "eventq_queue_jobs", queue="mail", state="leased") == 1
    assert value(m, "eventq_queue_jobs", queue="mail", state="completed") == 3
    assert value(m, "eventq_queue_jobs", queue="bills", state="failed") == 1
    assert value(m, "eventq_queue_paused", queue="mail") == 0
    assert value(m, "eventq_request_seconds_count", verb="add") == 8
    assert value(m, "eventq_request_seconds_count", verb="lease") == 5
    assert value(m, "eventq_job_wait_seconds_count", queue="mail") == 4
    assert value(m, "eventq_job_run_seconds_count", queue="mail") == 3
    assert value(m, "eventq_job_run_seconds_count", queue="bills") == 1
    assert value(m, "eventq_queue_events_total", queue="mail", event="completed") == 3
    # 8 adds, 5 start-attempts, 3 completes, 1 fail, each in a record of its own
    assert value(m, "eventq_commands_total", outcome="applied") == 17
    assert value(m, "eventq_processor_batch_commands_count") >= 17
    assert value(m, "eventq_serving") == 1
    assert sum(v for (name, _), v in m.items() if name == "eventq_applied_offset") >= 13


def shot(browser: Browser, name: str) -> None:
    path = browser.screenshot(SHOTS / f"{name}.png")
    assert path.stat().st_size > 5_000, f"{path} looks empty"


def test_the_pages_render_live_data(server, workload, browser):
    base = server.http_url()
    browser.goto(base)
    queues = browser.text("#queues")
    # ready, scheduled, waiting, leased, completed, failed
    assert re.search(r"mail\s+2\s+0\s+0\s+1\s+3\s+0", queues), queues
    assert re.search(r"bills\s+1\s+0\s+0\s+0\s+0\s+1", queues), queues
    assert browser.evaluate("document.querySelectorAll('svg.chart').length") == 2
    # The charts draw once two samples (5 s apart) exist; the page reloads itself.
    browser.wait_for("document.querySelectorAll('svg.chart polyline').length >= 7", 30)
    shot(browser, "queues")

    browser.goto(base + "queues/mail?kind=leased")
    assert str(workload["held"]) in browser.text("#jobs")
    assert "samples" in browser.text("#durations")
    shot(browser, "queue-leased")
    browser.goto(base + "queues/mail")
    assert len(browser.evaluate("[...document.querySelectorAll('#jobs a')].map(a => a.href)")) == 2

    browser.goto(base + "queues/bills?kind=failed")
    browser.click("#jobs a")
    assert str(workload["failed"]) in browser.url()
    assert "boom: printer on fire" in browser.text("#result")
    assert "00 01 69 6e" in browser.text("#payload")  # bytes shown as hex
    history = browser.text("#history")
    for line in ("add\taccepted\tadded", "start-attempt\taccepted", "fail\taccepted\tfailed"):
        assert line in history, history
    shot(browser, "job")

    browser.goto(base + "cluster")
    assert browser.text("#serving") == "serving"
    assert browser.evaluate("document.querySelectorAll('#partitions tr').length") == 5
    shot(browser, "cluster")


def test_actions_change_the_state_and_the_page_shows_it(server, workload, browser):
    base = server.http_url()
    with Client("127.0.0.1", server.port) as c:
        browser.goto(base + "queues/bills")
        browser.click("button[name=pause]")
        assert "Queue paused" in browser.text("#flash")
        assert browser.text("#state") == "paused"
        shot(browser, "queue-paused")
        assert c.inspect_queue("bills").paused
        with pytest.raises(TimedOut):
            c.lease("bills", 200)
        browser.click("button[name=resume]")
        assert browser.text("#state") == "active"
        assert not c.inspect_queue("bills").paused

        browser.goto(base + f"jobs/{workload['failed']}")
        browser.click("button[name=retry]")
        assert "retried" in browser.text("#flash")
        copy = browser.url().split("/jobs/")[1].split("?")[0]
        assert copy == str(workload["failed"])  # retry: the same job, under its id
        retried = c.inspect_job(copy)
        assert (retried.name, retried.state, retried.payload, retried.fails) == (
            "bills", "new", b"\x00\x01invoice", 0)
        shot(browser, "job-retried")

        # A failure group, listed and retried from its page (docs/workflows.md, "Failure
        # groups and retry").
        grouped = c.add("bills", b"g")
        c.fail(grouped, b"x", group="dashboard-group")
        browser.goto(base + "failed")
        assert "dashboard-group" in browser.text("#groups")
        browser.goto(base + "failed/dashboard-group")
        assert str(grouped) in browser.text("#jobs")
        browser.click("button[name=retry-group]")
        assert "Failure group retried" in browser.text("#flash")
        assert c.inspect_job(grouped).state == "new"
        shot(browser, "group-retried")
        browser.goto(base + f"jobs/{copy}")

        browser.click("button[name=delete]")
        assert "Job deleted" in browser.text("#flash")
        with pytest.raises(NotFound):
            c.inspect_job(copy)


def test_actions_from_another_site_are_refused(server, workload):
    status, page = get(server.http_url() + "queues/mail/pause", data=b"",
                       headers={"Origin": "http://evil.example"})
    assert status == 403 and "another site" in page


def test_a_read_only_dashboard_shows_no_actions_and_refuses_them(kafka_bootstrap, tmp_path):
    from tools.servers import ServerProcess

    process = ServerProcess(kafka_bootstrap, f"m{os.getpid()}-readonly", tmp_path / "ro")
    process.create_topics()
    process.start()
    try:
        with Client("127.0.0.1", process.port) as c:
            job = c.add("ro", "x")
        base = process.http_url()
        status, page = get(base + "queues/ro")
        assert status == 200 and "<form" not in page and "read-only" in page
        status, page = get(base + "queues/ro/pause", data=b"")
        assert status == 403 and "--http-actions" in page
        status, _ = get(base + f"jobs/{job}/delete", data=b"")
        assert status == 403
        with Client("127.0.0.1", process.port) as c:
            assert not c.inspect_queue("ro").paused and c.inspect_job(job).state == "new"
        status, page = get(base + "queues/none-such")
        assert status == 404
    finally:
        assert process.stop() == 0, process.log_tail()


def rows(browser: Browser, table: str) -> list[list[str]]:
    """A table's rows of cell texts, its header row left out."""
    return browser.evaluate(
        f"[...document.querySelectorAll('#{table} tr')].slice(1)"
        ".map(tr => [...tr.cells].map(td => td.innerText))")


def test_workflows_show_waiting_jobs_edges_and_their_metrics(server, workload, browser):
    """docs/workflows.md, "Dependencies", on a real server: D waits for U1 (completed), U2
    (not yet) and GHOST (never added). Its queue counts and lists it as waiting, its page
    lists its upstreams with their states, U1's lists D, and /metrics counts the waiting
    job, the three registrations and the one notice applied."""
    ghost = uuid.uuid4()
    with Client("127.0.0.1", server.port) as c:
        u1, u2 = c.add("wf-extract", "one"), c.add("wf-extract", "two")
        d = c.add("wf-load", "d", after=[u1, u2, ghost])
        assert c.lease("wf-extract", 1000).id == u1
        c.complete(u1, "extracted")
        deadline = time.monotonic() + 20  # the notice is a command of D's partition
        while c.inspect_job(d).waiting != 2:
            assert time.monotonic() < deadline, c.inspect_job(d)
            time.sleep(0.1)
    deadline = time.monotonic() + 20
    while True:  # the registrations are written by U1's, U2's and GHOST's partitions
        m = metrics(server)
        if value(m, "eventq_dependents_registered_total") == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert value(m, "eventq_dependents_registered_total") == 3
    assert value(m, "eventq_upstream_notices_total") == 1
    assert value(m, "eventq_queue_jobs", queue="wf-load", state="waiting") == 1
    assert value(m, "eventq_queue_jobs", queue="wf-extract", state="waiting") == 0

    base = server.http_url()
    browser.goto("about:blank")  # no reload of the page left open may end this goto
    browser.goto(base)
    browser.wait_for("document.querySelector('#queues') !== null")
    assert re.search(r"wf-load\s+0\s+0\s+1\s+0\s+0\s+0", browser.text("#queues"))
    browser.goto(base + "queues/wf-load?kind=waiting")
    browser.wait_for("document.querySelector('#counts') !== null")
    assert rows(browser, "counts") == [["0", "0", "1", "0", "0", "0"]]
    assert [row[:2] for row in rows(browser, "jobs")] == [[str(d), "waiting"]]
    shot(browser, "queue-waiting")

    browser.click("#jobs a")
    assert rows(browser, "upstreams") == [
        [str(u1), "wf-extract", "completed", "completed"],
        [str(u2), "wf-extract", "new", "unfinished"],
        [str(ghost), "", "gone", "unfinished"]]
    assert "upstreams\t3, 2 not completed" in browser.text("#fields")
    assert "no such job now" in browser.text("#gone-note")
    shot(browser, "job-upstreams")

    browser.click(f"#upstreams a[href='/jobs/{u1}']")
    assert rows(browser, "dependents") == [[str(d), "wf-load", "waiting"]]
    assert "extracted" in browser.text("#result")
    shot(browser, "job-dependents")
    browser.goto(base + f"jobs/{ghost}")  # never added: a dependent waits for it
    assert rows(browser, "dependents") == [[str(d), "wf-load", "waiting"]]
