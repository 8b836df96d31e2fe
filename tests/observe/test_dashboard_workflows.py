"""The dashboard's pages of workflows (eventq/observe/web.py, pages.py), rendered over
HTTP from real state: the memory processes of tests/support/memory_processes.py (alone,
or two of them through a real ``Cluster``), read through their gateway as the server's
dashboard reads it. A job page lists the job's upstreams and dependents with their state
now (a job that no longer exists, or is not added yet, is ``gone``); a queue page lists
its WAITING jobs, and its counts show them."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser

from aiohttp.test_utils import TestClient, TestServer

from eventq.observe import web
from eventq.observe.joblog import JobHistory
from eventq.observe.metrics import Sources
from eventq.observe.web import Dashboard
from support.memory_processes import PARTITIONS, Process, add, finish, job_id, run, two_processes

U1, U2, D, D2, D3, PLAIN = (job_id(0, n) for n in range(1, 7))
UB, DB = job_id(1, 1), job_id(1, 2)
NO_LOG = "(no command log in this test)"


class Tables(HTMLParser):
    """Each table of a page with an id, as rows of cell texts (the header row first)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._rows: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._rows = self.tables.setdefault(dict(attrs).get("id") or "", [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._rows is not None:
            self._rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def dashboard_of(process: Process, address: str = "a:1") -> Dashboard:
    engine = process.engine
    sources = Sources(index=engine.index, processor=engine.driver.processor,
                      gateway_stats=None, lag=dict, serving=lambda: True,
                      now_ms=lambda: engine.log.now_ms)
    return Dashboard(
        gateway=process.gateway, sources=sources, process=address, actions=False,
        bootstrap="", commands_topic="eventq.commands", partitions=PARTITIONS,
        owner_of=lambda partition: None, members=lambda: [address],
        clock_ms=lambda: engine.log.now_ms, read_history=lambda job: JobHistory([], NO_LOG))


Get = Callable[[str], Awaitable[tuple[int, str]]]


async def browse(dashboard: Dashboard, scenario: Callable[[Get], Awaitable[None]]) -> None:
    async with TestClient(TestServer(dashboard.application())) as client:
        async def get(path: str) -> tuple[int, str]:
            response = await client.get(path)
            return response.status, await response.text()

        await scenario(get)


def row_of(rows: list[list[str]], first: str) -> list[str]:
    (found,) = [row for row in rows if row and row[0] == first]
    return found


def test_a_job_page_lists_upstreams_and_dependents_with_their_state_now() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(U1, "extract"))
        await p.handle(add(D, "etl", f" -after={U1},{U2}"))  # U2 is never added
        await p.handle(add(D2, "etl", f" -after={U1}"))
        await p.handle(add(PLAIN, "etl"))
        await finish(p, "extract", "complete", b"r1")  # D2 released, D waits for U2

        async def pages(get: Get) -> None:
            status, page = await get(f"/jobs/{D}")
            assert status == 200
            tables = Tables(page).tables
            assert row_of(tables["fields"], "state") == ["state", "waiting"]
            assert row_of(tables["fields"], "upstreams") == ["upstreams", "2, 1 not completed"]
            assert tables["upstreams"] == [
                ["id", "queue", "state", "outcome here"],
                [str(U1), "extract", "completed", "completed"],
                [str(U2), "", "gone", "unfinished"]]
            assert "dependents" not in tables and "no such job now" in page
            assert f'href="/jobs/{U2}"' in page  # a gone job's page shows its history

            status, page = await get(f"/jobs/{U1}")
            tables = Tables(page).tables
            assert status == 200 and "upstreams" not in tables
            assert tables["dependents"] == [["id", "queue", "state"]] + sorted(
                [[str(D), "etl", "waiting"], [str(D2), "etl", "new"]])
            assert "no such job now" not in page

            # never added: no history, yet a dependent waits for it
            status, page = await get(f"/jobs/{U2}")
            tables = Tables(page).tables
            assert status == 200 and row_of(tables["fields"], "state") == ["state", "gone"]
            assert tables["dependents"] == [["id", "queue", "state"], [str(D), "etl", "waiting"]]

            status, page = await get(f"/jobs/{PLAIN}")  # no workflow: no such sections
            assert status == 200 and "Upstreams" not in page and "Dependents" not in page
            assert "upstreams" not in dict(Tables(page).tables["fields"])
            status, page = await get(f"/jobs/{job_id(0, 9)}")
            assert status == 404 and "Job not found" in page

        await browse(dashboard_of(p), pages)

        # a dependent deleted stays registered with its upstream until the upstream
        # ends or goes: it is listed, as gone
        assert await p.handle(f"delete {D2}\r\n".encode()) == b"+OK\r\n"

        async def after_delete(get: Get) -> None:
            _, page = await get(f"/jobs/{U1}")
            assert Tables(page).tables["dependents"][1:] == sorted(
                [[str(D), "etl", "waiting"], [str(D2), "", "gone"]])
            assert "no such job now" in page

        await browse(dashboard_of(p), after_delete)

    run(scenario())


def test_a_job_page_lists_the_first_dependents_and_says_so(monkeypatch) -> None:
    monkeypatch.setattr(web, "DEPENDENTS_SHOWN", 2)

    async def scenario() -> None:
        p = Process()
        await p.handle(add(U1, "extract"))
        for dependent in (D, D2, D3):
            await p.handle(add(dependent, "etl", f" -after={U1}"))

        async def pages(get: Get) -> None:
            _, page = await get(f"/jobs/{U1}")
            listed = [row[0] for row in Tables(page).tables["dependents"][1:]]
            assert listed == sorted(map(str, (D, D2, D3)))[:2]
            assert "The first 2 are listed." in page

        await browse(dashboard_of(p), pages)

    run(scenario())


def test_a_queue_page_lists_its_waiting_jobs_and_counts_them() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(U1, "extract"))
        await p.handle(add(D, "etl", f" -after={U1}"))
        await p.handle(add(D2, "etl", f" -after={U2}"))
        await p.handle(add(PLAIN, "etl"))

        async def pages(get: Get) -> None:
            _, page = await get("/")
            queues = Tables(page).tables["queues"]
            assert queues[0][:7] == ["queue", "ready", "scheduled", "waiting", "leased",
                                     "completed", "failed"]
            assert row_of(queues, "etl")[:7] == ["etl", "1", "0", "2", "0", "0", "0"]
            assert row_of(queues, "extract")[:7] == ["extract", "1", "0", "0", "0", "0", "0"]

            _, page = await get("/queues/etl?kind=waiting")
            tables = Tables(page).tables
            assert tables["counts"] == [
                ["ready", "scheduled", "waiting", "leased", "completed", "failed"],
                ["1", "0", "2", "0", "0", "0"]]
            waiting = [row[:2] for row in tables["jobs"][1:]]
            assert sorted(waiting) == sorted([[str(D), "waiting"], [str(D2), "waiting"]])
            assert 'class="on" href="/queues/etl?kind=waiting"' in page

            _, page = await get("/queues/etl")  # ready: the plain job only
            assert [row[0] for row in Tables(page).tables["jobs"][1:]] == [str(PLAIN)]
            _, page = await get("/queues/extract?kind=waiting")
            assert Tables(page).tables["jobs"][1:] == [] and "No waiting jobs." in page

        await browse(dashboard_of(p), pages)

    run(scenario())


