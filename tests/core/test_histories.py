"""Generated histories: properties of the machine over random command sequences.

A few job ids, small TTR/TTL and attempt limits, increasing broker times and offsets.
Every step is also checked against an independent reference model of the rules written
as plain code below, so a wrong entry in the transition table cannot hide.
"""

from __future__ import annotations

import dataclasses
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from eventq.core import (
    ALREADY_APPLIED,
    Accepted,
    Add,
    Added,
    AttemptReleased,
    AttemptStarted,
    Complete,
    Delete,
    Expire,
    Fail,
    Ignored,
    Job,
    Rejected,
    ReleaseAttempt,
    Retry,
    Schedule,
    StartAttempt,
    State,
    TimeoutAttempt,
    Touch,
    apply,
    attempt_limit,
    due_commands,
    evolve,
    is_final,
    next_deadline,
)
from eventq.errors import DUPLICATE_JOB, DUPLICATE_RESULT, INVALID_TIME, ClientError, NotFound
from support.core_strategies import FEW_IDS, histories, small_command, time_steps

# ------------------------------------------------------------------- reference model

FINAL = (State.COMPLETED, State.FAILED)


def reference(job: Job | None, cmd, at: int, off: int):
    """The rules of the brief, spelled out independently of machine.py.

    Returns (kind, detail, job_after): kind is "accepted" (detail: the event's class
    name and its own fields),
    "rejected" (detail: the error) or "ignored" (detail: None).
    """
    same = ("ignored", None, job)
    if job is not None and off <= job.version:
        return same
    r = dataclasses.replace
    if isinstance(cmd, (Add, Schedule)):
        if isinstance(cmd, Schedule) and cmd.time_ms + cmd.ttl_ms <= at:
            return ("rejected", ClientError(INVALID_TIME), job)
        if job is not None:
            return ("rejected", ClientError(DUPLICATE_JOB), job)
        sched = cmd.time_ms if isinstance(cmd, Schedule) else None
        base = at if sched is None else sched
        expires = None if cmd.ttl_ms == 0 else min(base + cmd.ttl_ms, 2**64 - 1)
        new = Job(id=cmd.job_id, name=cmd.name, ttr_ms=cmd.ttr_ms, ttl_ms=cmd.ttl_ms,
                  payload=cmd.payload, priority=cmd.priority, max_attempts=cmd.max_attempts,
                  max_fails=cmd.max_fails, attempts=0, fails=0, state=State.NEW, created_ms=at,
                  scheduled_ms=sched, expires_ms=expires, lease_deadline_ms=None, result=None,
                  result_ok=None, version=off, backoff_ms=cmd.backoff_ms,
                  tags=cmd.tags)  # fmt: skip
        return ("accepted", ("Added", {}), new)
    if job is None:
        if isinstance(cmd, (Complete, Fail, Delete, Touch, Retry)):
            return ("rejected", NotFound(), None)
        return ("ignored", None, None)
    if isinstance(cmd, Retry):  # docs/workflows.md, "retry": only a FAILED job
        if job.state != State.FAILED:
            return ("rejected", NotFound(), job)
        delayed = at + cmd.delay_ms if cmd.delay_ms else None
        early = delayed is None and job.scheduled_ms is not None and job.scheduled_ms > at
        return ("accepted", ("Retried", {"delay_ms": cmd.delay_ms}),
                r(job, state=State.NEW, attempts=0, fails=0, returns=0, retry_ms=None,
                  result=None, result_ok=None, group=None, delayed_ms=delayed, early=early,
                  version=off))  # fmt: skip
    limit = job.max_attempts if job.max_attempts else 255
    if isinstance(cmd, StartAttempt):
        waiting = job.state in (State.NEW, State.PENDING)
        time = job.scheduled_ms if job.delayed_ms is None else job.delayed_ms
        time = time if job.retry_ms is None else job.retry_ms
        due = time is None or time <= at or (job.early and job.retry_ms is None)
        alive = job.expires_ms is None or at < job.expires_ms  # its TTL has not passed
        if not (waiting and due and alive) or job.attempts + 1 != cmd.attempt:
            return same
        if cmd.attempt > limit:
            return ("accepted", ("AttemptsExhausted", {}),
                    r(job, state=State.FAILED, result=b"", result_ok=False, version=off))
        started = ("AttemptStarted", {"attempt": cmd.attempt, "deadline_ms": at + job.ttr_ms})
        return ("accepted", started,
                r(job, state=State.LEASED, attempts=cmd.attempt,
                  lease_deadline_ms=at + job.ttr_ms, version=off))  # fmt: skip
    if isinstance(cmd, TimeoutAttempt):
        if job.state != State.LEASED or job.attempts != cmd.attempt:
            return same
        if at < job.lease_deadline_ms:
            return same
        requeued = job.attempts < limit
        timed_out = ("AttemptTimedOut", {"attempt": cmd.attempt, "requeued": requeued})
        if job.attempts >= limit:
            return ("accepted", timed_out,
                    r(job, state=State.FAILED, result=b"", result_ok=False,
                      lease_deadline_ms=None, version=off))  # fmt: skip
        return ("accepted", timed_out,
                r(job, state=State.PENDING, lease_deadline_ms=None, version=off,
                  **backed_off(job, at)))  # fmt: skip
    if isinstance(cmd, Touch):
        if job.state != State.LEASED or job.attempts != cmd.attempt:
            return ("rejected", NotFound(), job)
        deadline = at + (job.ttr_ms if cmd.ttr_ms is None else cmd.ttr_ms)
        return ("accepted", ("Touched", {"attempt": cmd.attempt, "deadline_ms": deadline}),
                r(job, lease_deadline_ms=deadline, version=off))
    if isinstance(cmd, ReleaseAttempt):
        if job.state != State.LEASED or job.attempts != cmd.attempt:
            return same
        released = ("AttemptReleased", {"attempt": cmd.attempt, "state": cmd.state})
        return ("accepted", released,
                r(job, state=cmd.state, attempts=job.attempts - 1, lease_deadline_ms=None,
                  version=off))  # fmt: skip
    if isinstance(cmd, (Complete, Fail)):
        if job.state in FINAL:
            return ("rejected", ClientError(DUPLICATE_RESULT), job)
        if isinstance(cmd, Complete):
            return ("accepted", ("Completed", {"result": cmd.result}),
                    r(job, state=State.COMPLETED, result=cmd.result, result_ok=True,
                      lease_deadline_ms=None, version=off))  # fmt: skip
        fails = job.fails + 1
        if fails < job.max_fails:
            return ("accepted", ("FailRetried", {}),
                    r(job, state=State.PENDING, fails=fails, lease_deadline_ms=None,
                      version=off, **backed_off(job, at)))  # fmt: skip
        # The fail's group; "failed" (the default of a final fail) is kept as none.
        group = None if cmd.group in (None, "failed") else cmd.group
        return ("accepted", ("Failed", {"result": cmd.result, "group": cmd.group}),
                r(job, state=State.FAILED, fails=fails, result=cmd.result, result_ok=False,
                  lease_deadline_ms=None, group=group, version=off))  # fmt: skip
    if isinstance(cmd, Delete):
        return ("accepted", ("Deleted", {}), None)
    assert isinstance(cmd, Expire)
    if job.expires_ms is None or at < job.expires_ms:
        return same
    return ("accepted", ("Expired", {"evicted": job.state not in FINAL}), None)


