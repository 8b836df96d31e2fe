"""eventq's topics, created up front with exact configs (docs/architecture.md, "The
topics"). faust never alters an existing topic, so eventq owns their creation, and an
existing topic that differs from what eventq needs is reported, never silently used.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from eventq.kafka.security import KafkaTarget, confluent_config
from eventq.limits import KAFKA_MESSAGE_BYTES, MIN_TOPIC_MESSAGE_BYTES

if TYPE_CHECKING:  # confluent_kafka is imported where it is used
    from confluent_kafka.admin import AdminClient, ClusterMetadata

ONE_WEEK_MS = 7 * 24 * 3600 * 1000
TOPIC_OPERATION_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


def bulk_name_for(commands: str) -> str:
    """The bulk topic that goes with a command log: ``X.commands`` -> ``X.bulk``."""
    stem = commands[: -len("commands")] if commands.endswith("commands") else commands + "."
    return stem + "bulk"


@dataclass(frozen=True)
class TopicNames:
    commands: str = "eventq.commands"
    jobs: str = "eventq.jobs"
    bulk: str = ""  # empty: bulk_name_for(commands)

    def __post_init__(self) -> None:
        if not self.bulk:
            object.__setattr__(self, "bulk", bulk_name_for(self.commands))


def commands_topic(
    name: str, partitions: int, replication_factor: int = 1, retention_ms: int = ONE_WEEK_MS
) -> TopicSpec:
    """The command log: the broker stamps every record (one clock for all producers, so a
    replay decides exactly as the first run did); kept for a time, as an audit trail."""
    return TopicSpec(
        name,
        partitions,
        replication_factor,
        {
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "delete",
            "retention.ms": str(retention_ms),
            # eventq/limits.py: an import carries a payload and a result (1 MiB each).
            "max.message.bytes": str(KAFKA_MESSAGE_BYTES),
        },
    )


def jobs_topic(name: str, partitions: int, replication_factor: int = 1) -> TopicSpec:
    """The state log: faust's `jobs` changelog, compacted to one record per live job."""
    return TopicSpec(
        name,
        partitions,
        replication_factor,
        {
            "cleanup.policy": "compact",
            # eventq/limits.py: a state record holds a payload and a result (1 MiB each).
            "max.message.bytes": str(KAFKA_MESSAGE_BYTES),
        },
    )


# A bulk record that does not decode is admitted whole into a slice record of the
# command log (which rejects it there, logged), adding a header of a few bytes: the bulk
# topic's records are kept this much smaller.
BULK_HEADROOM_BYTES = 64 * 1024


def bulk_topic(
    name: str, partitions: int, replication_factor: int = 1, retention_ms: int = ONE_WEEK_MS
) -> TopicSpec:
    """The staging topic of bulk producers (docs/architecture.md, "Lanes"): the same partitions
    as the command log (a job's bulk records and commands meet in one partition), kept
    for a time like it; the processor admits its records into the command log."""
    return TopicSpec(
        name,
        partitions,
        replication_factor,
        {
            "cleanup.policy": "delete",
            "retention.ms": str(retention_ms),
            "max.message.bytes": str(KAFKA_MESSAGE_BYTES - BULK_HEADROOM_BYTES),
        },
    )


def eventq_topics(
    names: TopicNames,
    partitions: int,
    replication_factor: int = 1,
    retention_ms: int = ONE_WEEK_MS,
) -> list[TopicSpec]:
    specs = [
        commands_topic(names.commands, partitions, replication_factor, retention_ms),
        jobs_topic(names.jobs, partitions, replication_factor),
        bulk_topic(names.bulk, partitions, replication_factor, retention_ms),
    ]
    if min_insync_replicas(replication_factor) == 1:
        return specs
    in_sync = {"min.insync.replicas": str(min_insync_replicas(replication_factor))}
    return [replace(spec, configs={**spec.configs, **in_sync}) for spec in specs]


def min_insync_replicas(replication_factor: int) -> int:
    """Replicated (docs/architecture.md, "Several brokers"): 2 of 3 copies must take a
    write (acks=all everywhere in eventq), so losing any one broker loses no
    acknowledged record and stops no write; 1 with fewer copies."""
    return 2 if replication_factor >= 3 else 1


@dataclass(frozen=True)
class TopicReport:
    name: str
    created: bool
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        if self.problems:
            return f"{self.name}: DIFFERS: " + "; ".join(self.problems)
        return f"{self.name}: {'created' if self.created else 'exists, config matches'}"


def _admin(bootstrap: KafkaTarget) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    return AdminClient(confluent_config(bootstrap, {"log_level": 0}))