def test_waiting_jobs_paged() -> None:
    """Paged like the other lists: PAGE_JOBS a page, a next link while more are left."""
    async def scenario() -> None:
        p = Process()
        ids = [uuid.UUID(int=(0x2F << 120) + i, version=4) for i in range(web.PAGE_JOBS + 1)]
        for dependent in ids:
            await p.handle(add(dependent, "etl", f" -after={U1}"))

        async def pages(get: Get) -> None:
            _, first = await get("/queues/etl?kind=waiting")
            assert len(Tables(first).tables["jobs"]) == 1 + web.PAGE_JOBS
            assert f'href="/queues/etl?kind=waiting&offset={web.PAGE_JOBS}"' in first
            _, second = await get(f"/queues/etl?kind=waiting&offset={web.PAGE_JOBS}")
            rest = [row[0] for row in Tables(second).tables["jobs"][1:]]
            shown = {row[0] for row in Tables(first).tables["jobs"][1:]}
            assert len(rest) == 1 and shown | set(rest) == set(map(str, ids))
            assert 'id="next"' not in second

        await browse(dashboard_of(p), pages)

    run(scenario())


def test_across_processes_the_owner_answers_for_edges_and_waiting_jobs_merge() -> None:
    """Every page is read through process a's gateway; b's jobs' edges and states are
    b's (forwarded), the waiting lists of both are merged."""
    async def scenario() -> None:
        a, b = two_processes()
        await a.handle(add(U1, "extract"))
        await a.handle(add(D, "etl", f" -after={U1}"))
        await a.handle(add(UB, "other"))
        await a.handle(add(DB, "etl", f" -after={UB},{U2}"))
        await finish(b, "other", "complete", b"from b")
        assert a.engine.job(DB) is None and b.engine.job(DB) is not None

        async def pages(get: Get) -> None:
            _, page = await get(f"/jobs/{DB}")
            assert Tables(page).tables["upstreams"][1:] == [
                [str(UB), "other", "completed", "completed"],
                [str(U2), "", "gone", "unfinished"]]
            _, page = await get(f"/jobs/{UB}")
            assert Tables(page).tables["dependents"][1:] == [[str(DB), "etl", "waiting"]]
            _, page = await get(f"/jobs/{U1}")
            assert Tables(page).tables["dependents"][1:] == [[str(D), "etl", "waiting"]]
            _, page = await get("/queues/etl?kind=waiting")
            tables = Tables(page).tables
            assert sorted(row[0] for row in tables["jobs"][1:]) == sorted([str(D), str(DB)])
            assert tables["counts"][1][:3] == ["0", "0", "2"]

        await browse(dashboard_of(a), pages)

    run(scenario())
