"""msgpack codecs: round trips, the pinned wire format, and CodecError on anything bad."""

from __future__ import annotations

import dataclasses
import re
import uuid

import msgpack
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from eventq.core import (
    Add,
    Added,
    AttemptTimedOut,
    CodecError,
    CommandType,
    Complete,
    Completed,
    DecodedCommand,
    Delete,
    Deleted,
    Expire,
    Expired,
    Fail,
    Pause,
    Resume,
    Schedule,
    StartAttempt,
    TimeoutAttempt,
    apply,
    codec,
    decode_command,
    decode_job,
    decode_state,
    encode_command,
    encode_job,
    encode_state,
)
from eventq.core.batch import position
from eventq.core.job import WORKFLOW_FIELD_NAMES
from eventq.limits import MAX_PAYLOAD_BYTES, MAX_REQUEST_ID
from support.core_strategies import commands, live_jobs, names, state_records

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
T0 = 1_700_000_000_000

nodes = st.none() | st.text(max_size=40)
request_ids = st.none() | st.integers(0, MAX_REQUEST_ID)
queue_commands = st.builds(Pause, names) | st.builds(Resume, names)
any_commands = commands() | queue_commands  # a job's or a queue's

# Anything msgpack can carry, and maps that look like our records.
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.sampled_from([0, 1, 2, 7, 8, 64, 255, 256, -1])
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=20)
    | st.just(JID.bytes)
)
KEYS = ["v", "t", "i", "n", "r", "l", "s", "d", "p", "a", "f", "x", "k", "o", "q", "e", "j",
        "ma", "mf", "at", "fa", "c", "w", "ld", "ok", "ver", "dl", "rq", "ev"]  # fmt: skip
msgpack_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=3), inner, max_size=8),
    max_leaves=30,
)


def assert_decodes_or_codec_error(decode, data):
    """``decode`` either returns or raises CodecError: nothing else, ever."""
    try:
        decode(data)
    except CodecError:
        pass


# ------------------------------------------------------------------------ round trips


@given(any_commands, nodes, request_ids)
def test_command_round_trip(command, node, request_id):
    data = encode_command(command, node=node, request_id=request_id)
    assert decode_command(data) == DecodedCommand(command, node, request_id)


@given(state_records())
def test_state_record_round_trip(record):
    event, job = record
    assert decode_state(encode_state(event, job)) == (event, job)


@pytest.mark.parametrize(
    "event",
    [Deleted(JID, T0, 5), Expired(JID, T0, 5, evicted=True), Expired(JID, T0, 5, False)],
)
def test_state_record_of_a_removed_job(event):
    assert decode_state(encode_state(event, None)) == (event, None)


@given(live_jobs())
def test_job_round_trip(job):
    assert decode_job(encode_job(job)) == job


def test_added_record_stores_the_payload_once():
    payload = b"P" * 1000
    outcome, job = apply(None, Add(JID, "q", 1, 1, payload), T0, 1)
    data = encode_state(outcome.event, job)
    assert data.count(payload) == 1
    assert decode_state(data) == (outcome.event, job)


# ---------------------------------------------------------------- pinned wire format


def test_command_wire_format_is_pinned():
    add = Add(JID, "ping", 1000, 60000, b"a", priority=10, max_attempts=3, max_fails=1)
    assert msgpack.unpackb(encode_command(add, node="n1", request_id=42)) == {
        "v": 1, "t": 1, "i": JID.bytes, "n": "ping", "r": 1000, "l": 60000, "d": b"a",
        "p": 10, "a": 3, "f": 1, "o": "n1", "q": 42,
    }  # fmt: skip
    sched = Schedule(JID, "ping", 1000, 60000, T0, b"a")
    assert msgpack.unpackb(encode_command(sched)) == {
        "v": 1, "t": 2, "i": JID.bytes, "n": "ping", "r": 1000, "l": 60000, "s": T0,
        "d": b"a", "p": 0, "a": 0, "f": 0,
    }  # fmt: skip
    assert msgpack.unpackb(encode_command(Complete(JID, b"r"))) == {
        "v": 1, "t": 3, "i": JID.bytes, "x": b"r"
    }  # fmt: skip
    assert msgpack.unpackb(encode_command(Fail(JID, b"r")))["t"] == 4
    assert msgpack.unpackb(encode_command(Delete(JID))) == {"v": 1, "t": 5, "i": JID.bytes}
    assert msgpack.unpackb(encode_command(Expire(JID))) == {"v": 1, "t": 6, "i": JID.bytes}
    assert msgpack.unpackb(encode_command(StartAttempt(JID, 2))) == {
        "v": 1, "t": 7, "i": JID.bytes, "k": 2
    }  # fmt: skip
    assert msgpack.unpackb(encode_command(TimeoutAttempt(JID, 2)))["t"] == 8


