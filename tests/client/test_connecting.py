"""A connection that keeps failing (eventq/client/connecting.py; docs/architecture.md,
"Feedback to users"): when it is said, then reminded at doubling intervals, and what the
message says to do."""

from __future__ import annotations

import errno

import pytest

from eventq.client.connecting import (
    REMIND_FIRST_S,
    REMIND_MAX_S,
    Reminder,
    cannot_connect,
    what_to_do,
)


def said_at(reminder: Reminder, times: list[float]) -> list[float]:
    return [t for t in times if reminder.failed(t)]


def test_a_failure_is_said_once_it_lasted_then_at_doubling_intervals():
    reminder = Reminder(report_after_s=3.0)
    every_tenth = [100 + n / 10 for n in range(0, 10_000)]  # 1,000 s of failures
    said = said_at(reminder, every_tenth)
    assert said[0] == pytest.approx(103.0)
    gaps = [round(b - a) for a, b in zip(said, said[1:])]
    assert gaps[:5] == [REMIND_FIRST_S, 2 * REMIND_FIRST_S, 4 * REMIND_FIRST_S,
                        8 * REMIND_FIRST_S, 16 * REMIND_FIRST_S]
    assert max(gaps) == REMIND_MAX_S


def test_a_short_failure_is_not_said_and_a_recovery_only_after_one_that_was():
    reminder = Reminder(report_after_s=3.0)
    assert said_at(reminder, [0.0, 1.0, 2.9]) == []
    assert reminder.recovered(3.5) is None  # never said: nothing to take back
    assert said_at(reminder, [10.0, 12.0, 13.0]) == [13.0]  # a new run counts afresh
    assert reminder.recovered(20.0) == pytest.approx(10.0)
    assert said_at(reminder, [30.0, 33.0]) == [33.0]


def test_a_reminder_with_no_delay_says_the_first_failure_at_once():
    assert said_at(Reminder(report_after_s=0.0), [5.0, 5.1, 19.9, 20.0]) == [5.0, 20.0]


def test_connection_messages_say_what_to_do():
    assert "`make run`, or `eventq serve`" in what_to_do("127.0.0.1", 9922)
    assert "`eventq serve --listen-port 9999`" in what_to_do("127.0.0.1", 9999)
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed ('h', 1)")
    assert cannot_connect("h", 1, refused, 30.2) == (
        "cannot connect to the eventq server at h:1 (Connection refused, for 30s): is it "
        "running? Start one with `eventq serve --listen-port 1`, or give the address it "
        "listens on")
