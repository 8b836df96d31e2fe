"""``step``: one command applied, with every failure contained as a rejection
(docs/architecture.md, "Hostile inputs")."""

from __future__ import annotations

import uuid

import msgpack
import pytest

from eventq.core import Add, Complete, correlation_of, decode_state, encode_command
from eventq.core.machine import Accepted, Ignored, Rejected
from eventq.core.step import MAX_REASON_CHARS, step
from eventq.errors import ServerError

JID = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c4")
T0 = 1_790_000_000_000


def add(payload: bytes = b"p") -> Add:
    return Add(JID, "q", 1000, 60000, payload)


def test_an_accepted_command_carries_the_record_to_store():
    result = step(None, add(), T0, 5)
    assert isinstance(result.outcome, Accepted) and not result.removes
    assert decode_state(result.record) == (result.outcome.event, result.job)


def test_a_state_record_over_the_limit_is_rejected_and_nothing_changes():
    result = step(None, add(b"x" * 300), T0, 5, max_state_record_bytes=200)
    assert isinstance(result.outcome, Rejected) and result.record is None
    assert result.job is None
    error = result.outcome.error
    assert isinstance(error, ServerError)
    assert "state record would be" in error.text and "over the limit of 200" in error.text


def test_a_record_that_grows_over_the_limit_leaves_the_job_as_it_was():
    job = step(None, add(b"x" * 100), T0, 5, max_state_record_bytes=400).job
    result = step(job, Complete(JID, b"r" * 300), T0 + 1, 6, max_state_record_bytes=400)
    assert isinstance(result.outcome, Rejected) and result.job == job


def test_whatever_the_core_raises_becomes_a_one_line_server_error():
    result = step(None, "not a command", T0, 5)  # type: ignore[arg-type]
    assert isinstance(result.outcome, Rejected)
    text = result.outcome.error.text
    assert text.startswith("the command cannot be applied: ValueError")
    assert "\r" not in text and "\n" not in text and len(text) < MAX_REASON_CHARS + 40


def test_ignored_and_client_rejections_pass_through():
    job = step(None, add(), T0, 5).job
    assert isinstance(step(job, add(), T0, 5).outcome, Ignored)  # already applied
    duplicate = step(job, add(), T0, 6).outcome
    assert isinstance(duplicate, Rejected) and duplicate.error.code == "CLIENT-ERROR"


@pytest.mark.parametrize("data, issuer", [
    (encode_command(add(), node="n1", request_id=7), ("n1", 7)),
    (msgpack.packb({"v": 99, "o": "n1", "q": 3}), ("n1", 3)),  # not a valid command
    (msgpack.packb({"o": "n1"}), (None, None)),
    (msgpack.packb([1, 2]), (None, None)),
    (b"\xc1 not msgpack", (None, None)),
    (None, (None, None)),
])
def test_the_issuer_of_any_record_is_found_if_it_is_there(data, issuer):
    assert correlation_of(data) == issuer
