"""Hypothesis strategies and helpers shared by the core tests."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from eventq.core import (
    Accepted,
    Add,
    Complete,
    Delete,
    Expire,
    Fail,
    Job,
    ReleaseAttempt,
    Retry,
    Schedule,
    StartAttempt,
    State,
    TimeoutAttempt,
    Touch,
    apply,
)
from eventq.limits import (
    MAX_ATTEMPTS_LIMIT,
    MAX_BACKOFF_MS,
    MAX_FAILS_LIMIT,
    MAX_PRIORITY,
    MAX_RETRY_DELAY_MS,
    MAX_TAG_BYTES,
    MAX_TAGS,
    MAX_TIME_MS,
    MAX_TTL_MS,
    MAX_TTR_MS,
    MIN_PRIORITY,
    MIN_TIME_MS,
)

NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

ids = st.uuids()
names = st.one_of(
    st.sampled_from(["q", "emails", "a.b-c_d"]),
    st.text(alphabet=NAME_ALPHABET, min_size=1, max_size=255),
)
ttrs = st.integers(1, MAX_TTR_MS)
ttls = st.one_of(st.integers(1, 10**9), st.just(MAX_TTL_MS), st.integers(1, MAX_TTL_MS))
payloads = st.binary(max_size=64)
priorities = st.integers(MIN_PRIORITY, MAX_PRIORITY)
max_attempts = st.integers(0, MAX_ATTEMPTS_LIMIT)
max_fails = st.integers(0, MAX_FAILS_LIMIT)
times = st.integers(0, 4_102_444_800_000)  # up to 2100
any_times = st.integers(MIN_TIME_MS, MAX_TIME_MS)
backoffs = st.one_of(st.just(0), st.integers(0, MAX_BACKOFF_MS))
# A job's tags (docs/workflows.md, "Tags"): none, or 1 to 16 distinct tags of 1-64
# bytes of the name alphabet.
tag_texts = st.one_of(
    st.sampled_from(["nightly", "a", "b.2-x_Y"]),
    st.text(alphabet=NAME_ALPHABET, min_size=1, max_size=MAX_TAG_BYTES),
)
tag_tuples = st.one_of(
    st.just(()), st.lists(tag_texts, min_size=1, max_size=MAX_TAGS, unique=True).map(tuple)
)
# Failure groups (docs/workflows.md, "Failure groups and retry"): the built-in ones a
# client may name, and others.
groups = st.one_of(
    st.sampled_from(["failed", "attempts-exhausted", "upstream-failed", "bad-deploy", "g.1"]),
    st.text(alphabet=NAME_ALPHABET, min_size=1, max_size=255),
)


def adds(job_ids: st.SearchStrategy[uuid.UUID] = ids) -> st.SearchStrategy[Add]:
    return st.builds(
        Add,
        job_ids,
        names,
        ttrs,
        st.one_of(st.just(0), ttls),
        payloads,
        priorities,
        max_attempts,
        max_fails,
        backoffs,
        tags=tag_tuples,
    )


def schedules(job_ids: st.SearchStrategy[uuid.UUID] = ids) -> st.SearchStrategy[Schedule]:
    return st.builds(
        Schedule,
        job_ids,
        names,
        ttrs,
        ttls,
        any_times,
        payloads,
        priorities,
        max_attempts,
        max_fails,
        backoffs,
        tags=tag_tuples,
    )


def commands(job_ids: st.SearchStrategy[uuid.UUID] = ids) -> st.SearchStrategy:
    """Any valid command, fields over their whole ranges."""
    return st.one_of(
        adds(job_ids),
        schedules(job_ids),
        st.builds(Complete, job_ids, payloads),
        st.builds(Fail, job_ids, payloads, st.none() | groups),
        st.builds(Retry, job_ids, st.integers(0, MAX_RETRY_DELAY_MS)),
        st.builds(Delete, job_ids),
        st.builds(Expire, job_ids),
        st.builds(StartAttempt, job_ids, st.integers(1, MAX_ATTEMPTS_LIMIT + 1)),
        st.builds(TimeoutAttempt, job_ids, st.integers(1, MAX_ATTEMPTS_LIMIT)),
        st.builds(
            ReleaseAttempt, job_ids, st.integers(1, MAX_ATTEMPTS_LIMIT),
            st.sampled_from([State.NEW, State.PENDING]),
            st.none() | st.integers(0, 2**63 - 1),
        ),
        st.builds(
            Touch, job_ids, st.integers(1, MAX_ATTEMPTS_LIMIT), st.one_of(st.none(), ttrs)
        ),
    )


# ---------------------------------------------------------------- small-world histories
# A few job ids, small TTR/TTL and attempt limits, so that timeouts, expiry, retries and
# exhausted attempts all happen within short histories.

FEW_IDS = [uuid.UUID(int=n) for n in (1, 2, 3)]


# Command kinds by current state, weighted towards what moves the job on, but every
# kind stays possible in every state (so rejections and stale timers happen too).
_ALL_KINDS = [
    "add", "schedule", "start", "timeout", "complete", "fail", "delete", "expire", "release",
    "touch", "retry",
]
_KINDS = {
    None: ["add"] * 6 + ["schedule"] * 3 + _ALL_KINDS,
    State.NEW: ["start"] * 6 + ["fail", "complete"] + _ALL_KINDS,
    State.PENDING: ["start"] * 6 + ["fail", "complete"] + _ALL_KINDS,
    State.LEASED: ["fail"] * 4 + ["timeout"] * 3 + ["complete"] * 2 + ["release"] * 2
    + ["touch"] * 2 + _ALL_KINDS,
    State.COMPLETED: _ALL_KINDS,
    State.FAILED: ["retry"] * 3 + _ALL_KINDS,
}

small_max_attempts = st.sampled_from([0, 1, 1, 2, 3])
small_max_fails = st.sampled_from([0, 1, 2, 3, 3])
small_backoffs = st.sampled_from([0, 0, 5, 20])
# A small world's tags follow from the priority it drew (no draw of their own: the
# histories' draws, and so the derandomized coverage of test_core_histories, are those
# of the small world before tags).
_SMALL_TAGS = {-2: ("x", "y"), -1: ("x",), 0: (), 1: (), 2: ("y",)}


ALL_KINDS = tuple(_ALL_KINDS)


@st.composite
def small_command(draw, job_id: uuid.UUID, job: Job | None, at_ms: int, kinds=None):
    """A plausible command for ``job_id`` given its current state (or any command), of
    one of ``kinds`` if given (e.g. ``ALL_KINDS``: any kind alike, whatever the state)."""
    kind = draw(st.sampled_from(kinds or _KINDS[None if job is None else job.state]))
    current = job.attempts if job is not None else 0
    attempt = draw(st.sampled_from([current + 1, current + 1, current, current + 2, 1]))
    if kind == "add":
        return Add(
            job_id,
            draw(st.sampled_from(["a", "b"])),
            draw(st.integers(1, 30)),
            # Short TTLs reach expiry; a long one leaves room for attempts to time out
            # and run out (no lease is granted once a TTL passed).
            draw(st.sampled_from([0, 1, 50, 200, 5000])),
            draw(st.binary(max_size=3)),
            priority := draw(st.integers(-2, 2)),
            draw(small_max_attempts),
            draw(small_max_fails),
            draw(small_backoffs),
            tags=_SMALL_TAGS[priority],
        )
    if kind == "schedule":
        return Schedule(
            job_id,
            draw(st.sampled_from(["a", "b"])),
            draw(st.integers(1, 30)),
            draw(st.sampled_from([1, 50, 200, 5000])),
            at_ms + draw(st.integers(-100, 100)),
            draw(st.binary(max_size=3)),
            priority := draw(st.integers(-2, 2)),
            draw(small_max_attempts),
            draw(small_max_fails),
            draw(small_backoffs),
            tags=_SMALL_TAGS[priority],
        )
    if kind == "touch":
        return Touch(
            job_id, min(max(attempt - 1, 1), MAX_ATTEMPTS_LIMIT),
            draw(st.one_of(st.none(), st.integers(1, 30))),
        )
    if kind == "start":
        return StartAttempt(job_id, min(max(attempt, 1), MAX_ATTEMPTS_LIMIT + 1))
    if kind == "timeout":
        return TimeoutAttempt(job_id, min(max(attempt - 1, 1), MAX_ATTEMPTS_LIMIT))
    if kind == "release":
        before = State.NEW if current <= 1 and job is not None and not job.fails else State.PENDING
        return ReleaseAttempt(job_id, min(max(current, 1), MAX_ATTEMPTS_LIMIT), before)
    if kind == "complete":
        return Complete(job_id, draw(st.binary(max_size=3)))
    if kind == "fail":
        group = draw(st.sampled_from([None, None, "bad", "failed", "attempts-exhausted"]))
        return Fail(job_id, draw(st.binary(max_size=3)), group)
    if kind == "retry":
        return Retry(job_id, draw(st.sampled_from([0, 0, 5, 50])))
    if kind == "delete":
        return Delete(job_id)
    return Expire(job_id)


time_steps = st.one_of(st.integers(0, 10), st.integers(0, 10), st.integers(10, 300))


@st.composite
def histories(draw, max_steps: int = 40):
    """A run of the machine: [(command, at_ms, offset, outcome, job_after)]."""
    state: dict[uuid.UUID, Job] = {}
    at = draw(st.integers(0, 10**12))
    offset = draw(st.integers(0, 1000))
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        at += draw(time_steps)
        offset += draw(st.integers(1, 3))
        job_id = draw(st.sampled_from(FEW_IDS))
        job = state.get(job_id)
        command = draw(small_command(job_id, job, at))
        outcome, after = apply(job, command, at, offset)
        if after is None:
            state.pop(job_id, None)
        else:
            state[job_id] = after
        steps.append((command, at, offset, outcome, after))
    return steps


@st.composite
def state_records(draw):
    """(event, job after it) pairs produced by real histories."""
    steps = draw(histories(max_steps=15))
    records = [(o.event, after) for (_, _, _, o, after) in steps if isinstance(o, Accepted)]
    if not records:
        # An add always produces one.
        c = draw(adds())
        o, after = apply(None, c, draw(times), draw(st.integers(0, 10**6)))
        records = [(o.event, after)]
    return draw(st.sampled_from(records))


@st.composite
def live_jobs(draw):
    """A job as real histories leave it (any state, any counters)."""
    steps = draw(histories(max_steps=15))
    jobs = [after for (*_, after) in steps if after is not None]
    if not jobs:
        c = draw(adds())
        _, after = apply(None, c, draw(times), draw(st.integers(0, 10**6)))
        jobs = [after]
    return draw(st.sampled_from(jobs))
