"""Workflows' records (eventq/core/workflow.py) and wire formats: registrations and
inputs with their keys, and the codec of ``after``, links, ``depend``, ``upstream`` and
the workflow events: round trips, and strict decoding of every malformed field."""

from __future__ import annotations

import uuid

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.core import (
    Add,
    CodecError,
    DecodedCommand,
    Depend,
    Input,
    Job,
    Link,
    Registration,
    Schedule,
    Upstream,
    UpstreamOutcome,
    apply,
    decode_command,
    decode_input,
    decode_job,
    decode_registration,
    decode_state,
    encode_command,
    encode_input,
    encode_job,
    encode_registration,
    encode_state,
    input_key,
    inputs_prefix,
    registration_key,
    registrations_prefix,
)
from eventq.core.partitioner import job_key
from eventq.core.workflow import (
    INPUT_KEY_PREFIX,
    META_PREFIX,
    REGISTRATION_KEY_PREFIX,
    input_ids,
    registration_ids,
)
from eventq.kafka.logreader import META_KEY_PREFIX
from eventq.limits import MAX_AFTER_IDS, MAX_DEADLINE_MS, MAX_OFFSET
from eventq.state.jobs_table import PAUSED_KEY_PREFIX, WATERMARK_KEY, is_job_key

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
U1 = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
U2 = uuid.UUID("c9bf9e57-1685-4c89-bafb-ff5af830be8a")
T0 = 1_700_000_000_000
OK = UpstreamOutcome.COMPLETED


def packed(m: object) -> bytes:
    return msgpack.packb(m, use_bin_type=True)


def unpacked(data: bytes) -> dict:
    return msgpack.unpackb(data)


# ---------------------------------------------------------------------------- keys

ids = st.uuids()


@given(ids, ids)
def test_keys_read_back_as_their_ids(a, b):
    assert registration_ids(registration_key(a, b)) == (a, b)
    assert input_ids(input_key(a, b)) == (a, b)
    assert registration_key(a, b).startswith(registrations_prefix(a))
    assert input_key(a, b).startswith(inputs_prefix(a))


def test_the_key_layout_is_the_documented_one():
    assert registration_key(U1, JID) == (
        b"\x00eventq.reg:16fd2706-8baf-433b-82eb-8c7fada847da:"
        b"61a444a0-6128-41c0-8078-cc757d3bd2d8"
    )  # fmt: skip
    assert input_key(JID, U1) == (
        b"\x00eventq.input:61a444a0-6128-41c0-8078-cc757d3bd2d8:"
        b"16fd2706-8baf-433b-82eb-8c7fada847da"
    )  # fmt: skip
    assert registrations_prefix(U1) + job_key(JID) == registration_key(U1, JID)


@given(ids, ids, ids)
def test_side_keys_sort_apart_from_jobs_and_from_each_other(a, b, c):
    reg, inp = registration_key(a, b), input_key(a, b)
    assert META_PREFIX == META_KEY_PREFIX  # readers of jobs pass over them
    for key in (reg, inp):
        assert key.startswith(META_KEY_PREFIX) and not is_job_key(key)
        assert key < job_key(c)
    assert not reg.startswith(INPUT_KEY_PREFIX) and not inp.startswith(REGISTRATION_KEY_PREFIX)
    for other in (PAUSED_KEY_PREFIX, WATERMARK_KEY):
        assert not reg.startswith(other) and not other.startswith(REGISTRATION_KEY_PREFIX)
        assert not inp.startswith(other) and not other.startswith(INPUT_KEY_PREFIX)
    # one upstream's registrations are one scan: no other upstream's key is inside it
    if a != c:
        assert not registration_key(c, b).startswith(registrations_prefix(a))


@pytest.mark.parametrize("key", [
    b"", b"\x00eventq.reg:", registration_key(U1, JID)[:-1], registration_key(U1, JID) + b"0",
    input_key(U1, JID), registration_key(U1, JID).replace(b"61a4", b"61A4"),
    registration_key(U1, JID).replace(b"da:61", b"da-61"),
])  # fmt: skip
def test_what_is_no_registration_key_is_refused(key):
    with pytest.raises(ValueError):
        registration_ids(key)


