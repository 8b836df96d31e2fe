"""The pure parts of metrics and the dashboard: histograms, history, chart, pages,
verbs and the HTTP settings."""

from __future__ import annotations

import argparse
import uuid

import pytest

from eventq.client.models import JobInfo
from eventq.observe import pages
from eventq.observe.buckets import Histogram
from eventq.observe.chart import line_chart
from eventq.observe.history import History
from eventq.protocol import requests
from eventq.protocol.grammar import GRAMMAR, VERB_OF
from eventq.settings import Settings, add_arguments, build_settings


def test_a_fixed_histogram_counts_values_at_or_below_each_bound():
    h = Histogram((1, 5, 10))
    for value in (0.5, 1, 1.5, 5, 7, 11, 1000):
        h.observe(value)
    assert h.cumulative() == [(1, 2), (5, 4), (10, 5), (float("inf"), 7)]
    assert h.count == 7 and h.total == pytest.approx(1026.0)
    with pytest.raises(ValueError):
        Histogram((5, 1))


def test_history_gives_rates_between_samples_and_sums_queues():
    history = History(keep=3)
    history.record(0.0, {"a": ((5, 0, 1), (0, 0, 0, 0)), "b": ((1, 0, 0), (0, 0, 0, 0))})
    history.record(5.0, {"a": ((4, 0, 2), (10, 5, 5, 0)), "b": ((1, 0, 0), (5, 0, 0, 0))})
    assert history.rate_series("a")["added"] == [(5.0, 2.0)]
    assert history.rate_series(None)["added"] == [(5.0, 3.0)]
    assert history.gauge_series(None)["ready"] == [(0.0, 6), (5.0, 5)]
    assert history.latest_rates("a") == {"added": 2.0, "leased": 1.0, "completed": 1.0,
                                         "failed": 0.0}
    for t in (10.0, 15.0, 20.0, 25.0):
        history.record(t, {"a": ((0, 0, 0), (10, 5, 5, 0))})
    assert [t for t, _ in history.gauge_series("a")["ready"]] == [15.0, 20.0, 25.0]
    assert "b" not in history.queues  # aged out: no sample for longer than kept
    assert history.gauge_series("nope") == {"ready": [], "scheduled": [], "leased": []}


def test_a_chart_is_inline_svg_and_says_when_it_has_no_data_yet():
    empty = line_chart({"ready": []}, "jobs <q>")
    assert empty.startswith("<svg") and "collecting samples" in empty
    assert "jobs &lt;q&gt;" in empty and "<q>" not in empty
    chart = line_chart({"ready": [(0, 1), (5, 3)], "leased": [(0, 0), (5, 0)]}, "jobs")
    assert chart.count("<polyline") == 2 and chart.endswith("</svg>")


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


def test_request_types_are_named_by_their_protocol_verbs():
    assert VERB_OF[requests.Add] == "add"
    assert VERB_OF[requests.InspectScheduledJobs] == "inspect scheduled-jobs"
    assert VERB_OF[requests.InspectQueues] == "inspect queues"
    # every verb of the grammar, inspect's objects each, names one request type
    assert len(set(VERB_OF.values())) == len(VERB_OF) == (
        len(GRAMMAR) - 1 + len(GRAMMAR["inspect"].commands))


def settings_of(*argv: str, **env: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return build_settings(parser.parse_args(list(argv)), env)


def test_the_http_port_is_host_port_a_port_or_off_and_actions_a_switch():
    assert Settings().http_address == ("127.0.0.1", 9980)
    assert settings_of("--http-port", "9999").http_address == ("127.0.0.1", 9999)
    assert settings_of("--http-port", "0.0.0.0:0").http_address == ("0.0.0.0", 0)
    assert settings_of("--http-port", "off").http_address is None
    assert settings_of("--http-actions").http_actions is True
    assert settings_of("--http-actions", "no").http_actions is False
    assert settings_of(EVENTQ_HTTP_ACTIONS="1").http_actions is True
    for bad in ("nine", "1:2:x", "70000", "host:"):
        with pytest.raises(ValueError, match="http_port"):
            Settings(http_port=bad)


# --- issue 27, item 7: the dashboard's small lies ----------------------------------------


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


def test_events_of_a_queue_new_to_the_history_show_in_its_rates():
    """Jobs added and run between two samples on a queue the earlier sample did not have
    yet (a new queue, or the first jobs after a start) were counted from the later
    sample on, so their rates were never drawn: the queue's baseline is zero events at
    the earlier sample."""
    history = History()
    history.record(0.0, {})  # the sampler's first round, before any job
    history.record(5.0, {"mail": ((0, 0, 0), (5, 5, 5, 0))})
    assert history.rate_series("mail")["completed"] == [(5.0, 1.0)]
    assert history.latest_rates("mail")["added"] == 1.0
    history.record(10.0, {"mail": ((0, 0, 0), (5, 5, 5, 0))})
    assert history.rate_series(None)["added"] == [(5.0, 1.0), (10.0, 0.0)]
    chart = line_chart(history.rate_series("mail"), "events per second", unit="/s")
    assert ">1/s</text>" in chart and 'points="48.0,22.0 ' in chart  # 1/s, at the top