def test_state_wire_format_is_pinned():
    outcome, job = apply(None, Add(JID, "q", 10, 100, b"p"), T0, 7)
    outcome, job = apply(job, StartAttempt(JID, 1), T0 + 1, 8)
    record = msgpack.unpackb(encode_state(outcome.event, job))
    assert record == {
        "v": 2,
        "e": {"t": 5, "i": JID.bytes, "a": T0 + 1, "o": 8, "k": 1, "dl": T0 + 11},
        "j": {
            "i": JID.bytes, "n": "q", "r": 10, "l": 100, "d": b"p", "p": 0, "ma": 0,
            "mf": 0, "at": 1, "fa": 0, "s": 4, "c": T0, "w": None, "e": T0 + 100,
            "ld": T0 + 11, "x": None, "ok": None, "ver": 8,
        },
    }  # fmt: skip


def test_a_version_1_state_record_counts_positions_in_offsets():
    """Records written when a record held one command (schema 1) keep meaning the same
    place in the log: offset 8 is position 8 * POSITIONS_PER_OFFSET (index 0)."""
    outcome, job = apply(None, Add(JID, "q", 10, 100, b"p"), T0, position(7))
    outcome, job = apply(job, StartAttempt(JID, 1), T0 + 1, position(8))
    v2 = msgpack.unpackb(encode_state(outcome.event, job))
    v1 = {"v": 1, "e": dict(v2["e"], o=8), "j": dict(v2["j"], ver=8)}
    assert decode_state(packed(v1)) == decode_state(packed(v2)) == (outcome.event, job)
    assert decode_job(packed({"v": 1, "j": v1["j"]})) == job
    assert decode_job(encode_job(job)) == job


# ----------------------------------------------------------------------- bad records


def packed(m) -> bytes:
    return msgpack.packb(m, use_bin_type=True)


VALID_ADD = {"v": 1, "t": 1, "i": JID.bytes, "n": "q", "r": 1, "l": 0, "d": b"", "p": 0,
             "a": 0, "f": 0}  # fmt: skip


def test_valid_add_map_decodes():
    assert decode_command(packed(VALID_ADD)).command == Add(JID, "q", 1, 0, b"")


def with_(**changes):
    m = dict(VALID_ADD)
    for k, v in changes.items():
        if v is ...:
            del m[k]
        else:
            m[k] = v
    return packed(m)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",  # never used in msgpack
        b"\x81",  # truncated map
        packed(VALID_ADD) + b"\x00",  # trailing bytes
        packed([1, 1, JID.bytes]),
        packed(None),
        packed({1: 2}),
        packed({b"v": 1}),
        with_(v=...),
        with_(v=2),
        with_(v=0),
        with_(v=True),
        with_(v="1"),
        with_(t=...),
        with_(t=9),
        with_(t=64),
        with_(t=True),
        with_(t=1.0),
        with_(i=...),
        with_(i=JID.bytes[:15]),
        with_(i=str(JID)),
        with_(n=...),
        with_(n=""),
        with_(n="a b"),
        with_(n=b"q"),
        with_(r=0),
        with_(r=86_400_001),
        with_(r=True),
        with_(r=None),
        with_(l=-1),
        with_(d="text"),
        with_(d=b"x" * (MAX_PAYLOAD_BYTES + 1)),
        with_(p=2**31),
        with_(a=256),
        with_(f=-1),
        with_(s=5),  # a schedule field on an add
        with_(x=b""),
        with_(zz=1),
        with_(o=5),
        with_(o="n" * 256),
        with_(q=-1),
        with_(q="7"),
        with_(q=True),
        "not bytes",
        None,
        12,
    ],
)
def test_bad_command_records_raise_codec_error(data):
    with pytest.raises(CodecError):
        decode_command(data)


def test_optional_correlation_fields_accept_nil():
    decoded = decode_command(with_(o=None, q=None))
    assert (decoded.node, decoded.request_id) == (None, None)


def test_codec_error_is_a_value_error():
    assert issubclass(CodecError, ValueError)


def state_map():
    outcome, job = apply(None, Add(JID, "q", 10, 100, b"p"), T0, 7)
    outcome, job = apply(job, Complete(JID, b"r"), T0 + 1, 8)
    return msgpack.unpackb(encode_state(outcome.event, job))