# ------------------------------------------------------------------------ records


@given(ids, st.integers(0, MAX_OFFSET), st.none() | st.integers(-(2**40), MAX_DEADLINE_MS))
def test_a_registration_round_trips(dependent, created, deadline):
    registration = Registration(dependent, created, deadline)
    assert decode_registration(encode_registration(registration)) == registration


@given(st.booleans(), st.binary(max_size=64))
def test_an_input_round_trips(completed, result):
    assert decode_input(encode_input(Input(completed, result))) == Input(completed, result)


def test_a_registration_expires_at_its_deadline():
    assert not Registration(JID, 1, None).expired(2**60)
    assert not Registration(JID, 1, T0).expired(T0 - 1)
    assert Registration(JID, 1, T0).expired(T0)


GOOD_REGISTRATION = unpacked(encode_registration(Registration(JID, 5, T0)))
GOOD_INPUT = unpacked(encode_input(Input(True, b"r")))


@pytest.mark.parametrize("m, error", [
    ({**GOOD_REGISTRATION, "v": 2}, "unsupported schema version"),
    ({k: v for k, v in GOOD_REGISTRATION.items() if k != "dp"}, "missing field 'dp'"),
    ({k: v for k, v in GOOD_REGISTRATION.items() if k != "dl"}, "missing field 'dl'"),
    ({**GOOD_REGISTRATION, "dp": b"short"}, "16 bytes"),
    ({**GOOD_REGISTRATION, "c": -1}, "dependent_created must be in"),
    ({**GOOD_REGISTRATION, "c": True}, "must be an int"),
    ({**GOOD_REGISTRATION, "dl": "soon"}, "must be an int"),
    ({**GOOD_REGISTRATION, "zz": 1}, "unknown field"),
    ([1, 2], "a record must be a msgpack map"),
])  # fmt: skip
def test_a_malformed_registration_is_refused(m, error):
    with pytest.raises(CodecError, match=error):
        decode_registration(packed(m))


@pytest.mark.parametrize("m, error", [
    ({k: v for k, v in GOOD_INPUT.items() if k != "ok"}, "missing field 'ok'"),
    ({k: v for k, v in GOOD_INPUT.items() if k != "x"}, "missing field 'x'"),
    ({**GOOD_INPUT, "ok": 1}, "must be a bool"),
    ({**GOOD_INPUT, "x": "text"}, "must be bin"),
    ({**GOOD_INPUT, "j": {}}, "unknown field"),
])  # fmt: skip
def test_a_malformed_input_is_refused(m, error):
    with pytest.raises(CodecError, match=error):
        decode_input(packed(m))


def test_records_of_one_kind_are_not_read_as_another():
    with pytest.raises(CodecError):
        decode_input(encode_registration(Registration(JID, 5, T0)))
    with pytest.raises(CodecError):
        decode_registration(encode_input(Input(True, b"")))
    with pytest.raises(CodecError):
        encode_input(Registration(JID, 5, T0))  # type: ignore[arg-type]


# ------------------------------------------------------------------------ commands

ADD = Add(JID, "q", 1000, 60_000, b"p", after=(U1, U2))
DEPEND = Depend(U1, JID, 5, T0)
NOTICE = Upstream(JID, 5, U1, OK, 7, T0, b"r")


@pytest.mark.parametrize("command", [
    ADD, Schedule(JID, "q", 1000, 60_000, T0, b"p", after=(U2,)),
    Add(JID, "q", 1, 1, b"", after=tuple(uuid.UUID(int=n) for n in range(1, MAX_AFTER_IDS + 1))),
    DEPEND, Depend(U1, JID, MAX_OFFSET, None), Depend(U1, JID, 0, MAX_DEADLINE_MS), NOTICE,
    *(Upstream(JID, 5, U1, o, 7, T0, b"" if o in (OK, UpstreamOutcome.FAILED) else None)
      for o in UpstreamOutcome if o is not UpstreamOutcome.UNFINISHED),
])  # fmt: skip
def test_workflow_commands_round_trip(command):
    data = encode_command(command, node="n1", request_id=3)
    assert decode_command(data) == DecodedCommand(command, "n1", 3)
    assert unpacked(data)["i"] == command.job_id.bytes  # ``i``: the key's job, as for all


