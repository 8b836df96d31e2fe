"""The enqueue's row functions (eventq.spark.enqueue_rows) and derived ids
(eventq.spark.ids), without Spark: rows become the gateway's commands or rejects."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from eventq.core import Add, Schedule, decode_command, encode_command
from eventq.core.partitioner import job_key, partition_for_key
from eventq.limits import MAX_AFTER_IDS, MAX_PAYLOAD_BYTES
from eventq.protocol.values import parse_time_ms
from eventq.spark import enqueue_rows
from eventq.spark.ids import DEFAULT_NAMESPACE, canonical_key, derive_job_id, namespace_uuid

pytestmark = [pytest.mark.spark]

NOW_MS = 1_800_000_000_000


def spec(**changes) -> enqueue_rows.EnqueueSpec:
    base = dict(
        id_mode=enqueue_rows.ID_FROM_COLUMN, namespace=DEFAULT_NAMESPACE.bytes, partitions=8,
        now_ms=NOW_MS, name="q", ttr_ms=1000, ttl_ms=60_000,
    )
    return enqueue_rows.EnqueueSpec(**{**base, **changes})


def row(s: enqueue_rows.EnqueueSpec, **cells):
    fields = ("raw_id", "key", "name", "payload", "ttr", "ttl", "priority",
              "max_attempts", "max_fails", "time", "after", "after_names", "tags")
    return enqueue_rows.encode_row(s, *(cells.get(f) for f in fields))


def reject_of(s: enqueue_rows.EnqueueSpec, **cells) -> tuple[str, str]:
    with pytest.raises(enqueue_rows.Reject) as caught:
        row(s, **cells)
    return caught.value.field, caught.value.reason


# --------------------------------------------------------------------------- ids


def test_derived_ids_are_deterministic_version4_and_separate_queues_and_keys():
    first = derive_job_id(DEFAULT_NAMESPACE, "q", ["42", None])
    assert first == derive_job_id(DEFAULT_NAMESPACE, "q", ["42", None])
    assert first.version == 4 and first.variant == uuid.RFC_4122
    others = {
        derive_job_id(DEFAULT_NAMESPACE, "other", ["42", None]),
        derive_job_id(DEFAULT_NAMESPACE, "q", ["42", ""]),
        derive_job_id(DEFAULT_NAMESPACE, "q", ["42"]),
        derive_job_id(namespace_uuid("tenant-a"), "q", ["42", None]),
    }
    assert first not in others and len(others) == 4
    assert canonical_key("q", ["a,b", "c"]) != canonical_key("q", ["a", "b,c"])
    for i in range(1000):
        job_id = derive_job_id(DEFAULT_NAMESPACE, "q", [str(i)])
        assert job_id.version == 4 and job_id.variant == uuid.RFC_4122
    with pytest.raises(TypeError):
        canonical_key("q", [42])  # values are Spark's text of the cell
    assert namespace_uuid(str(DEFAULT_NAMESPACE)) == DEFAULT_NAMESPACE


# ----------------------------------------------------------------------- encoding


def test_a_valid_row_is_the_gateways_add_record_in_its_murmur2_partition():
    job_id = uuid.uuid4()
    s = spec(priority_from_column=True, max_attempts_from_column=True)
    key, value, partition, text = row(
        s, raw_id=str(job_id).upper(), payload=b"data", priority="-7", max_attempts="3"
    )
    assert key == job_key(job_id) == str(job_id).encode()
    assert text == str(job_id)
    assert value == encode_command(Add(job_id, "q", 1000, 60_000, b"data", -7, 3, 0))
    assert decode_command(value).node is None and decode_command(value).request_id is None
    assert partition == partition_for_key(key, 8)


def test_a_row_with_a_time_is_a_schedule_and_null_time_an_add():
    job_id = uuid.uuid4()
    s = spec(time_kind=enqueue_rows.TIME_AS_TEXT)
    at = NOW_MS + 5000
    _, value, _, _ = row(s, raw_id=str(job_id), payload=b"", time="2027-01-15T08:00:00.250Z")
    command = decode_command(value).command
    assert isinstance(command, Schedule)
    assert command.time_ms == parse_time_ms("2027-01-15T08:00:00.250Z")
    _, value, _, _ = row(s, raw_id=str(job_id), payload=b"", time=str(at))  # epoch ms text
    assert decode_command(value).command == Schedule(job_id, "q", 1000, 60_000, at, b"")
    _, value, _, _ = row(spec(time_kind=enqueue_rows.TIME_AS_MS), raw_id=str(job_id), payload=b"",
                         time=str(at))
    assert decode_command(value).command.time_ms == at
    _, value, _, _ = row(s, raw_id=str(job_id), payload=b"x", time=None)
    assert isinstance(decode_command(value).command, Add)


def test_keys_derive_the_id_from_the_name_and_key_values():
    s = spec(id_mode=enqueue_rows.ID_FROM_KEYS)
    key, _, _, text = row(s, key=["7", "x"], payload=b"")
    assert text == str(derive_job_id(DEFAULT_NAMESPACE, "q", ["7", "x"]))
    key2, *_ = row(s, key=["7", "x"], payload=b"other payload")
    assert key2 == key


@pytest.mark.parametrize(
    "changes, cells, field, reason",
    [
        ({}, {"raw_id": "not-a-uuid"}, "id", "Invalid ID"),
        ({}, {"raw_id": "6ba7b810-9dad-11d1-80b4-00c04fd430c4"}, "id", "Invalid ID"),  # v1
        ({}, {"raw_id": None}, "id", "missing (null)"),
        ({}, {"raw_id": b"\x00" * 15}, "id", "Invalid ID"),
        ({"name": None}, {"name": "bad name"}, "name", "Invalid Name"),
        ({"name": None}, {"name": "x" * 256}, "name", "Invalid Name"),
        ({"name": None}, {"name": None}, "name", "missing (null)"),
        ({"ttr_ms": None}, {"ttr": "0"}, "ttr", "Invalid TTR"),
        ({"ttr_ms": None}, {"ttr": "86400001"}, "ttr", "Invalid TTR"),
        ({"ttr_ms": None}, {"ttr": "5.0"}, "ttr", "Invalid TTR"),
        ({"ttr_ms": None}, {"ttr": None}, "ttr", "missing (null)"),
        ({"ttl_ms": None}, {"ttl": "0"}, "ttl", "Invalid TTL"),
        ({"ttl_ms": None}, {"ttl": str(2**64)}, "ttl", "Invalid TTL"),
        ({"priority_from_column": True}, {"priority": str(2**31)}, "priority", "Invalid Priority"),
        ({"max_attempts_from_column": True}, {"max_attempts": "256"}, "max-attempts", "Invalid Max Attempts"),
        ({"max_fails_from_column": True}, {"max_fails": "-1"}, "max-fails", "Invalid Max Fails"),
        ({"time_kind": enqueue_rows.TIME_AS_TEXT}, {"time": "2030-02-30T00:00:00Z"}, "time", "Invalid Time"),
        ({"time_kind": enqueue_rows.TIME_AS_TEXT}, {"time": str(NOW_MS - 60_001)}, "time", "already past"),
        ({}, {"payload": b"x" * (MAX_PAYLOAD_BYTES + 1)}, "payload", "more than 1048576"),
    ],
)
def test_rows_the_gateway_would_refuse_are_rejects_with_a_reason(changes, cells, field, reason):
    cells = {"raw_id": str(uuid.uuid4()), "payload": b"", **cells}
    got_field, got_reason = reject_of(spec(**changes), **cells)
    assert got_field == field and reason in got_reason


def upstreams_of(s: enqueue_rows.EnqueueSpec, **cells) -> tuple[uuid.UUID, ...]:
    _, value, _, _ = row(s, **{"raw_id": str(uuid.uuid4()), "payload": b"", **cells})
    return decode_command(value).command.after


def test_upstream_ids_in_any_spelling_are_the_adds_after_in_their_order():
    ups = [uuid.uuid4() for _ in range(3)]
    spellings = [str(ups[0]).upper(), "{%s}" % ups[1], f"urn:uuid:{ups[2].hex}"]
    s = spec(after_kind=enqueue_rows.AFTER_IDS)
    assert upstreams_of(s, after=spellings) == tuple(ups)  # an array (from Arrow: numpy)
    assert upstreams_of(s, after=np.array(spellings, dtype=object)) == tuple(ups)
    assert upstreams_of(s, after=",".join(spellings)) == tuple(ups)  # the protocol's text
    # None: null, or an empty array (a root of the DAG); the add has no after at all
    for none in (None, [], np.array([], dtype=object)):
        _, value, _, _ = row(s, raw_id=str(ups[0]), payload=b"", after=none)
        assert value == encode_command(Add(ups[0], "q", 1000, 60_000, b""))
    job_id = uuid.uuid4()
    _, value, _, _ = row(spec(after_kind=enqueue_rows.AFTER_IDS, time_kind=enqueue_rows.TIME_AS_MS),
                         raw_id=str(job_id), payload=b"", time=str(NOW_MS), after=spellings)
    assert decode_command(value).command == Schedule(job_id, "q", 1000, 60_000, NOW_MS, b"",
                                                     after=tuple(ups))


def test_upstream_keys_derive_ids_as_the_rows_own_keys_do():
    s = spec(id_mode=enqueue_rows.ID_FROM_KEYS, after_kind=enqueue_rows.AFTER_KEYS, key_count=1)

    def key_id(value: str, name: str = "q") -> uuid.UUID:
        return derive_job_id(DEFAULT_NAMESPACE, name, [value])

    _, _, _, own = row(s, key=["7"], payload=b"")
    assert own == str(key_id("7"))
    assert upstreams_of(s, key=["9"], after=[["7"], ["8"]]) == (key_id("7"), key_id("8"))
    assert upstreams_of(s, key=["9"], after="7,8") == (key_id("7"), key_id("8"))  # CSV text
    assert upstreams_of(s, key=["9"], after=[["7"]], after_names=["other"]) == (
        key_id("7", "other"),)  # an upstream in another queue
    assert upstreams_of(s, key=["9"], after=[["7"]], after_names=[None]) == (key_id("7"),)
    two = spec(id_mode=enqueue_rows.ID_FROM_KEYS, after_kind=enqueue_rows.AFTER_KEYS, key_count=2)
    assert upstreams_of(two, key=["a", None], after=[["b", None]]) == (
        derive_job_id(DEFAULT_NAMESPACE, "q", ["b", None]),)


def test_too_many_upstreams_are_refused_and_exactly_the_limit_is_not():
    s = spec(after_kind=enqueue_rows.AFTER_IDS)
    hundred = [str(uuid.uuid4()) for _ in range(MAX_AFTER_IDS)]
    assert len(upstreams_of(s, after=hundred)) == MAX_AFTER_IDS
    field, reason = reject_of(s, raw_id=str(uuid.uuid4()), payload=b"",
                              after=hundred + [str(uuid.uuid4())])
    assert (field, reason.split(", got")[0]) == ("after", "Invalid After (101 upstreams, at most 100)")


A, B = str(uuid.uuid4()), str(uuid.uuid4())
SELF = "0b1d6b5e-7f9a-4c55-9f3b-1b2c3d4e5f60"


@pytest.mark.parametrize(
    "kind, cells, reason",
    [
        (enqueue_rows.AFTER_IDS, {"after": [A, "not-a-uuid"]}, "upstream 2 is not a version-4 UUID"),
        (enqueue_rows.AFTER_IDS, {"after": ["6ba7b810-9dad-11d1-80b4-00c04fd430c4"]},  # version 1
         "upstream 1 is not a version-4 UUID"),
        (enqueue_rows.AFTER_IDS, {"after": f"{A},,{B}"}, "upstream 2 is empty"),
        (enqueue_rows.AFTER_IDS, {"after": f"{A},"}, "upstream 2 is empty"),
        (enqueue_rows.AFTER_IDS, {"after": ""}, "upstream 1 is empty"),
        (enqueue_rows.AFTER_IDS, {"after": [A, None]}, "upstream 2 is empty"),
        (enqueue_rows.AFTER_IDS, {"after": [A, ""]}, "upstream 2 is empty"),
        (enqueue_rows.AFTER_IDS, {"after": [f"{A},{B}"]}, "upstream 1 is not a version-4 UUID"),
        (enqueue_rows.AFTER_IDS, {"after": [A, "{%s}" % A.upper()]}, "upstream 2 repeats upstream 1"),
        (enqueue_rows.AFTER_IDS, {"after": [A, SELF.upper()]}, "upstream 2 is the job itself"),
        (enqueue_rows.AFTER_KEYS, {"after": [["1"], ["0"]]}, "upstream 2 is the job itself"),
        (enqueue_rows.AFTER_KEYS, {"after": [["1"], ["1"]]}, "upstream 2 repeats upstream 1"),
        (enqueue_rows.AFTER_KEYS, {"after": [["1"], None]}, "upstream 2 is empty"),
        (enqueue_rows.AFTER_KEYS, {"after": "1,"}, "upstream 2 is empty"),
        (enqueue_rows.AFTER_KEYS, {"after": [["1", "2"]]}, "upstream 1 has 2 key values, not 1"),
        (enqueue_rows.AFTER_KEYS, {"after": [["1"]], "after_names": ["bad name"]},
         "upstream 1's queue: Invalid Name"),
    ],
)
def test_malformed_upstream_lists_are_rejects_saying_which_rule_they_break(kind, cells, reason):
    """docs/workflows.md, "Values and checks": 1-100 ids, no empty element, each a
    version-4 UUID, all distinct as values, none the job's own: ``Invalid After``."""
    if kind == enqueue_rows.AFTER_KEYS:
        s = spec(id_mode=enqueue_rows.ID_FROM_KEYS, after_kind=kind, key_count=1)
        cells = {"key": ["0"], **cells}
    else:
        s = spec(after_kind=kind)
        cells = {"raw_id": SELF, **cells}
    with pytest.raises(enqueue_rows.Reject) as caught:
        row(s, payload=b"", **cells)
    assert caught.value.field == "after"
    assert caught.value.reason.startswith(f"Invalid After ({reason}), got ")
    assert caught.value.job_id is not None  # the reject names the row's job


