"""The dashboard's history of samples (eventq/observe/history.py): rates between samples,
queues summed and aged out, and a queue new to the history counted from zero."""

from __future__ import annotations

from eventq.observe.chart import line_chart
from eventq.observe.history import History


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