def test_after_is_written_only_when_given():
    assert "af" not in unpacked(encode_command(Add(JID, "q", 1, 1, b"")))
    assert unpacked(encode_command(ADD))["af"] == [U1.bytes, U2.bytes]


def mutated(command, **changes) -> bytes:
    m = unpacked(encode_command(command))
    for key, value in changes.items():
        if value is DROP:
            del m[key]
        else:
            m[key] = value
    return packed(m)


DROP = object()


@pytest.mark.parametrize("data, error", [
    (mutated(ADD, af=[]), "array of 1 to 100 UUIDs"),
    (mutated(ADD, af=U1.bytes), "array of 1 to 100 UUIDs"),
    (mutated(ADD, af=[U1.bytes] * 101), "array of 1 to 100 UUIDs"),
    (mutated(ADD, af=[U1.bytes, b"x" * 15]), "16 bytes of UUID"),
    (mutated(ADD, af=[U1.bytes, "s"]), "must be bin"),
    (mutated(ADD, af=[U1.bytes, U1.bytes]), "twice"),
    (mutated(ADD, af=[JID.bytes]), "own upstream"),
    (mutated(ADD, af=None), "array of 1 to 100 UUIDs"),
    (mutated(DEPEND, dp=U1.bytes), "own upstream"),
    (mutated(DEPEND, dp=DROP), "missing field 'dp'"),
    (mutated(DEPEND, dl=DROP), "missing field 'dl'"),
    (mutated(DEPEND, dl=-(2**63)), "dependent_deadline_ms must be in"),
    (mutated(DEPEND, c=None), "must be an int"),
    (mutated(DEPEND, u=U2.bytes), "unknown field"),
    (mutated(NOTICE, oc=0), "outcome"),
    (mutated(NOTICE, oc=6), "outcome"),
    (mutated(NOTICE, oc=True), "outcome"),
    (mutated(NOTICE, x=DROP), "result must be bytes"),
    (mutated(NOTICE, x=None), "must be bin"),
    (mutated(NOTICE, oc=int(UpstreamOutcome.DELETED)), "carries no result"),
    (mutated(NOTICE, ch=-1), "change must be in"),
    (mutated(NOTICE, ch=DROP), "missing field 'ch'"),
    (mutated(NOTICE, a=DROP), "missing field 'a'"),
    (mutated(NOTICE, u=JID.bytes), "own upstream"),
    (mutated(NOTICE, u=b""), "16 bytes"),
    (mutated(NOTICE, dl=T0), "unknown field"),
])  # fmt: skip
def test_malformed_workflow_commands_are_refused(data, error):
    with pytest.raises(CodecError, match=error):
        decode_command(data)


# ------------------------------------------------------------- jobs and events


def dependent_history() -> list:
    """(event, job) of each accepted command of a dependent's life."""
    job, records = None, []
    commands = [
        ADD, Upstream(JID, 100, U1, OK, 7, T0 - 3, b"r1"),
        Upstream(JID, 100, U1, UpstreamOutcome.RETRIED, 8, T0, None),
        Upstream(JID, 100, U1, OK, 9, T0 - 1, b"r1"), Upstream(JID, 100, U2, OK, 3, T0 - 2, b""),
        Upstream(JID, 100, U2, UpstreamOutcome.FAILED, 4, T0, b"late"),
    ]  # fmt: skip
    for n, command in enumerate(commands):
        outcome, job = apply(job, command, T0 + n, 100 + n)
        records.append((outcome.event, job))
    return records


