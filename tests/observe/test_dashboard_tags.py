"""The dashboard's tags (docs/workflows.md, "Tags"; eventq/observe/web.py, pages.py),
rendered over HTTP from real state: the memory processes of
tests/support/memory_processes.py read through their gateway as the server's dashboard
reads it. A job page shows its tags, each a link to its tag's page; a tag's page lists
the whole cluster's live jobs with it by created time then id, paged; the tags page
lists this process's tags and filters by any tag."""

from __future__ import annotations

import uuid

from observe.test_dashboard_workflows import Get, Tables, browse, dashboard_of, row_of

from eventq.observe import pages, web
from support.memory_processes import Process, add, finish, job_id, run, two_processes

A1, A2, A3 = (job_id(0, n) for n in range(1, 4))
B1 = job_id(1, 1)


def test_a_job_page_shows_its_tags_each_a_link_to_its_tags_jobs() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(A1, "q", " -tags=nightly,etl"))
        await p.handle(add(A2, "q"))

        async def check(get: Get) -> None:
            status, page = await get(f"/jobs/{A1}")
            assert status == 200
            assert row_of(Tables(page).tables["fields"], "tags") == ["tags", "nightly, etl"]
            assert ('<p id="tags">Tags: <a href="/tags/nightly">nightly</a> '
                    '<a href="/tags/etl">etl</a></p>') in page
            _, page = await get(f"/jobs/{A2}")  # no tags: no row, no links
            assert "tags" not in dict(Tables(page).tables["fields"]) and 'id="tags"' not in page
            _, page = await get("/")
            assert '<a href="/tags">Tags</a>' in page  # in every page's header

        await browse(dashboard_of(p), check)

    run(scenario())


def test_a_tags_page_lists_its_live_jobs_in_any_state_oldest_first() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(A1, "work", " -tags=t,u"))
        p.engine.log.advance(1000)
        await p.handle(add(A2, "other", " -tags=t"))
        p.engine.log.advance(1000)
        await p.handle(add(A3, "work"))
        await finish(p, "work", "complete", b"done")  # A1: completed, still listed

        async def check(get: Get) -> None:
            status, page = await get("/tags/t")
            assert status == 200
            rows = Tables(page).tables["jobs"]
            assert rows[0] == ["id", "queue", "state", "priority", "attempts", "created",
                               "time", "tags"]
            assert [row[:3] for row in rows[1:]] == [[str(A1), "work", "completed"],
                                                     [str(A2), "other", "new"]]
            assert rows[1][-1] == "t u" and '<a href="/tags/u">u</a>' in page
            _, page = await get("/tags/none-yet")
            assert Tables(page).tables["jobs"][1:] == [] and "No live job has the tag" in page
            status, page = await get("/tags/no%20tag")
            assert status == 404 and "is no tag" in page

        await browse(dashboard_of(p), check)
        await p.handle(f"delete {A1}\r\n".encode())

        async def after_delete(get: Get) -> None:
            _, page = await get("/tags/t")
            assert [row[0] for row in Tables(page).tables["jobs"][1:]] == [str(A2)]
            _, page = await get("/tags")
            assert Tables(page).tables["tags"] == [["tag", "live jobs here"], ["t", "1"]]

        await browse(dashboard_of(p), after_delete)

    run(scenario())


def test_the_tags_page_counts_tags_and_its_form_goes_to_a_tags_page() -> None:
    async def scenario() -> None:
        p = Process()
        for n in range(3):
            await p.handle(add(job_id(0, 10 + n), "q", " -tags=many,x" if n else " -tags=many"))

        async def check(get: Get) -> None:
            _, page = await get("/tags")
            assert Tables(page).tables["tags"] == [["tag", "live jobs here"], ["many", "3"],
                                                  ["x", "2"]]  # most jobs first
            status, page = await get("/tags?tag=x")  # followed to the tag's page
            assert status == 200 and "Tag x" in page
            assert len(Tables(page).tables["jobs"]) == 3
            status, page = await get("/tags?tag=a%20b")
            assert status == 200 and 'id="tag-error"' in page and "is no tag" in page

        await browse(dashboard_of(p), check)

    run(scenario())


def test_a_tags_page_is_paged_and_the_whole_clusters() -> None:
    async def scenario() -> None:
        a, b = two_processes()
        ids: list[uuid.UUID] = []
        for n in range(web.PAGE_JOBS + 3):
            job = job_id(n % 2, 20 + n // 2)  # both processes' partitions, alternately
            assert await a.handle(add(job, "q", " -tags=big")) == b"+OK\r\n"
            ids.append(job)
            a.engine.log.advance(1)
            b.engine.log.advance(1)

        async def check(get: Get) -> None:
            _, page = await get("/tags/big")
            first = [row[0] for row in Tables(page).tables["jobs"][1:]]
            assert first == [str(i) for i in ids[:web.PAGE_JOBS]]  # created order
            assert f'href="/tags/big?offset={web.PAGE_JOBS}"' in page
            _, page = await get(f"/tags/big?offset={web.PAGE_JOBS}")
            rest = [row[0] for row in Tables(page).tables["jobs"][1:]]
            assert rest == [str(i) for i in ids[web.PAGE_JOBS:]]
            assert 'id="next"' not in page and 'id="prev"' in page

        await browse(dashboard_of(a), check)

    run(scenario())


def test_tags_escape_and_link_safely() -> None:
    frame = pages.Frame(process="p", actions=False)
    page = pages.tags_page([("a.b-c_D", 2)], frame, note="'<x>' is no tag")
    assert '<a href="/tags/a.b-c_D">a.b-c_D</a>' in page and "&lt;x&gt;" in page
    assert "<x>" not in page