def test_an_upstream_list_the_protocol_refuses_is_refused_here_too():
    """The verdict is the protocol's own parser's (values.parse_after): any text it
    refuses is a reject, whatever the explanation finds."""
    from eventq.errors import ClientError
    from eventq.protocol.values import parse_after

    s = spec(after_kind=enqueue_rows.AFTER_IDS)
    for text in (A, f"{A},{B}", f" {A}", f"{A};{B}", "urn:uuid:" + A, A[:-1], A + "0"):
        try:
            parse_after(text)
        except ClientError:
            assert reject_of(s, raw_id=SELF, payload=b"", after=text)[0] == "after"
        else:
            assert upstreams_of(s, after=text)


def test_a_payload_of_exactly_1_mib_is_accepted():
    key, value, _, _ = row(spec(), raw_id=str(uuid.uuid4()), payload=b"x" * MAX_PAYLOAD_BYTES)
    assert len(decode_command(value).command.payload) == MAX_PAYLOAD_BYTES


def test_encode_rows_returns_one_struct_row_per_input_row():
    import pandas as pd

    good, bad = uuid.uuid4(), "nope"
    series = [pd.Series([str(good), bad])] + [pd.Series([None, None])] * 2 + [
        pd.Series([b"a", b"b"])] + [pd.Series([None, None])] * 9
    frame = enqueue_rows.encode_rows(spec(), *series)
    assert list(frame.columns) == list(enqueue_rows.ENCODED_FIELDS)
    assert frame["job_id"].tolist() == [str(good), None]
    assert frame["reject_field"].tolist() == [None, "id"]
    assert frame["partition"].tolist()[0] == partition_for_key(str(good).encode(), 8)
    assert pd.isna(frame["partition"].tolist()[1]) and frame["key"].tolist()[1] is None


