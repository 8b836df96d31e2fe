"""Restarting what dies: `eventq up` restarts its `eventq serve` processes and the local
Kafka nodes it started, and `eventq kafka start` leaves a daemon that restarts its nodes.

The restart policy is pure (each child's state and the time in, what to restart out), so
its rules are tested without processes or sleeps. ``supervise`` is the thin loop that
applies it to real processes: anything with a ``name``, ``start()`` and ``exit_reason()``.
"""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Mapping, Protocol, Sequence, TypeVar

RESTART_BACKOFF_FIRST_S = 1.0
RESTART_BACKOFF_MAX_S = 30.0
# A child up this long was healthy: its next exit starts the backoff from the first delay.
HEALTHY_UPTIME_S = 60.0
POLL_INTERVAL_S = 0.5
# The doubling stops long before this; bounding the exponent keeps a child that failed
# thousands of times in a row from overflowing a float.
_MAX_DOUBLINGS = 16

Child = TypeVar("Child")  # a key of a mapping: hashable


# --- the policy (pure) ------------------------------------------------------------------


@dataclass(frozen=True)
class ChildState:
    started_at: float  # monotonic time of its last start
    exited_at: float | None = None  # when its exit was seen; None while it runs
    failures: int = 0  # exits in a row, each within HEALTHY_UPTIME_S of its start

    @property
    def running(self) -> bool:
        return self.exited_at is None


def started(now: float, previous: ChildState | None = None) -> ChildState:
    """A child (re)started at ``now``: it keeps its run of failures until it stays up."""
    return ChildState(started_at=now, failures=previous.failures if previous else 0)


def exited(state: ChildState, now: float) -> ChildState:
    """A child seen gone at ``now``: one more failure, or the first of a new run if it
    had been up for HEALTHY_UPTIME_S."""
    stayed_up = now - state.started_at >= HEALTHY_UPTIME_S
    return replace(state, exited_at=now, failures=1 if stayed_up else state.failures + 1)


def restart_delay_s(failures: int) -> float:
    """1 s after the first failure, doubling with each failure in a row, at most 30 s."""
    doublings = min(max(failures - 1, 0), _MAX_DOUBLINGS)
    return min(RESTART_BACKOFF_FIRST_S * (1 << doublings), RESTART_BACKOFF_MAX_S)


def restart_at(state: ChildState) -> float | None:
    """When a child that is down is due to start again (None while it runs)."""
    if state.exited_at is None:
        return None
    return state.exited_at + restart_delay_s(state.failures)


def due_for_restart(states: Mapping[Child, ChildState], now: float) -> list[Child]:
    """What to do now: the children that are down and whose backoff has passed."""
    return [child for child, state in states.items()
            if (at := restart_at(state)) is not None and at <= now]


# --- describing an exit ------------------------------------------------------------------


def describe_exit_status(returncode: int) -> str:
    """``Popen.returncode`` in words: "was killed by SIGKILL", "exited with status 1"."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def clock_time(seconds_from_now: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time.time() + seconds_from_now))


# --- the loop (the thin shell around the policy) -------------------------------------------


class StartFailed(Exception):
    """A child could not even be started; the message says why. It counts as a failure
    (the child is tried again after the backoff)."""


class Supervised(Protocol):
    @property
    def name(self) -> str:
        """The child in log lines, e.g. "eventq process on port 9923 (pid 4242)"."""

    def start(self) -> None:
        """Start it again; raise StartFailed if it cannot be."""

    def exit_reason(self) -> str | None:
        """None while it runs, else how it ended ("was killed by SIGKILL")."""


class StopRequest:
    """Set by SIGINT or SIGTERM while ``stop_on_signals`` is in effect."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def is_set(self) -> bool:
        return self.signal is not None

    def set(self, signum: int, frame: object = None) -> None:
        self.signal = signum

    def wait(self, seconds: float) -> None:
        if not self.is_set():
            time.sleep(seconds)  # a signal's handler runs during the sleep


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """SIGINT (Ctrl-C) and SIGTERM set a flag instead of raising: the loop ends at its
    next turn, and a stop under way is never cut short halfway by a second signal."""
    request = StopRequest()
    previous = {signum: signal.signal(signum, request.set)
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def supervise(children: Sequence[Supervised], stop: StopRequest,
              say: Callable[[str], None]) -> None:
    """Restart whichever of ``children`` (all started by the caller) ends, with backoff,
    until ``stop`` is set. Stopping them is the caller's."""
    states = {child: started(time.monotonic()) for child in children}
    while not stop.is_set():
        now = time.monotonic()
        for child in children:
            state = states[child]
            if state.running and (reason := child.exit_reason()) is not None:
                states[child] = exited(state, now)
                say(f"{child.name} {reason} after {now - state.started_at:.0f}s up; "
                    + restart_plan(states[child]))
        for child in due_for_restart(states, now):
            if stop.is_set():
                break
            states[child] = restart(child, states[child], say)
        stop.wait(POLL_INTERVAL_S)


def restart_plan(state: ChildState) -> str:
    delay_s = restart_delay_s(state.failures)
    in_a_row = f", failure {state.failures} in a row" if state.failures > 1 else ""
    return f"restarting it in {delay_s:g}s, at {clock_time(delay_s)}{in_a_row}"


def restart(child: Supervised, state: ChildState, say: Callable[[str], None]) -> ChildState:
    now = time.monotonic()
    try:
        child.start()
    except StartFailed as error:
        failed = exited(started(now, state), now)
        say(f"{child.name} could not be started: {error}; {restart_plan(failed)}")
        return failed
    say(f"{child.name} restarted")
    return started(now, state)
