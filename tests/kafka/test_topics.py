"""eventq creates its two topics with exactly the configs of docs/architecture.md, "The topics"."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from eventq.kafka.topics import (
    TopicNames,
    commands_topic,
    describe_topic,
    ensure_topics,
    eventq_topics,
)
from eventq.limits import KAFKA_MESSAGE_BYTES
from eventq.run.serve import with_existing_partitions
from eventq.settings import Settings

pytestmark = pytest.mark.kafka


def _names(prefix: str) -> TopicNames:
    return TopicNames(commands=f"{prefix}.commands", jobs=f"{prefix}.jobs")


def test_topics_are_created_with_exact_configs(kafka_bootstrap, topic_prefix):
    names = _names(topic_prefix)
    reports = ensure_topics(kafka_bootstrap, eventq_topics(names, partitions=8))
    assert [(r.name, r.created, r.ok) for r in reports] == [
        (names.commands, True, True),
        (names.jobs, True, True),
        (names.bulk, True, True),
    ]
    assert names.bulk == f"{topic_prefix}.bulk"

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    partitions, configs = describe_topic(admin, names.commands)
    assert partitions == 8
    assert configs["message.timestamp.type"] == "LogAppendTime"
    assert configs["cleanup.policy"] == "delete"
    assert configs["retention.ms"] == str(7 * 24 * 3600 * 1000)

    partitions, configs = describe_topic(admin, names.jobs)
    assert partitions == 8
    assert configs["cleanup.policy"] == "compact"

    # The bulk lane: the command log's partitions; its records fit a slice record.
    partitions, configs = describe_topic(admin, names.bulk)
    assert partitions == 8
    assert configs["cleanup.policy"] == "delete"
    assert int(configs["max.message.bytes"]) < KAFKA_MESSAGE_BYTES


def test_creating_again_is_harmless(kafka_bootstrap, topic_prefix):
    specs = eventq_topics(_names(topic_prefix), partitions=3)
    ensure_topics(kafka_bootstrap, specs)
    again = ensure_topics(kafka_bootstrap, specs)
    assert [(r.created, r.ok) for r in again] == [(False, True)] * 3


def test_a_differing_existing_topic_is_reported(kafka_bootstrap, topic_prefix):
    names = _names(topic_prefix)
    ensure_topics(kafka_bootstrap, eventq_topics(names, partitions=2))

    other_count = ensure_topics(kafka_bootstrap, eventq_topics(names, partitions=4))
    assert all(not r.ok for r in other_count)
    assert "has 2 partitions, eventq needs 4" in other_count[0].problems[0]

    # A commands topic that is compacted instead of time-retained is not accepted.
    wrong = commands_topic(names.jobs, partitions=2)
    [report] = ensure_topics(kafka_bootstrap, [wrong])
    assert not report.ok
    assert any("cleanup.policy=compact, eventq needs delete" in p for p in report.problems)
    assert any("message.timestamp.type=CreateTime" in p for p in report.problems)


def _topics_create(kafka_bootstrap: str, names: TopicNames, *flags: str):
    return subprocess.run(
        [sys.executable, "-m", "eventq.cli", "topics", "create", "--bootstrap", kafka_bootstrap,
         "--commands-topic", names.commands, "--jobs-topic", names.jobs, *flags],
        capture_output=True, text=True, timeout=120,
    )


def test_topics_made_under_another_default_keep_their_count_unless_partitions_is_given(
        kafka_bootstrap, topic_prefix):
    """The default went from 8 to 4 (docs/operations.md, "On many machines"): a var/ whose topics have 8
    must still serve with `make run`, and `--partitions` still says what is wanted."""
    names = _names(topic_prefix)
    ensure_topics(kafka_bootstrap, eventq_topics(names, partitions=8))
    assert Settings().partitions != 8

    kept = _topics_create(kafka_bootstrap, names)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert f"{names.commands} has 8 partitions: serving those" in kept.stdout + kept.stderr

    asked = _topics_create(kafka_bootstrap, names, "--partitions", "4")
    assert asked.returncode != 0
    assert "has 8 partitions, eventq needs 4" in asked.stdout + asked.stderr


def test_without_topics_the_settings_partitions_stand(kafka_bootstrap, topic_prefix):
    settings = Settings(bootstrap=kafka_bootstrap, commands_topic=f"{topic_prefix}.commands",
                        jobs_topic=f"{topic_prefix}.jobs", partitions=5)
    said = []
    assert with_existing_partitions(settings, said.append) is settings
    assert said == []
