"""The one table of sizes (eventq/limits.py) holds for the largest records eventq can
write, and every layer that has a size takes it from there (docs/architecture.md,
"Limits")."""

from __future__ import annotations

import uuid

from eventq.core import (
    Add,
    Complete,
    Fail,
    Import,
    StartAttempt,
    Upstream,
    UpstreamOutcome,
    apply,
    decode_command,
    decode_state,
    encode_command,
    encode_state,
)
from eventq.kafka.topics import TopicNames, eventq_topics
from eventq.limits import (
    KAFKA_MESSAGE_BYTES,
    MAX_AFTER_IDS,
    MAX_ATTEMPTS_LIMIT,
    MAX_BACKOFF_MS,
    MAX_COMMAND_RECORD_BYTES,
    MAX_FAILS_LIMIT,
    MAX_NAME_BYTES,
    MAX_NODE_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_RECORD_FIELDS_BYTES,
    MAX_REQUEST_ID,
    MAX_RESULT_BYTES,
    MAX_STATE_RECORD_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
    MAX_TIME_MS,
    MAX_TTL_MS,
    MAX_TTR_MS,
    MIN_PRIORITY,
    MIN_TOPIC_MESSAGE_BYTES,
)
from eventq.run.localkafka.broker import BrokerConfig, server_properties

JID = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c4")
NAME = "n" * MAX_NAME_BYTES
NODE = "o" * MAX_NODE_BYTES
PAYLOAD = b"p" * MAX_PAYLOAD_BYTES
RESULT = b"r" * MAX_RESULT_BYTES
T0 = 1_790_000_000_000
# 16 tags of 64 bytes (docs/workflows.md, "Tags"): in the largest records too.
TAGS = tuple(f"{n:02d}" + "t" * (MAX_TAG_BYTES - 2) for n in range(MAX_TAGS))


def largest_finished_job(final_command):
    add = Add(JID, NAME, MAX_TTR_MS, MAX_TTL_MS, PAYLOAD, MIN_PRIORITY, MAX_ATTEMPTS_LIMIT, 1,
              tags=TAGS)
    _, job = apply(None, add, T0, 2**62)
    outcome, job = apply(job, final_command, T0 + 1, 2**62 + 1)
    return outcome.event, job


def test_the_largest_state_records_fit_and_hold_the_result_once():
    for command in (Complete(JID, RESULT), Fail(JID, RESULT)):
        event, job = largest_finished_job(command)
        record = encode_state(event, job)
        fields = len(record) - MAX_PAYLOAD_BYTES - MAX_RESULT_BYTES
        assert 0 < fields <= MAX_RECORD_FIELDS_BYTES, fields
        assert len(record) <= MAX_STATE_RECORD_BYTES
        decoded_event, decoded_job = decode_state(record)
        assert decoded_event == event and decoded_job == job


def largest_finished_dependent():
    """A dependent of 100 upstreams and 16 tags, all completed, leased and completed
    itself."""
    upstreams = tuple(uuid.UUID(int=2**127 + n) for n in range(MAX_AFTER_IDS))
    add = Add(JID, NAME, MAX_TTR_MS, MAX_TTL_MS, PAYLOAD, MIN_PRIORITY, MAX_ATTEMPTS_LIMIT,
              MAX_FAILS_LIMIT, MAX_BACKOFF_MS, upstreams, TAGS)
    at = 2**62
    _, job = apply(None, add, T0, at)
    for upstream in upstreams:
        notice = Upstream(JID, 2**62, upstream, UpstreamOutcome.COMPLETED, 2**62, MAX_TIME_MS, b"")
        at += 1
        _, job = apply(job, notice, MAX_TIME_MS, at)
    _, job = apply(job, StartAttempt(JID, 1), MAX_TIME_MS, at + 1)
    outcome, job = apply(job, Complete(JID, RESULT), MAX_TIME_MS, at + 2)
    return add, outcome.event, job


def test_the_largest_dependents_records_fit():
    add, event, job = largest_finished_dependent()
    record = encode_state(event, job)
    assert len(record) - MAX_PAYLOAD_BYTES - MAX_RESULT_BYTES <= MAX_RECORD_FIELDS_BYTES
    assert len(record) <= MAX_STATE_RECORD_BYTES and decode_state(record) == (event, job)
    command = encode_command(add, node=NODE, request_id=MAX_REQUEST_ID)
    assert len(command) - MAX_PAYLOAD_BYTES <= MAX_RECORD_FIELDS_BYTES
    assert decode_command(command).command == add


def test_the_largest_command_record_fits():
    _, job = largest_finished_job(Complete(JID, RESULT))
    record = encode_command(Import.from_job(job), node=NODE, request_id=MAX_REQUEST_ID)
    assert len(record) - MAX_PAYLOAD_BYTES - MAX_RESULT_BYTES <= MAX_RECORD_FIELDS_BYTES
    assert len(record) <= MAX_COMMAND_RECORD_BYTES
    assert decode_command(record).command == Import.from_job(job)


def test_topics_broker_and_producers_take_their_sizes_from_the_table(tmp_path):
    commands, jobs, bulk = eventq_topics(TopicNames(), 8)
    for spec in (commands, jobs):
        assert int(spec.configs["max.message.bytes"]) == KAFKA_MESSAGE_BYTES
    # A bulk record becomes a slice record of the command log, a few bytes larger.
    assert MIN_TOPIC_MESSAGE_BYTES <= int(bulk.configs["max.message.bytes"]) < KAFKA_MESSAGE_BYTES
    props = server_properties(BrokerConfig(home=tmp_path))
    assert int(props["message.max.bytes"]) == KAFKA_MESSAGE_BYTES
    assert KAFKA_MESSAGE_BYTES >= MIN_TOPIC_MESSAGE_BYTES > MAX_STATE_RECORD_BYTES


def test_faust_app_producer_and_consumer_take_the_largest_record(tmp_path):
    from eventq.settings import Settings
    from streams.faust.app import build_streams

    streams = build_streams(Settings(data_dir=tmp_path))
    conf = streams.app.conf
    assert conf.producer_max_request_size == KAFKA_MESSAGE_BYTES
    assert conf.consumer_max_fetch_size == KAFKA_MESSAGE_BYTES
