"""The dashboard's pages (eventq/observe/pages.py): they escape what they show, act only
when allowed, preview payloads, and show a job's limits and time as the spec gives them
(they once showed max-fails 0 as "unlimited", and an empty time row)."""

from __future__ import annotations

import uuid

from eventq.client.models import JobInfo
from eventq.observe import pages


def frame(actions: bool = False) -> pages.Frame:
    return pages.Frame(process="127.0.0.1:9922", actions=actions)


def test_pages_escape_what_they_show_and_act_only_when_allowed():
    row = pages.QueueRow('<script>alert("x")</script>', 1, 0, False)
    html = pages.queues_page([row], [], frame(), 0, 50, False)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "/queues/%3Cscript%3E" in html  # a name is quoted into its link
    read_only = pages.queue_page(row, "ready", [], 0, 25, False, [], {}, frame(False))
    assert "<form" not in read_only and "read-only" in read_only
    acting = pages.queue_page(row, "ready", [], 0, 25, False, [], {}, frame(True))
    assert ('<form class="inline" method="post" action="/queues/%3Cscript%3Ealert%28%22x'
            '%22%29%3C%2Fscript%3E/pause">') in acting


def test_a_payload_preview_is_text_or_hex_and_says_what_it_cut():
    assert "hello" in pages.payload_preview(b"hello")
    assert "00 01 62" in pages.payload_preview(b"\x00\x01b")
    assert "ff 61" in pages.payload_preview(b"\xffa")
    big = pages.payload_preview(b"x" * 5000)
    assert "5,000 bytes" in big and "first 2,048 shown" in big


def job_info(**overrides) -> JobInfo:
    fields = dict(id=uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c4"), name="bills",
                  ttr_ms=60_000, ttl_ms=86_400_000, payload=b"x", max_attempts=0,
                  attempts=1, max_fails=0, fails=1, priority=0, state="failed",
                  created="2026-11-22T09:30:00Z")
    return JobInfo(**{**fields, **overrides})


def test_a_job_page_shows_the_fail_and_attempt_limits_the_spec_gives():
    """fail: while fails < max-fails the job is retried, else it is FAILED, so max-fails
    0 (the default) and 1 both allow one fail; max-attempts 0 is the hard cap of 255."""
    shown = dict(pages.job_fields(job_info()))
    assert shown["fails"] == "1 of 1 (no retry)"
    assert shown["attempts"] == "1 of 255 (max-attempts 0: the hard cap)"
    assert dict(pages.job_fields(job_info(max_fails=1)))["fails"] == "1 of 1 (no retry)"
    retried = dict(pages.job_fields(job_info(max_fails=3, max_attempts=5, state="pending")))
    assert retried["fails"] == "1 of 3" and retried["attempts"] == "1 of 5"
    listed = pages.queue_page(pages.QueueRow("bills", 0, 0, False), "failed", [job_info()],
                              0, 25, False, [], {}, frame())
    assert "unlimited" not in listed and "∞" not in listed and "1/255" in listed


def test_a_job_page_shows_time_only_for_a_job_that_has_one():
    """inspect job has a ``time`` key only for a scheduled job (or one waiting out its
    backoff): a job without one gets no empty row."""
    assert "time" not in dict(pages.job_fields(job_info()))
    scheduled = job_info(state="new", attempts=0, fails=0, time="2026-11-22T10:00:00Z")
    assert dict(pages.job_fields(scheduled))["time"] == "2026-11-22T10:00:00Z"


def test_edges_escape_what_they_show_and_a_job_without_any_has_no_section():
    assert pages.edges_section(pages.Edges()) == ""
    upstream = pages.EdgeRow("6ba7b810-9dad-41d1-80b4-00c04fd430c4", None,
                             'unknown (<script>alert("x")</script>)', "unfinished")
    html = pages.edges_section(pages.Edges(upstreams=(upstream,)))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'id="upstreams"' in html and 'id="dependents"' not in html
    assert "gone-note" not in html  # no gone row: no legend
    note = pages.edges_section(pages.Edges(note="could not be read (<b>)"))
    assert "<b>" not in note and "&lt;b&gt;" in note


def test_failure_groups_are_listed_and_a_group_can_be_retried_when_acting():
    """[eventq] docs/workflows.md, "Failure groups and retry": the groups with their
    counts, a group's jobs, and "Retry this group" only when the dashboard may act."""
    listed = pages.failed_page([("deploy-7", 10_000), ("failed", 2)], frame())
    assert 'href="/failed/deploy-7"' in listed and "10,000" in listed
    assert "No failed jobs" in pages.failed_page([], frame())
    job = job_info(group="deploy-7")
    acting = pages.failed_group_page("deploy-7", 12_000, [job], 0, 25, False, frame(True),
                                     10_000)
    assert 'action="/failed/deploy-7/retry"' in acting and "oldest 10,000" in acting
    assert str(job.id) in acting
    read_only = pages.failed_group_page("deploy-7", 1, [job], 0, 25, False, frame(), 10_000)
    assert "<form" not in read_only
    assert dict(pages.job_fields(job))["failure group"] == "deploy-7"
    assert "failure group" not in dict(pages.job_fields(job_info()))


def test_a_jobs_history_shows_who_issued_each_command_escaped():
    """Audit (docs/security.md, "Queue-name prefixes"): each command's token name ("by
    line-3"); none for a server without tokens or a command eventq wrote itself."""
    rows = [pages.HistoryRow("0/1", "t", "add", "accepted", "", "line-3"),
            pages.HistoryRow("0/2", "t", "start-attempt", "accepted", "attempt 1", "line-4"),
            pages.HistoryRow("0/3", "t", "expire", "accepted", "", None),
            pages.HistoryRow("0/4", "t", "fail", "accepted", "", "<b>x</b>")]
    html = pages.job_page([("name", "bills")], b"x", None, rows, "note", str(uuid.uuid4()),
                          "new", frame())
    assert ">by line-3<" in html and ">attempt 1, by line-4<" in html
    assert html.count(", by ") == 1 and html.count(">by ") == 2
    assert "<b>x</b>" not in html and "by &lt;b&gt;x&lt;/b&gt;" in html
