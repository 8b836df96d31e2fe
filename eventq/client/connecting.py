"""Saying that the server cannot be reached (docs/architecture.md, "Feedback to users"):
a client that keeps retrying a connection says so once, soon (within 5 s), with what to
do, then reminds at growing intervals until a connection works again, and then says
that too. Never a line per attempt, nor one per pooled connection: one
``ConnectReporter`` per client.

``Reminder`` is the pure policy (times in, decisions out); the worker uses it too, for
leases that keep failing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

log = logging.getLogger("eventq.client")

CONNECT_REPORT_S = 3.0  # failing this long is reported (the promise: within 5 s)
REMIND_FIRST_S = 15.0  # then reminders this long apart, doubling ...
REMIND_MAX_S = 300.0  # ... up to this
DEFAULT_PORT = 9922  # where `make run` serves


@dataclass
class Reminder:
    """When to say that something keeps failing: once it has failed for
    ``report_after_s``, then after ``REMIND_FIRST_S``, doubling up to ``REMIND_MAX_S``,
    until ``recovered``. Pure: the caller passes monotonic times."""

    report_after_s: float = CONNECT_REPORT_S
    since: float | None = None  # the first failure of the current run of failures
    next_at: float = 0.0
    reports: int = 0

    def failed(self, now: float) -> bool:
        """One more failure at ``now``: True if it is time to say so."""
        if self.since is None:
            self.since, self.next_at, self.reports = now, now + self.report_after_s, 0
        if now < self.next_at:
            return False
        self.reports += 1
        self.next_at = now + min(REMIND_FIRST_S * 2 ** (self.reports - 1), REMIND_MAX_S)
        return True

    def failing_for(self, now: float) -> float:
        return 0.0 if self.since is None else now - self.since

    def recovered(self, now: float) -> float | None:
        """It works again: how long it failed if that was reported (worth saying it
        works again), else None. The next failure starts a new run."""
        reported = self.reports > 0
        failed_for = self.failing_for(now)
        self.since, self.reports = None, 0
        return failed_for if reported else None


def reason(error: BaseException) -> str:
    """An OSError in a few words: "Connection refused" (asyncio's message adds the
    address, which the reports give anyway)."""
    errno = getattr(error, "errno", None)
    if errno:
        return os.strerror(errno)
    return str(error) or type(error).__name__


def what_to_do(host: str, port: int) -> str:
    start = ("`make run`, or `eventq serve`" if port == DEFAULT_PORT
             else f"`eventq serve --listen-port {port}`")
    return f"is it running? Start one with {start}, or give the address it listens on"


def cannot_connect(host: str, port: int, error: BaseException, waited_s: float) -> str:
    """The message of ``Unavailable``: the client gave up."""
    return (f"cannot connect to the eventq server at {host}:{port} ({reason(error)}, for "
            f"{waited_s:.0f}s): {what_to_do(host, port)}")


class ConnectReporter:
    """The connection reports of one client (thread-safe: ``Client`` connects from
    many threads)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reminder = Reminder()
        self._lock = threading.Lock()

    def failed(self, error: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            say = self._reminder.failed(now)
            first = self._reminder.reports == 1
            failing_s = self._reminder.failing_for(now)
        if say and first:
            log.warning("cannot connect to the eventq server at %s:%d (%s, for %.0fs): %s; "
                        "still trying", self.host, self.port, reason(error), failing_s,
                        what_to_do(self.host, self.port))
        elif say:
            log.warning("still cannot connect to the eventq server at %s:%d (%s) after "
                        "%.0fs; still trying", self.host, self.port, reason(error), failing_s)

    def connected(self) -> None:
        with self._lock:
            failed_s = self._reminder.recovered(time.monotonic())
        if failed_s is not None:
            log.warning("connected to the eventq server at %s:%d again, after %.0fs",
                        self.host, self.port, failed_s)