def test_dependents_and_their_events_round_trip():
    for event, job in dependent_history():
        assert decode_state(encode_state(event, job)) == (event, job)
        assert decode_job(encode_job(job)) == job


def test_an_upstream_failed_record_round_trips():
    job = apply(None, ADD, T0, 100)[1]
    outcome, failed = apply(job, Upstream(JID, 100, U2, UpstreamOutcome.EVICTED, 4, T0), T0, 101)
    assert decode_state(encode_state(outcome.event, failed)) == (outcome.event, failed)
    assert unpacked(encode_job(failed))["j"]["g"] == "upstream-failed"


def job_map(job: Job) -> dict:
    return unpacked(encode_job(job))["j"]


def with_job_map(job: Job, **changes) -> bytes:
    m = unpacked(encode_job(job))
    for key, value in changes.items():
        if value is DROP:
            del m["j"][key]
        else:
            m["j"][key] = value
    return packed(m)


WAITING = apply(None, ADD, T0, 100)[1]
LINK = [U1.bytes, int(OK), 7, T0]
UNFINISHED = [U2.bytes, 0, None, None]


@pytest.mark.parametrize("changes, error", [
    (dict(up=[]), "array of 1 to 100 links"),
    (dict(up=[LINK[:3], UNFINISHED]), "array of 1 to 100 links"),
    (dict(up=[LINK, "x"]), "array of 1 to 100 links"),
    (dict(up=[[U1.bytes, 1.0, 7, T0], UNFINISHED]), "array of 1 to 100 links"),
    (dict(up=[[U1.bytes, 1, "7", T0], UNFINISHED]), "array of 1 to 100 links"),
    (dict(up=[[U1.bytes, 5, 7, None], UNFINISHED]), "cannot be RETRIED"),
    (dict(up=[[U1.bytes, 9, 7, None], UNFINISHED]), "not a valid UpstreamOutcome"),
    (dict(up=[[U1.bytes, 1, 7, None], UNFINISHED]), "completed_ms must be an int"),
    (dict(up=[[U1.bytes, 2, 7, T0], UNFINISHED]), "only for a COMPLETED"),
    (dict(up=[[U1.bytes, 1, None, T0], UNFINISHED]), "position of its change"),
    (dict(up=[[b"x", 0, None, None], UNFINISHED]), "16 bytes"),
    (dict(up=[UNFINISHED, UNFINISHED]), "named twice"),
    (dict(up=DROP), "WAITING job has upstreams"),
    (dict(ca=DROP), "added_at must be an int"),
    (dict(ca=None), "must be an int"),
    (dict(rl=T0), "WAITING job is not released"),
    (dict(g="upstream-failed"), "only in FAILED"),
    (dict(fp=100, fm=T0), "only in final states"),
    (dict(s=0), "ok"),  # NEW, not released, with upstreams: what a retry may leave
])  # fmt: skip
def test_malformed_dependents_are_refused(changes, error):
    data = with_job_map(WAITING, **changes)
    if error == "ok":
        decode_job(data)
        return
    with pytest.raises(CodecError, match=error):
        decode_job(data)


def test_a_dependents_keys_are_only_those_it_uses():
    assert set(job_map(WAITING)) - set(job_map(apply(None, Add(JID, "q", 1000, 60_000, b"p"),
                                                     T0, 100)[1])) == {"up", "ca"}
    released = dependent_history()[-2][1]
    assert {"up", "ca", "rl"} <= set(job_map(released)) and "g" not in job_map(released)


@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 3, 4]), st.integers(0, 2**40)),
                min_size=1, max_size=5))
def test_links_round_trip(outcomes):
    links = tuple(
        Link(uuid.UUID(int=n + 1), UpstreamOutcome(o), None if o == 0 else change,
             T0 if o == 1 else None)
        for n, (o, change) in enumerate(outcomes)
    )  # fmt: skip
    job = Job(**{**{f: getattr(WAITING, f) for f in WAITING.__slots__}, "upstreams": links})
    assert decode_job(encode_job(job)) == job
