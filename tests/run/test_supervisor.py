"""The restart policy of `eventq up` and the Kafka supervisor (eventq/run/supervisor.py):
pure, so no process is started and nothing sleeps."""

from __future__ import annotations

import signal

from eventq.run.supervisor import (
    HEALTHY_UPTIME_S,
    RESTART_BACKOFF_FIRST_S,
    RESTART_BACKOFF_MAX_S,
    ChildState,
    describe_exit_status,
    due_for_restart,
    exited,
    restart_at,
    restart_delay_s,
    started,
)


def crash_loop(times: int, uptime_s: float = 0.5) -> tuple[ChildState, float]:
    """A child that starts at 0 and dies ``uptime_s`` after each start, restarted as
    soon as it is due: its state after the last exit, and the time then."""
    now = 0.0
    state = started(now)
    for _ in range(times):
        now += uptime_s
        state = exited(state, now)
        now = restart_at(state)
        state = started(now, state)
    now += uptime_s
    return exited(state, now), now


def test_the_delay_doubles_from_one_second_up_to_the_cap() -> None:
    assert RESTART_BACKOFF_FIRST_S == 1.0 and RESTART_BACKOFF_MAX_S == 30.0
    assert [restart_delay_s(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_child_failing_for_days_stays_at_the_cap() -> None:
    assert restart_delay_s(100_000) == RESTART_BACKOFF_MAX_S


def test_a_running_child_is_never_due() -> None:
    states = {"a": started(0.0), "b": started(5.0)}
    assert due_for_restart(states, 0.0) == []
    assert due_for_restart(states, 10_000.0) == []
    assert restart_at(states["a"]) is None


def test_a_dead_child_is_due_once_its_delay_has_passed() -> None:
    state = exited(started(0.0), 3.0)
    assert state.failures == 1 and not state.running
    assert due_for_restart({"a": state}, 3.0) == []
    assert due_for_restart({"a": state}, 3.999) == []
    assert due_for_restart({"a": state}, 4.0) == ["a"]


def test_only_the_dead_child_is_due_and_the_others_are_left_alone() -> None:
    states = {"a": started(0.0), "b": exited(started(0.0), 2.0), "c": started(1.0)}
    assert due_for_restart(states, 100.0) == ["b"]


def test_each_quick_death_in_a_row_doubles_the_delay() -> None:
    delays = []
    for times in range(7):
        state, now = crash_loop(times)
        delays.append(restart_at(state) - now)
    assert delays == [1, 2, 4, 8, 16, 30, 30]


def test_a_child_that_stayed_up_long_enough_starts_again_from_the_first_delay() -> None:
    state, now = crash_loop(5)  # 30 s backoff by now
    assert restart_delay_s(state.failures) == 30
    state = started(restart_at(state), state)
    assert state.failures == 6  # a restart alone does not forgive
    healthy = exited(state, state.started_at + HEALTHY_UPTIME_S)
    assert healthy.failures == 1
    assert restart_at(healthy) - healthy.exited_at == RESTART_BACKOFF_FIRST_S


def test_a_child_that_dies_just_short_of_healthy_keeps_backing_off() -> None:
    state, _ = crash_loop(2)
    state = started(100.0, state)
    assert exited(state, 100.0 + HEALTHY_UPTIME_S - 0.1).failures == state.failures + 1


def test_exits_in_words() -> None:
    assert describe_exit_status(-signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit_status(-signal.SIGSEGV) == "was killed by SIGSEGV"
    assert describe_exit_status(1) == "exited with status 1"
    assert describe_exit_status(0) == "exited with status 0"


class FakeClock:
    """Stands in for the time module in eventq.run.supervisor: each wait moves time on."""

    def __init__(self) -> None:
        import time

        self.now = 1000.0
        self.localtime, self.strftime = time.localtime, time.strftime

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeChild:
    def __init__(self, name: str, deaths: list[str]) -> None:
        self.name = name
        self.deaths = deaths  # how it ends each time it is looked at while running, or None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1

    def exit_reason(self) -> str | None:
        return self.deaths.pop(0) if self.deaths else None


class StopAfter:
    """A StopRequest that is set after ``turns`` turns of the loop."""

    def __init__(self, clock: FakeClock, turns: int) -> None:
        self.clock, self.turns = clock, turns

    def is_set(self) -> bool:
        return self.turns <= 0

    def wait(self, seconds: float) -> None:
        self.turns -= 1
        self.clock.sleep(seconds)


def test_the_loop_restarts_a_dead_child_after_its_delay_and_says_so(monkeypatch) -> None:
    import eventq.run.supervisor as supervisor

    clock = FakeClock()
    monkeypatch.setattr(supervisor, "time", clock)
    dying = FakeChild("eventq process on port 9923", [None, "was killed by SIGKILL"])
    steady = FakeChild("eventq process on port 9922", [])
    lines: list[str] = []
    supervisor.supervise([steady, dying], StopAfter(clock, 10), lines.append)
    assert steady.starts == 0
    assert dying.starts == 1
    assert lines[0].startswith("eventq process on port 9923 was killed by SIGKILL after 0s up; "
                               "restarting it in 1s, at ")
    assert lines[1] == "eventq process on port 9923 restarted"
    assert len(lines) == 2


def test_a_child_that_cannot_be_started_is_tried_again_later(monkeypatch) -> None:
    import eventq.run.supervisor as supervisor

    class Unstartable(FakeChild):
        def start(self) -> None:
            super().start()
            raise supervisor.StartFailed("port 9092 is already in use")

    clock = FakeClock()
    monkeypatch.setattr(supervisor, "time", clock)
    child = Unstartable("Kafka on 127.0.0.1:9092", ["is gone (its JVM ended)"])
    lines: list[str] = []
    supervisor.supervise([child], StopAfter(clock, 20), lines.append)  # 10 s
    # Down at 0 s, tried at 1 s (fails: 2 s), at 3 s (fails: 4 s), at 7 s (fails: 8 s).
    assert child.starts == 3
    assert "could not be started: port 9092 is already in use; restarting it in 8s" in lines[-1]
    assert "failure 4 in a row" in lines[-1]