def mutated_state(mutate) -> bytes:
    m = state_map()
    mutate(m)
    return packed(m)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: m.update(v=3),
        lambda m: m.pop("e"),
        lambda m: m.pop("j"),
        lambda m: m.update(zz=1),
        lambda m: m.update(e=[1, 2]),
        lambda m: m.update(j=b"job"),
        lambda m: m["e"].update(t=99),
        lambda m: m["e"].update(t=1),  # Added, but the job is COMPLETED
        lambda m: m["e"].update(o=9),  # version differs from offset
        lambda m: m["e"].update(i=uuid.UUID(int=1).bytes),  # another job
        lambda m: m["e"].update(x=b"other"),  # result differs
        lambda m: m["e"].update(x=None),  # the result, when present, is bin
        lambda m: m["e"].update(dl=5),  # unknown field for Completed
        lambda m: m.update(j=None),  # Completed leaves a live job
        lambda m: m["e"].update(t=8),  # Deleted with a live job
        lambda m: m["j"].update(s=2),  # FAILED with result_ok True
        lambda m: m["j"].update(s=5),
        lambda m: m["j"].update(ok=None),
        lambda m: m["j"].update(ver=-1),
        lambda m: m["j"].pop("w"),  # missing even though nil
        lambda m: m["j"].update(e=None),  # TTL without expiry
        lambda m: m["j"].update(at=1.0),
        lambda m: m["j"].update(extra=1),
    ],
)
def test_bad_state_records_raise_codec_error(mutate):
    decode_state(mutated_state(lambda m: None))  # the unmutated record is fine
    with pytest.raises(CodecError):
        decode_state(mutated_state(mutate))


def test_inconsistent_attempt_records_raise_codec_error():
    outcome, job = apply(None, Add(JID, "q", 10, 100, b"p", max_attempts=2), T0, 7)
    outcome, job = apply(job, StartAttempt(JID, 1), T0, 8)
    m = msgpack.unpackb(encode_state(outcome.event, job))
    m["e"]["dl"] += 1
    with pytest.raises(CodecError):
        decode_state(packed(m))
    outcome, job = apply(job, TimeoutAttempt(JID, 1), T0 + 10, 9)
    assert isinstance(outcome.event, AttemptTimedOut) and outcome.event.requeued
    m = msgpack.unpackb(encode_state(outcome.event, job))
    m["e"]["rq"] = False
    with pytest.raises(CodecError):
        decode_state(packed(m))


def test_encode_refuses_what_cannot_be_decoded():
    outcome, job = apply(None, Add(JID, "q", 10, 100, b"p"), T0, 7)
    with pytest.raises(CodecError):
        encode_command("add")  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        encode_command(Delete(JID), node="n" * 256)
    with pytest.raises(CodecError):
        encode_command(Delete(JID), request_id=-1)
    with pytest.raises(CodecError):
        encode_command(Delete(JID), request_id=2**64)
    with pytest.raises(CodecError):
        encode_state(outcome.event, None)  # Added leaves a live job
    with pytest.raises(CodecError):
        encode_state(Deleted(JID, T0, 8), job)
    with pytest.raises(CodecError):
        encode_state(Completed(JID, T0, 8, b""), job)  # job is NEW at version 7
    with pytest.raises(CodecError):
        encode_state(job, job)  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        encode_job(outcome)  # type: ignore[arg-type]


def test_added_event_needs_the_records_job():
    outcome, job = apply(None, Add(JID, "q", 10, 100, b"p"), T0, 7)
    m = msgpack.unpackb(encode_state(outcome.event, job))
    m["j"] = None
    with pytest.raises(CodecError):
        decode_state(packed(m))
    other = dataclasses.replace(job, payload=b"other")
    with pytest.raises(CodecError):
        encode_state(Added(JID, T0, 7, job), other)


# ------------------------------------------------------------------ fuzzing decoders


@given(st.binary(max_size=200))
@settings(max_examples=500)
def test_arbitrary_bytes_never_raise_anything_but_codec_error(data):
    assert_decodes_or_codec_error(decode_command, data)
    assert_decodes_or_codec_error(decode_state, data)
    assert_decodes_or_codec_error(decode_job, data)


@given(msgpack_values)
@settings(max_examples=500)
def test_arbitrary_msgpack_never_raises_anything_but_codec_error(value):
    data = packed(value)
    assert_decodes_or_codec_error(decode_command, data)
    assert_decodes_or_codec_error(decode_state, data)
    assert_decodes_or_codec_error(decode_job, data)


