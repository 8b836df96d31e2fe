"""Tags in the pure core (docs/workflows.md, "Tags"): a job's ``tags``, given by its
add or schedule (or an import's snapshot), kept in their given order for the job's life,
encoded only when set and covered by the digest.

Unit tests pin the rules (what a job, a command and a record accept); property tests
check that any history keeps every job's tags as its add gave them, that tagged commands
and jobs survive their codecs, and that the digest tells tags apart.
"""

from __future__ import annotations

import dataclasses
import uuid

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventq.core import (
    Accepted,
    Add,
    CodecError,
    Import,
    Job,
    Schedule,
    StartAttempt,
    State,
    apply,
    decode_command,
    decode_job,
    decode_state,
    encode_command,
    encode_job,
    encode_state,
    job_digest_bytes,
)
from eventq.limits import MAX_TAG_BYTES, MAX_TAGS
from support.core_strategies import adds, histories, live_jobs, schedules, tag_tuples

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
UP = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
T0 = 1_700_000_000_000

LONGEST = tuple(f"{n:02d}" + "t" * (MAX_TAG_BYTES - 2) for n in range(MAX_TAGS))
BAD_TAGS = {
    "17 tags": tuple(f"t{n}" for n in range(MAX_TAGS + 1)),
    "a tag twice": ("a", "b", "a"),
    "empty tag": ("a", ""),
    "65 bytes": ("t" * (MAX_TAG_BYTES + 1),),
    "a space": ("a b",),
    "a comma": ("a,b",),
    "not ASCII": ("é",),
    "a colon": ("a:b",),
    "not a str": (b"a",),
    "a list": ["a"],
    "a str": "a",
    "None": None,
}


def added(*tags: str, after: tuple[uuid.UUID, ...] = ()) -> Job:
    outcome, job = apply(None, Add(JID, "q", 1000, 60_000, b"p", after=after, tags=tags), T0, 7)
    assert isinstance(outcome, Accepted) and job is not None
    return job


def test_an_add_and_a_schedule_give_the_job_their_tags_in_order():
    assert added("nightly", "etl").tags == ("nightly", "etl")
    assert added("etl", "nightly").tags == ("etl", "nightly")
    assert added().tags == ()
    assert added(*LONGEST).tags == LONGEST
    schedule = Schedule(JID, "q", 1000, 60_000, T0 + 5, b"p", tags=("a",))
    assert apply(None, schedule, T0, 7)[1].tags == ("a",)  # type: ignore[union-attr]
    assert added("a", after=(UP,)).state is State.WAITING  # a dependent keeps them too
    assert added("a", after=(UP,)).tags == ("a",)


@pytest.mark.parametrize("name", sorted(BAD_TAGS))
def test_malformed_tags_are_refused_by_job_add_schedule_and_import(name):
    tags = BAD_TAGS[name]
    with pytest.raises(ValueError):
        Add(JID, "q", 1000, 60_000, b"p", tags=tags)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Schedule(JID, "q", 1000, 60_000, T0, b"p", tags=tags)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        dataclasses.replace(added(), tags=tags)
    with pytest.raises(ValueError):
        dataclasses.replace(Import.from_job(added()), tags=tags)


def test_tags_survive_every_transition_of_a_job():
    job = added("a", "b")
    outcome, leased = apply(job, StartAttempt(JID, 1), T0 + 1, 8)
    assert isinstance(outcome, Accepted) and leased is not None and leased.tags == ("a", "b")


def test_an_import_carries_the_jobs_tags():
    job = added("nightly", "etl")
    snapshot = Import.from_job(job)
    assert snapshot.tags == ("nightly", "etl")
    assert snapshot.to_job(job.version) == job
    data = encode_command(snapshot)
    assert decode_command(data).command == snapshot
    assert msgpack.unpackb(data)["j"]["tg"] == ["nightly", "etl"]
    # A job without tags: no key, the snapshot's bytes are those before tags.
    assert "tg" not in msgpack.unpackb(encode_command(Import.from_job(added())))["j"]


def test_commands_and_jobs_without_tags_have_no_tags_key():
    assert "tg" not in msgpack.unpackb(encode_command(Add(JID, "q", 1, 0, b"")))
    assert "tg" not in msgpack.unpackb(encode_job(added()))["j"]
    assert msgpack.unpackb(encode_command(Add(JID, "q", 1, 0, b"", tags=("x", "y"))))["tg"] == [
        "x", "y"]  # fmt: skip
    assert msgpack.unpackb(encode_job(added("x")))["j"]["tg"] == ["x"]


@pytest.mark.parametrize(
    "value",
    [[], ["a b"], ["a", "a"], [""], ["t" * 65], [f"t{n}" for n in range(17)], [1], ["a", None],
     {"a": 1}, "a"],
)  # fmt: skip
def test_a_record_with_malformed_tags_is_a_codec_error(value):
    command = msgpack.unpackb(encode_command(Add(JID, "q", 1, 0, b"", tags=("x",))))
    command["tg"] = value
    with pytest.raises(CodecError):
        decode_command(msgpack.packb(command))
    job = msgpack.unpackb(encode_job(added("x")))
    job["j"]["tg"] = value
    with pytest.raises(CodecError):
        decode_job(msgpack.packb(job))


@given(st.one_of(adds(), schedules()))
@settings(max_examples=200)
def test_tagged_commands_round_trip(command):
    assert decode_command(encode_command(command)).command == command
    assert ("tg" in msgpack.unpackb(encode_command(command))) == bool(command.tags)


@given(histories())
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_a_jobs_tags_are_its_adds_for_its_whole_life(steps):
    """Whatever happens to a job, its tags are those of the add (or schedule) that made
    it, until it is gone; every record of it decodes with them."""
    tags_of: dict[uuid.UUID, tuple[str, ...]] = {}
    for command, _, _, outcome, after in steps:
        if not isinstance(outcome, Accepted):
            continue
        if after is None:
            tags_of.pop(command.job_id, None)
            continue
        if isinstance(command, (Add, Schedule)):
            tags_of[command.job_id] = command.tags
        assert after.tags == tags_of[command.job_id]
        assert decode_state(encode_state(outcome.event, after)) == (outcome.event, after)


@given(live_jobs(), tag_tuples, tag_tuples)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_the_digest_tells_tags_apart(job, a, b):
    ja, jb = dataclasses.replace(job, tags=a), dataclasses.replace(job, tags=b)
    assert (job_digest_bytes(ja) == job_digest_bytes(jb)) == (a == b)
    assert decode_job(encode_job(ja)) == ja
