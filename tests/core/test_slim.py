"""The slim projection of a state record (eventq/core/slim.py) equals the projection of
its fully decoded job, and malformed records are refused as the full decoder does."""

from __future__ import annotations

import uuid

import msgpack
import pytest
from hypothesis import given, settings

from eventq.core import CodecError, decode_state, encode_state
from eventq.core.batch import POSITIONS_PER_OFFSET
from eventq.core.slim import project_state, slim_of
from support.core_strategies import state_records


@settings(max_examples=300)
@given(state_records())
def test_projection_of_a_record_is_the_projection_of_its_decoded_job(record):
    event, job = record
    data = encode_state(event, job)
    _, decoded = decode_state(data)
    expected = None if decoded is None else slim_of(decoded, event.at_ms)
    assert project_state(data) == expected


@given(state_records())
def test_a_version_1_record_counts_its_version_in_offsets(record):
    event, job = record
    if job is None:
        return
    v2 = msgpack.unpackb(encode_state(event, job))
    offset = job.version // POSITIONS_PER_OFFSET
    v1 = {"v": 1, "e": dict(v2["e"], o=offset), "j": dict(v2["j"], ver=offset)}
    slim = project_state(msgpack.packb(v1, use_bin_type=True))
    assert slim is not None and slim.version == offset * POSITIONS_PER_OFFSET


JOB_ID = uuid.UUID(int=7).bytes  # one fixed id: parameter ids must be the same in every
# collection (make test's xdist workers each collect, and must agree)


def _record(**job_fields) -> bytes:
    job = {"i": JOB_ID, "n": "q", "s": 0, "p": 0, "c": 1, "w": None,
           "e": None, "ld": None, "at": 0, "ver": 5}
    job.update(job_fields)
    return msgpack.packb({"v": 2, "e": {}, "j": job}, use_bin_type=True)


def test_a_well_formed_record_projects():
    slim = project_state(_record(n="emails", p=-3, w=9, e=10, ld=None))
    assert (slim.name, slim.priority, slim.scheduled_ms, slim.expires_ms) == ("emails", -3, 9, 10)


@pytest.mark.parametrize("data", [
    b"\xc1 not msgpack",
    b"\x93\x01\x02",  # a truncated array
    msgpack.packb([1, 2]),
    msgpack.packb({"v": 3, "j": None}),
    msgpack.packb({"v": True, "j": None}),
    msgpack.packb({"v": 2}),
    msgpack.packb({"v": 2, "j": [1]}),
    _record(i=b"short"),
    _record(i="not bytes"),
    _record(n=""),
    _record(n=7),
    _record(s=9),
    _record(s="0"),
    _record(p=None),
    _record(c=1.5),
    _record(w="soon"),
    _record(at=None),
    _record(ver=None),
], ids=repr)
def test_a_malformed_record_is_a_codec_error(data):
    with pytest.raises(CodecError):
        project_state(data)


def test_a_record_without_a_job_projects_to_nothing():
    assert project_state(msgpack.packb({"v": 2, "e": {}, "j": None})) is None