@st.composite
def byte_mutations(draw, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        if not buf:
            buf.append(draw(st.integers(0, 255)))
            continue
        i = draw(st.integers(0, len(buf) - 1))
        if op == "flip":
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            buf[i] = draw(st.integers(0, 255))
        elif op == "insert":
            buf.insert(i, draw(st.integers(0, 255)))
        elif op == "delete":
            del buf[i]
        else:
            del buf[i:]
    return bytes(buf)


@given(st.data(), any_commands, nodes, request_ids)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_command_records_decode_validly_or_raise_codec_error(
    data, command, node, request_id
):
    original = encode_command(command, node=node, request_id=request_id)
    mutated = data.draw(byte_mutations(original))
    try:
        decoded = decode_command(mutated)
    except CodecError:
        return
    # Whatever decodes is a valid command that round-trips.
    assert decode_command(
        encode_command(decoded.command, node=decoded.node, request_id=decoded.request_id)
    ) == decoded


@given(st.data(), state_records())
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_state_records_decode_validly_or_raise_codec_error(data, record):
    mutated = data.draw(byte_mutations(encode_state(*record)))
    try:
        event, job = decode_state(mutated)
    except CodecError:
        return
    assert decode_state(encode_state(event, job)) == (event, job)


# Fields a command record may leave out (eventq's extensions: absent means the default,
# so that records of workq's commands keep their bytes).
OPTIONAL_COMMAND_KEYS = {
    CommandType.ADD: {"b", "af", "tg", "sc"}, CommandType.SCHEDULE: {"b", "af", "tg", "sc"},
    CommandType.TOUCH: {"r", "sc"}, CommandType.COMPLETE: {"sc"}, CommandType.DELETE: {"sc"},
    CommandType.RELEASE_ATTEMPT: {"c"}, CommandType.UPSTREAM: {"x"},
    CommandType.FAIL: {"fd", "sc"}, CommandType.DEPEND: {"sc"},
    CommandType.RETRY: {"dl", "sc"}, CommandType.RECUR: {"b", "tg", "sc"},
    CommandType.UNRECUR: {"sc"},
}


@given(st.data(), any_commands, msgpack_values)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_structurally_mutated_command_maps(data, command, value):
    m = msgpack.unpackb(encode_command(command))
    key = data.draw(st.sampled_from(sorted(m)))
    op = data.draw(st.sampled_from(["drop", "retype", "extra"]))
    if op == "drop" and command.type is CommandType.UPSTREAM and key == "x":
        del m[key]  # a notice's result: absent only for outcomes that carry none
        with pytest.raises(CodecError):
            decode_command(packed(m))
    elif op == "drop" and key in OPTIONAL_COMMAND_KEYS.get(command.type, ()):
        del m[key]  # an optional field: its default, so another valid command
        decoded = decode_command(packed(m)).command
        assert decoded != command and type(decoded) is type(command)
    elif op == "drop":
        del m[key]
        with pytest.raises(CodecError):
            decode_command(packed(m))
    elif op == "extra":
        extra = data.draw(st.sampled_from(["zz", "j", "e", "ver", "w"]))
        m[extra] = value
        with pytest.raises(CodecError):
            decode_command(packed(m))
    else:
        assume(value != m[key] or type(value) is not type(m[key]))
        m[key] = value
        try:
            decoded = decode_command(packed(m))
        except CodecError:
            return
        # Only a value of the right type and range can be accepted.
        assert type(value) is type(msgpack.unpackb(encode_command(command))[key])
        assert decode_command(encode_command(decoded.command)).command == decoded.command


# Job fields a state record may leave out (present only when -backoff is set, or for a
# job of a workflow, so that workq's jobs keep their record bytes).
OPTIONAL_JOB_KEYS = {"b", "rn", "rt", "up", "ca", "rl", "fp", "fm", "g", "tg", "dt", "er", "sc"}


@given(st.data(), state_records(), msgpack_values)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_structurally_mutated_state_maps(data, record, value):
    m = msgpack.unpackb(encode_state(*record))
    where = data.draw(st.sampled_from([k for k in ("e", "j") if m[k] is not None]))
    inner = m[where]
    key = data.draw(st.sampled_from(sorted(inner)))
    if data.draw(st.booleans()):
        del inner[key]
        if where == "j" and key in OPTIONAL_JOB_KEYS:
            # A backoff field left out means its default (docs/protocol.md, "-backoff"):
            # another job, valid unless its other fields now contradict it.
            try:
                event, job = decode_state(packed(m))
            except CodecError:
                return
            assert decode_state(encode_state(event, job)) == (event, job)
            return
        with pytest.raises(CodecError):
            decode_state(packed(m))
    else:
        inner[key] = value
        try:
            event, job = decode_state(packed(m))
        except CodecError:
            return
        assert decode_state(encode_state(event, job)) == (event, job)


# --------------------------------------------------------------- the field tables


def table_fields(table):
    for f in table:
        yield from table_fields(f.fields) if isinstance(f, codec.Nested) else [f]


ALL_TABLES = {
    **{f"command {t.name}": table for t, table in codec.COMMAND_FIELDS.items()},
    "correlation": codec.CORRELATION_FIELDS,
    **{f"event {t.name}": codec.EVENT_COMMON_FIELDS + table
       for t, table in codec.EVENT_FIELDS.items()},
    "job": codec.JOB_FIELDS,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ALL_TABLES))