def describe_topic(admin: AdminClient, name: str) -> tuple[int, dict[str, str]] | None:
    """(partition count, configs) of an existing topic, or None if it does not exist."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    metadata = admin.list_topics(topic=name, timeout=TOPIC_OPERATION_TIMEOUT_S)
    topic = metadata.topics.get(name)
    if topic is None or topic.error is not None:
        return None
    from confluent_kafka import KafkaError, KafkaException

    resource = ConfigResource(ResourceType.TOPIC, name)
    futures = admin.describe_configs([resource], request_timeout=TOPIC_OPERATION_TIMEOUT_S)
    try:
        entries = futures[resource].result(timeout=TOPIC_OPERATION_TIMEOUT_S)
    except KafkaException as error:
        # In a cluster a new topic reaches each broker's metadata at its own moment:
        # the one asked for configs may not know it yet.
        if error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise
    return len(topic.partitions), {key: entry.value for key, entry in entries.items()}


def partition_count(metadata: ClusterMetadata, name: str) -> int | None:
    """The partitions of topic ``name`` in a metadata answer (confluent-kafka's
    ``ClusterMetadata``), or None if it does not exist there."""
    topic = metadata.topics.get(name)
    if topic is None or topic.error is not None or not topic.partitions:
        return None
    return len(topic.partitions)


def existing_partitions(bootstrap: KafkaTarget, name: str) -> int | None:
    """The partition count of topic ``name``, or None if it does not exist."""
    metadata = _admin(bootstrap).list_topics(topic=name, timeout=TOPIC_OPERATION_TIMEOUT_S)
    return partition_count(metadata, name)


def _wait_visible(admin: AdminClient, name: str) -> tuple[int, dict[str, str]] | None:
    """A created topic reaches the metadata cache a moment after CreateTopics returns."""
    deadline = time.monotonic() + TOPIC_OPERATION_TIMEOUT_S
    while time.monotonic() < deadline:
        existing = describe_topic(admin, name)
        if existing is not None and existing[0] > 0:
            return existing
        time.sleep(0.05)
    return None


# Configs where more than eventq asks for is as good: {key: the least that works}.
AT_LEAST = {"max.message.bytes": MIN_TOPIC_MESSAGE_BYTES}


def _differences(spec: TopicSpec, partitions: int, configs: dict[str, str]) -> list[str]:
    problems = []
    if partitions != spec.partitions:
        problems.append(f"has {partitions} partitions, eventq needs {spec.partitions}")
    for key, wanted in spec.configs.items():
        actual = configs.get(key)
        if key in AT_LEAST and _int_or_none(actual) is not None:
            if int(actual) < AT_LEAST[key]:  # type: ignore[arg-type]  # an int, checked above
                problems.append(
                    f"{key}={actual} cannot hold eventq's largest record "
                    f"({AT_LEAST[key]:,} bytes with its batch header); eventq needs {wanted}"
                )
        elif actual != wanted:
            problems.append(f"{key}={actual}, eventq needs {wanted}")
    return problems


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value)  # type: ignore[arg-type]  # None: TypeError, caught below
    except (TypeError, ValueError):
        return None


# What serving depends on (retention, say, is the operator's business).
SERVING_CONFIGS = frozenset({"message.timestamp.type", "cleanup.policy", "max.message.bytes"})


class TopicsUnfit(RuntimeError):
    """The topics `eventq serve` needs are missing or cannot hold what it writes."""


def check_topics(bootstrap: KafkaTarget, specs: list[TopicSpec]) -> None:
    """Refuse to serve on topics that are missing or differ from what eventq needs
    (partition count, timestamps, compaction, and above all a ``max.message.bytes``
    too small for the largest record eventq writes: a job that cannot be written must
    never be accepted; docs/architecture.md, "Limits"). Raises ``TopicsUnfit`` saying
    what to change."""
    admin = _admin(bootstrap)
    problems = []
    for spec in specs:
        existing = describe_topic(admin, spec.name)
        if existing is None:
            problems.append(f"topic {spec.name} does not exist: run `eventq topics create`")
            continue
        needed = {k: v for k, v in spec.configs.items() if k in SERVING_CONFIGS}
        for problem in _differences(replace(spec, configs=needed), *existing):
            fix = _fix_for(spec, problem, bootstrap)
            problems.append(f"topic {spec.name} {problem}{fix}")
    if problems:
        raise TopicsUnfit("\n  ".join(["the topics cannot serve eventq:", *problems]))


def _fix_for(spec: TopicSpec, problem: str, bootstrap: KafkaTarget) -> str:
    key = problem.split("=", 1)[0]
    if key in spec.configs:
        return (
            f" (change it with: kafka-configs.sh --bootstrap-server {bootstrap} --alter "
            f"--entity-type topics --entity-name {spec.name} "
            f"--add-config {key}={spec.configs[key]})"
        )
    return " (partitions cannot shrink: use new topic names, or recreate the topics)"


def ensure_topics(bootstrap: KafkaTarget, specs: list[TopicSpec]) -> list[TopicReport]:
    """Create missing topics with exact configs; report existing ones that differ.

    Re-running is harmless: an existing, matching topic is left alone.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    reports = []
    for spec in specs:
        existing = describe_topic(admin, spec.name)
        created = False
        if existing is None:
            new = NewTopic(
                spec.name,
                num_partitions=spec.partitions,
                replication_factor=spec.replication_factor,
                config=dict(spec.configs),
            )
            future = admin.create_topics(
                [new], operation_timeout=TOPIC_OPERATION_TIMEOUT_S
            )[spec.name]
            try:
                future.result(timeout=TOPIC_OPERATION_TIMEOUT_S)
                created = True
            except KafkaException as error:
                # Another process may have created it meanwhile: then compare it.
                if "TOPIC_ALREADY_EXISTS" not in str(error):
                    raise
            existing = _wait_visible(admin, spec.name)
            if existing is None:
                reports.append(TopicReport(spec.name, created, ("not visible after create",)))
                continue
        partitions, configs = existing
        reports.append(
            TopicReport(spec.name, created, tuple(_differences(spec, partitions, configs)))
        )
    return reports