def backed_off(job: Job, at: int) -> dict:
    """A return to PENDING with a backoff: the r-th waits backoff * 2**(r-1), at most a
    day (docs/protocol.md, "eventq extensions"); without a backoff nothing changes."""
    if not job.backoff_ms:
        return {}
    returns = job.returns + 1
    return {"returns": returns, "retry_ms": at + min(job.backoff_ms * 2 ** (returns - 1), 86_400_000)}


def summary(outcome):
    if isinstance(outcome, Accepted):
        event = outcome.event
        fields = {
            f.name: getattr(event, f.name)
            for f in dataclasses.fields(event)
            if f.name not in ("job_id", "at_ms", "offset", "job")
        }
        return ("accepted", (type(event).__name__, fields))
    if isinstance(outcome, Rejected):
        return ("rejected", outcome.error)
    assert isinstance(outcome, Ignored)
    return ("ignored", None)


# --------------------------------------------------------------------- state machine


class History(RuleBasedStateMachine):
    """One partition's life: commands, re-deliveries after crashes, and timers."""

    @initialize(at=st.integers(0, 10**12), offset=st.integers(0, 1000))
    def start(self, at, offset):
        self.at = at
        self.offset = offset
        self.state: dict[uuid.UUID, Job] = {}
        self.log: list[tuple[object, int, int, object]] = []  # (command, at, offset, outcome)
        self.events: list = []  # accepted events, in log order
        self.started: dict[uuid.UUID, set[int]] = {}  # attempts started this lifetime
        self.highest_version: dict[uuid.UUID, int] = {}

    def apply(self, command, at: int) -> None:
        self.offset += 1
        off = self.offset
        job_id = command.job_id
        before = self.state.get(job_id)
        outcome, after = apply(before, command, at, off)

        # The reference model agrees on the outcome and the state.
        kind, detail, expected = reference(before, command, at, off)
        assert summary(outcome) == (kind, detail)
        assert after == expected
        # A job's tags are kept for its life (docs/workflows.md, "Tags").
        if before is not None and after is not None:
            assert after.tags == before.tags

        # Applying the same command (same offset) again equals applying it once.
        again, after_again = apply(after, command, at, off)
        assert after_again == after
        if not isinstance(outcome, Accepted):
            assert again == outcome  # same state, same command: same decision
        elif after is not None:
            assert again == Ignored(ALREADY_APPLIED)
        # (an accepted delete/expire leaves no job: see redeliver() for that case)

        if isinstance(outcome, Accepted):
            event = outcome.event
            assert (event.job_id, event.at_ms, event.offset) == (job_id, at, off)
            self.events.append(event)
            if isinstance(event, Added):
                self.started[job_id] = set()
            if isinstance(event, AttemptStarted):
                # An attempt number is started at most once per job lifetime.
                assert event.attempt not in self.started[job_id]
                self.started[job_id].add(event.attempt)
            if isinstance(event, AttemptReleased):
                # Given back: that attempt never reached a client and may start again.
                self.started[job_id].discard(event.attempt)
            if after is not None:
                assert after.version == off
        else:
            assert after is before  # nothing changes, not even the version

        if after is not None:
            assert 0 <= after.attempts <= attempt_limit(after)
            # job.version never decreases, across lifetimes too (offsets only grow).
            assert after.version >= self.highest_version.get(job_id, -1)
            self.highest_version[job_id] = after.version
        if before is not None and is_final(before) and after is not None and not (
            isinstance(command, Retry) and isinstance(outcome, Accepted)
        ):
            # Final stays final (and unchanged) until deleted, expired or retried.
            assert after == before
        if isinstance(command, Retry) and isinstance(outcome, Accepted):
            # A retry revives only a FAILED job, under its id, from scratch.
            assert before is not None and before.state is State.FAILED
            assert after is not None and (after.attempts, after.fails) == (0, 0)
            self.started[job_id] = set()

        if after is None:
            self.state.pop(job_id, None)
        else:
            self.state[job_id] = after
        self.log.append((command, at, off, outcome))

    @rule(data=st.data())
    def command(self, data):
        self.at += data.draw(time_steps)
        job_id = data.draw(st.sampled_from(FEW_IDS))
        self.apply(data.draw(small_command(job_id, self.state.get(job_id), self.at)), self.at)

    @rule(data=st.data())
    def concurrent_claims(self, data):
        """Two gateways claim the same attempt of the same job: at most one wins."""
        job_id = data.draw(st.sampled_from(FEW_IDS))
        job = self.state.get(job_id)
        attempt = (job.attempts if job else 0) + 1
        self.apply(StartAttempt(job_id, attempt), self.at)
        self.apply(StartAttempt(job_id, attempt), self.at)

    @rule(data=st.data())
    def timers(self, data):
        """Let time run to a job's next deadline and apply what the timer produces."""
        job_id = data.draw(st.sampled_from(FEW_IDS))
        job = self.state.get(job_id)
        if job is None:
            return
        deadline = next_deadline(job)
        if deadline is not None and deadline - self.at < 10**6:
            self.at = max(self.at, deadline)
        for command in due_commands(job, self.at):
            self.apply(command, self.at)

    @rule(data=st.data())
    def redeliver(self, data):
        """After a crash an uncommitted command is read again: nothing changes.

        Only for a job that is present: for an absent one the processor's partition
        watermark skips the command (a re-read add must not revive a deleted job).
        """
        if not self.log:
            return
        command, at, off, original = data.draw(st.sampled_from(self.log))
        job = self.state.get(command.job_id)
        if job is None:
            return
        outcome, after = apply(job, command, at, off)
        assert after is job
        if off <= job.version:
            assert outcome == Ignored(ALREADY_APPLIED)
        else:
            # Nothing changed the job since: the decision is the same as the first time.
            assert outcome == original
            assert not isinstance(outcome, Accepted)

    @invariant()
    def folding_events_rebuilds_the_state(self):
        if not hasattr(self, "events"):
            return
        rebuilt: dict[uuid.UUID, Job] = {}
        for event in self.events:
            job = evolve(rebuilt.get(event.job_id), event)
            if job is None:
                del rebuilt[event.job_id]
            else:
                rebuilt[event.job_id] = job
        assert rebuilt == self.state