def test_the_docstring_shows_every_field_of_every_table(name):
    """The module docstring's tables are made of the field tables (help() shows them)."""
    doc = codec.__doc__
    for f in ALL_TABLES[name]:
        shown = f.what if isinstance(f, codec.Nested) else f"{f.attr} ({f.kind.name})"
        assert re.search(rf"^{re.escape(f.key)} +{re.escape(shown)}", doc, re.M), (name, f)
    assert max(map(len, doc.splitlines())) <= 88


def test_the_docstring_says_what_absence_means():
    rows: dict[str, str] = {}  # each key's first row: commands, events, then jobs
    for line in codec.__doc__.splitlines():
        if line[:1].isalpha():
            rows.setdefault(line.split()[0], line)
    assert "optional (absent: 0)" in rows["b"]
    assert "all but pause, resume" in rows["i"]
    assert "nil for None" in rows["w"]
    assert rows["o"].startswith("o    node (") and "(absent or nil: None)" in codec.__doc__


def test_optional_command_keys_are_the_tables():
    """The tables say which keys a command may leave out; this test's list says it again
    (the map's own keys: an import's snapshot is the job map)."""
    derived = {
        t: {f.key for f in table
            if isinstance(f, codec.Field) and f.absent is not codec.Absent.REQUIRED}
        for t, table in codec.COMMAND_FIELDS.items()
    }  # fmt: skip
    assert {t: keys for t, keys in derived.items() if keys} == OPTIONAL_COMMAND_KEYS
    job = {f.key for f in codec.JOB_FIELDS if f.absent is not codec.Absent.REQUIRED}
    assert job == OPTIONAL_JOB_KEYS


def test_a_table_that_misses_an_attribute_does_not_compile():
    """A dataclass attribute added without its row (or a row of no attribute) is found
    when the module loads, not when a record is lost."""
    add = codec.COMMAND_FIELDS[CommandType.ADD]
    with pytest.raises(AssertionError):
        codec._compiled(Add, add[:-1], frozenset())  # no backoff_ms
    with pytest.raises(AssertionError):
        codec._compiled(Add, add + (codec.Field("z", "zeal", codec.INT),), frozenset())
    codec._compiled(Add, add, frozenset())


def test_the_snapshot_is_the_job_map_without_id_workflow_and_version():
    left_out = [f.attr for f in codec.JOB_FIELDS if f not in codec.SNAPSHOT_FIELDS]
    assert left_out == ["id", *WORKFLOW_FIELD_NAMES, "version"]
    assert (codec.JOB_FIELDS[0].attr, codec.JOB_FIELDS[-1].attr) == ("id", "version")


@given(queue_commands, nodes, request_ids)
def test_queue_command_round_trip(command, node, request_id):
    data = encode_command(command, node=node, request_id=request_id)
    assert decode_command(data) == DecodedCommand(command, node, request_id)
    assert "i" not in msgpack.unpackb(data)


def test_a_field_added_later_is_one_row_and_keeps_old_records_bytes():
    """What adding a field takes: its attribute, and its row (here, optional)."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged:
        job_id: uuid.UUID
        attempt: int
        tag: str = ""

    table = (
        codec.Field("i", "job_id", codec.UUID_BYTES),
        codec.Field("k", "attempt", codec.INT),
        codec.Field("g", "tag", codec.STR, absent=""),  # the new row
    )
    tagged = codec._compiled(Tagged, table, frozenset())
    before, after = {}, {}
    tagged.write(Tagged(JID, 1), None, before)
    tagged.write(Tagged(JID, 1, "x"), None, after)
    assert before == {"i": JID.bytes, "k": 1} and after == {**before, "g": "x"}
    assert tagged.read(before, None) == Tagged(JID, 1)
    assert tagged.read(after, None) == Tagged(JID, 1, "x")
    with pytest.raises(CodecError, match="field 'g' must be a str, got int"):
        tagged.read({**before, "g": 5}, None)
    assert tagged.keys == {"i", "k", "g"}
