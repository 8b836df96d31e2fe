"""State digests: independent of order, sensitive to every observable field."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import (
    Input,
    Job,
    Link,
    State,
    StateDigest,
    UpstreamOutcome,
    job_digest_bytes,
    job_hash,
    state_digest,
)
from eventq.limits import MAX_DEADLINE_MS, MAX_TTL_MS
from support.core_strategies import live_jobs

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
T0 = 1_700_000_000_000


def base(**changes) -> Job:
    fields = dict(
        id=JID, name="q", ttr_ms=1000, ttl_ms=60_000, payload=b"p", priority=0,
        max_attempts=3, max_fails=3, attempts=1, fails=1, state=State.LEASED,
        created_ms=T0, scheduled_ms=None, expires_ms=T0 + 60_000,
        lease_deadline_ms=T0 + 1000, result=None, result_ok=None, version=9,
    )  # fmt: skip
    fields.update(changes)
    return Job(**fields)


LEASED = base()
DONE = base(state=State.COMPLETED, lease_deadline_ms=None, result=b"r", result_ok=True)

# For each observable field, a change of it (and of whatever it determines) only.
VARIANTS = {
    "id": lambda: base(id=uuid.UUID(int=1)),
    "name": lambda: base(name="r"),
    "ttr_ms": lambda: base(ttr_ms=1001),
    "ttl_ms": lambda: base(ttl_ms=60_001, expires_ms=T0 + 60_001),
    "ttl_ms=0": lambda: base(ttl_ms=0, expires_ms=None),
    "ttl_ms max": lambda: base(ttl_ms=MAX_TTL_MS, expires_ms=MAX_DEADLINE_MS),
    "payload": lambda: base(payload=b"q"),
    "payload empty": lambda: base(payload=b""),
    "priority": lambda: base(priority=-1),
    "max_attempts": lambda: base(max_attempts=0),
    "max_fails": lambda: base(max_fails=2),
    "attempts": lambda: base(attempts=2),
    "fails": lambda: base(fails=0),
    "state": lambda: base(state=State.PENDING, lease_deadline_ms=None),
    "created_ms": lambda: base(created_ms=T0 + 1, expires_ms=T0 + 60_001),
    "scheduled_ms": lambda: base(scheduled_ms=T0, expires_ms=T0 + 60_000),
    "scheduled_ms 0": lambda: base(scheduled_ms=0, expires_ms=T0 + 60_000, ttl_ms=T0 + 60_000),
    "lease_deadline_ms": lambda: base(lease_deadline_ms=T0 + 1001),
    "backoff_ms": lambda: base(backoff_ms=100),
    "returns": lambda: base(backoff_ms=100, returns=1),
    "retry_ms": lambda: base(backoff_ms=100, returns=1, retry_ms=T0),
    "result": lambda: dataclasses.replace(DONE, result=b"s"),
    "result empty": lambda: dataclasses.replace(DONE, result=b""),
    "result_ok": lambda: dataclasses.replace(
        DONE, state=State.FAILED, result_ok=False
    ),
}


# A dependent (docs/workflows.md, "Dependencies"): leased once its upstream completed,
# and failed by it.
UP = uuid.UUID(int=5)
COMPLETED_LINK = Link(UP, UpstreamOutcome.COMPLETED, 500, T0 - 10)
DEPENDENT = base(upstreams=(COMPLETED_LINK,), added_at=2, released_ms=T0 - 10)
UPSTREAM_FAILED = base(
    upstreams=(Link(UP, UpstreamOutcome.FAILED, 500),), added_at=2, state=State.FAILED,
    attempts=0, fails=0, lease_deadline_ms=None, result=b"upstream x failed", result_ok=False,
    group="upstream-failed", finished_at=9, finished_ms=T0,
)  # fmt: skip

# Changes of a dependent's observable workflow fields (and what they determine).
WORKFLOW_VARIANTS = {
    "upstreams": lambda: dataclasses.replace(DEPENDENT, upstreams=(
        COMPLETED_LINK, Link(uuid.UUID(int=6), UpstreamOutcome.COMPLETED, 3, T0 - 10))),
    "upstreams id": lambda: dataclasses.replace(
        DEPENDENT, upstreams=(dataclasses.replace(COMPLETED_LINK, id=uuid.UUID(int=6)),)),
    "upstreams completed_ms": lambda: dataclasses.replace(
        DEPENDENT, upstreams=(dataclasses.replace(COMPLETED_LINK, completed_ms=T0 - 11),)),
    "upstreams outcome": lambda: dataclasses.replace(
        UPSTREAM_FAILED, upstreams=(Link(UP, UpstreamOutcome.DELETED, 500),)),
    "released_ms": lambda: dataclasses.replace(DEPENDENT, released_ms=T0 - 9),
    "finished_ms": lambda: dataclasses.replace(UPSTREAM_FAILED, finished_ms=T0 + 1),
    "group": lambda: dataclasses.replace(UPSTREAM_FAILED, group="other"),
    # Retry's (docs/workflows.md, "retry"): a job a retry left with a time, or early.
    "delayed_ms": lambda: dataclasses.replace(DEPENDENT, delayed_ms=T0),
    "early": lambda: dataclasses.replace(DEPENDENT, early=True),
    "delayed_ms again": lambda: dataclasses.replace(DEPENDENT, delayed_ms=T0 + 1, early=True),
    # [eventq] docs/security.md, "Queue-name prefixes": a dependent's scope decides which
    # upstreams it hears.
    "scope": lambda: dataclasses.replace(DEPENDENT, scope=DEPENDENT.name[:1]),
}
WORKFLOW_BASES = {"finished_ms": UPSTREAM_FAILED, "group": UPSTREAM_FAILED,
                  "upstreams outcome": UPSTREAM_FAILED}  # fmt: skip

# Tags (docs/workflows.md, "Determinism": the digest covers tags), on a plain job and on
# a dependent: each change of them (set, order, one more, one other) is another digest.
TAGGED = base(tags=("nightly", "etl"))
TAG_VARIANTS = {
    "tags": lambda: base(tags=("nightly",)),
    "tags order": lambda: base(tags=("etl", "nightly")),
    "tags one more": lambda: base(tags=("nightly", "etl", "x")),
    "tags other": lambda: base(tags=("nightly", "etm")),
    "tags none": lambda: LEASED,
}
# Positions, left out like ``version``: the same state in another log has others.
POSITIONS = {"added_at", "finished_at"}


def test_every_observable_field_has_a_variant():
    observable = {f.name for f in dataclasses.fields(Job)} - {"version", "expires_ms", *POSITIONS}
    covered = {name.split(" ")[0].split("=")[0]
               for name in [*VARIANTS, *WORKFLOW_VARIANTS, *TAG_VARIANTS]}
    assert observable <= covered


@pytest.mark.parametrize("name", sorted(WORKFLOW_VARIANTS))
def test_changing_any_workflow_field_changes_the_digest(name):
    variant, original = WORKFLOW_VARIANTS[name](), WORKFLOW_BASES.get(name, DEPENDENT)
    assert job_digest_bytes(variant) != job_digest_bytes(original)


@pytest.mark.parametrize("name", sorted(TAG_VARIANTS))
def test_changing_a_jobs_tags_changes_the_digest(name):
    assert job_digest_bytes(TAG_VARIANTS[name]()) != job_digest_bytes(TAGGED)
    tagged_dependent = dataclasses.replace(UPSTREAM_FAILED, tags=TAGGED.tags)
    assert job_digest_bytes(tagged_dependent) != job_digest_bytes(UPSTREAM_FAILED)
    assert job_digest_bytes(tagged_dependent) != job_digest_bytes(
        dataclasses.replace(UPSTREAM_FAILED, tags=TAG_VARIANTS[name]().tags))


def test_jobs_without_tags_digest_as_before_tags():
    """SHA-256 of the digest bytes of three jobs, as the code before tags made them: a
    state of jobs without tags keeps its digest (a log folded by either agrees)."""
    import hashlib

    before = {
        "d57624c1d12247f09dc4cb527c2fda4b0f41325a608c4905b8dc4e7e0dc58856": LEASED,
        "ad85dfaf7293948424ff02d76ad7ef0e9794227a394b61fc4f0304a050b7c963": DEPENDENT,
        "dde1ee2b8af0d253aee455ce07d887cd20dbf202a251b01caf14b6b14f3b6a4f": UPSTREAM_FAILED,
    }
    for digest, job in before.items():
        assert hashlib.sha256(job_digest_bytes(job)).hexdigest() == digest


def test_a_dependents_positions_do_not_change_the_digest():
    moved = dataclasses.replace(
        UPSTREAM_FAILED, version=90, added_at=20, finished_at=90,
        upstreams=(Link(UP, UpstreamOutcome.FAILED, 5000),),
    )  # fmt: skip
    assert job_digest_bytes(moved) == job_digest_bytes(UPSTREAM_FAILED)
    assert job_digest_bytes(DEPENDENT) != job_digest_bytes(LEASED)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_changing_any_field_changes_the_digest(name):
    variant = VARIANTS[name]()
    original = DONE if name.startswith("result") else LEASED
    assert variant != dataclasses.replace(original, version=variant.version)
    assert job_digest_bytes(variant) != job_digest_bytes(original)
    assert job_hash(variant) != job_hash(original)
    other = base(id=uuid.UUID(int=77))
    assert state_digest([variant, other]) != state_digest([original, other])


def test_variants_are_pairwise_distinct():
    jobs = [LEASED, DONE, *(make() for make in VARIANTS.values())]
    digests = {job_digest_bytes(j) for j in jobs}
    assert len(digests) == len(jobs)


def test_version_does_not_change_the_digest():
    assert job_digest_bytes(LEASED) == job_digest_bytes(dataclasses.replace(LEASED, version=1))
    assert state_digest([LEASED]) == state_digest([dataclasses.replace(LEASED, version=10**9)])


def test_state_digest_is_a_multiset_digest():
    assert state_digest([]) == StateDigest().hexdigest()
    assert state_digest([LEASED]) != state_digest([])
    assert state_digest([LEASED, LEASED]) != state_digest([LEASED])
    assert len(state_digest([LEASED])) == 64
    int(state_digest([LEASED]), 16)


@given(st.lists(live_jobs(), max_size=6), st.randoms())
@settings(max_examples=60, deadline=None)
def test_state_digest_is_independent_of_order(jobs, rnd):
    shuffled = list(jobs)
    rnd.shuffle(shuffled)
    assert state_digest(shuffled) == state_digest(jobs)
    assert state_digest(iter(jobs)) == state_digest(reversed(jobs))


@given(st.lists(live_jobs(), max_size=6), live_jobs())
@settings(max_examples=60, deadline=None)
def test_incremental_digest_matches_a_full_one(jobs, extra):
    digest = StateDigest(jobs)
    digest.add(extra)
    assert digest.hexdigest() == state_digest([*jobs, extra])
    assert digest.count == len(jobs) + 1
    digest.discard(extra)
    assert digest.hexdigest() == state_digest(jobs)
    if jobs:
        digest.replace(jobs[0], extra)  # one job changes state
        assert digest.hexdigest() == state_digest([extra, *jobs[1:]])
        digest.replace(extra, None)  # and is removed
        assert digest.hexdigest() == state_digest(jobs[1:])


@given(live_jobs(), live_jobs())
@settings(max_examples=100, deadline=None)
def test_digest_bytes_are_equal_exactly_for_equal_observable_state(a, b):
    same = dataclasses.replace(a, version=0) == dataclasses.replace(b, version=0)
    assert (job_digest_bytes(a) == job_digest_bytes(b)) == same


def test_discard_from_empty_digest_is_refused():
    with pytest.raises(ValueError):
        StateDigest().discard(LEASED)


# Workflows' inputs (docs/workflows.md, "Determinism": the digest covers inputs).
IN_DEP, IN_UP, IN_OTHER = uuid.UUID(int=1 << 122 | 1), uuid.UUID(int=2), uuid.UUID(int=3)
IN_HANDED = Input(completed=True, result=b"done")


def test_an_input_changes_the_digest_but_not_the_job_count():
    with_input = StateDigest([LEASED], [(IN_DEP, IN_UP, IN_HANDED)])
    assert with_input.hexdigest() != state_digest([LEASED])
    assert with_input.count == 1
    assert state_digest([], [(IN_DEP, IN_UP, IN_HANDED)]) != state_digest([])


@pytest.mark.parametrize("other", [
    (IN_UP, IN_DEP, IN_HANDED),  # the ends swapped
    (IN_DEP, IN_OTHER, IN_HANDED),  # another upstream
    (IN_DEP, IN_UP, Input(completed=False, result=b"done")),  # failed, same bytes
    (IN_DEP, IN_UP, Input(completed=True, result=b"done!")),  # another result
])
def test_every_part_of_an_input_counts(other):
    assert state_digest([], [other]) != state_digest([], [(IN_DEP, IN_UP, IN_HANDED)])


def test_inputs_digest_in_any_order_and_combine_across_parts():
    entries = [(IN_DEP, IN_UP, IN_HANDED), (IN_DEP, IN_OTHER, Input(False, b"")),
               (IN_OTHER, IN_UP, IN_HANDED)]
    assert state_digest([LEASED], entries) == state_digest([LEASED], reversed(entries))
    parts = [StateDigest([LEASED], entries[:1]), StateDigest([], entries[1:])]
    combined = StateDigest.combined((part.sum, part.count) for part in parts)
    assert combined.hexdigest() == state_digest([LEASED], entries)