def tags_of(s: enqueue_rows.EnqueueSpec, **cells) -> tuple[str, ...]:
    _, value, _, _ = row(s, raw_id=str(uuid.uuid4()), payload=b"", **cells)
    return decode_command(value).command.tags


def test_tags_from_a_column_or_a_constant_are_the_adds_tags_in_their_order():
    s = spec(tags_from_column=True)
    assert tags_of(s, tags="nightly,etl") == ("nightly", "etl")
    assert tags_of(s, tags=["b", "a.1", "Z-_"]) == ("b", "a.1", "Z-_")
    assert tags_of(s, tags=np.array(["x"], dtype=object)) == ("x",)  # Arrow's array cell
    assert tags_of(s, tags=None) == () and tags_of(s, tags=[]) == ()
    sixteen = [f"{n:02d}" + "t" * 62 for n in range(16)]
    assert tags_of(s, tags=sixteen) == tuple(sixteen)
    assert tags_of(s, tags=",".join(sixteen)) == tuple(sixteen)
    constant = spec(tags=("every", "row"))
    assert tags_of(constant, tags="ignored") == ("every", "row")
    assert tags_of(spec(), tags="not a column") == ()
    # a schedule carries them too
    _, value, _, _ = row(spec(time_kind=enqueue_rows.TIME_AS_MS, tags_from_column=True),
                         raw_id=str(uuid.uuid4()), payload=b"", time=NOW_MS + 5, tags="s")
    assert decode_command(value).command == Schedule(
        decode_command(value).command.job_id, "q", 1000, 60_000, NOW_MS + 5, b"", tags=("s",))