History.TestCase.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)
TestHistory = History.TestCase


# ------------------------------------------------------------ generated histories


@given(histories())
@settings(max_examples=100, deadline=None)
def test_replaying_a_log_decides_the_same(steps):
    """The same log gives the same outcomes and states: decide is a pure function."""
    state: dict[uuid.UUID, Job] = {}
    for command, at, off, outcome, after in steps:
        again, job = apply(state.get(command.job_id), command, at, off)
        assert again == outcome and job == after
        if job is None:
            state.pop(command.job_id, None)
        else:
            state[command.job_id] = job


@given(histories())
@settings(max_examples=100, deadline=None)
def test_fold_of_accepted_events_equals_final_state(steps):
    state: dict[uuid.UUID, Job] = {}
    folded: dict[uuid.UUID, Job] = {}
    for command, _at, _off, outcome, after in steps:
        if after is None:
            state.pop(command.job_id, None)
        else:
            state[command.job_id] = after
        if isinstance(outcome, Accepted):
            job = evolve(folded.get(command.job_id), outcome.event)
            if job is None:
                folded.pop(command.job_id)
            else:
                folded[command.job_id] = job
    assert folded == state


def test_generator_covers_the_interesting_events():
    """The small world reaches retries, timeouts, exhaustion and expiry."""
    seen: set[str] = set()

    @given(histories(max_steps=60))
    @settings(max_examples=120, deadline=None, database=None, derandomize=True)
    def collect(steps):
        for _c, _a, _o, outcome, after in steps:
            if isinstance(outcome, Accepted):
                name = type(outcome.event).__name__
                if name == "AttemptTimedOut":
                    name += "+requeued" if outcome.event.requeued else "+failed"
                if name == "Expired":
                    name += "+evicted" if outcome.event.evicted else "+final"
                seen.add(name)
            else:
                seen.add(type(outcome).__name__)

    collect()
    assert seen >= {
        "Added", "AttemptStarted", "Completed", "Failed", "FailRetried", "Deleted",
        "AttemptTimedOut+requeued", "AttemptTimedOut+failed", "Expired+evicted",
        "Expired+final", "AttemptsExhausted", "Rejected", "Ignored", "Retried",
    }  # fmt: skip