@pytest.mark.parametrize(
    "cells, reason",
    [
        ({"tags": ""}, "tag 1 is empty"),
        ({"tags": "a,,b"}, "tag 2 is empty"),
        ({"tags": "a,"}, "tag 2 is empty"),
        ({"tags": ["a", None]}, "tag 2 is empty"),
        ({"tags": ["a", ""]}, "tag 2 is empty"),
        ({"tags": "a,b,a"}, "tag 3 repeats tag 1"),
        ({"tags": ["x", "x"]}, "tag 2 repeats tag 1"),
        ({"tags": ["a,b"]}, "tag 1 is not 1-64 bytes of [A-Za-z0-9_.-]"),
        ({"tags": "a b"}, "tag 1 is not 1-64 bytes of [A-Za-z0-9_.-]"),
        ({"tags": ["ok", "t" * 65]}, "tag 2 is not 1-64 bytes of [A-Za-z0-9_.-]"),
        ({"tags": ["é"]}, "tag 1 is not 1-64 bytes of [A-Za-z0-9_.-]"),
        ({"tags": [f"t{n}" for n in range(17)]}, "17 tags, at most 16"),
    ],
)
def test_malformed_tags_are_rejects_saying_which_rule_they_break(cells, reason):
    """docs/workflows.md, "Values and checks": 1-16 tags, no empty element, each 1-64
    bytes of [A-Za-z0-9_.-], all distinct: ``Invalid Tags``, with the row and why."""
    with pytest.raises(enqueue_rows.Reject) as caught:
        row(spec(tags_from_column=True), raw_id=SELF, payload=b"", **cells)
    assert caught.value.field == "tags"
    assert caught.value.reason.startswith(f"Invalid Tags ({reason}), got ")
    assert caught.value.job_id == uuid.UUID(SELF)  # the reject names the row's job


def test_tags_are_checked_after_every_other_field():
    """The protocol's field order: -tags is last (a bad after is reported first)."""
    s = spec(tags_from_column=True, after_kind=enqueue_rows.AFTER_IDS)
    assert reject_of(s, raw_id=SELF, payload=b"", after="x", tags="a,a")[0] == "after"
    assert reject_of(s, raw_id="x", payload=b"", tags="a,a")[0] == "id"


def test_a_tags_list_the_protocol_refuses_is_refused_here_too():
    from eventq.errors import ClientError
    from eventq.protocol.values import parse_tags

    s = spec(tags_from_column=True)
    for text in ("a", "a,b", " a", "a;b", "a:b", "-", ".", "a" * 64, "a" * 65, "a,A"):
        try:
            parse_tags(text)
        except ClientError:
            assert reject_of(s, raw_id=SELF, payload=b"", tags=text)[0] == "tags"
        else:
            assert tags_of(s, tags=text) == tuple(text.split(","))


