"""eventq's two topics, created up front with exact configs (ARCHITECTURE.md, "The two
topics"). faust never alters an existing topic, so eventq owns their creation, and an
existing topic that differs from what eventq needs is reported, never silently used.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

ONE_WEEK_MS = 7 * 24 * 3600 * 1000
TOPIC_OPERATION_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicNames:
    commands: str = "eventq.commands"
    jobs: str = "eventq.jobs"


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
            # A payload (1 MiB) and, in an import, a result (1 MiB) plus the envelope.
            "max.message.bytes": str(4 * 1024 * 1024),
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
            "max.message.bytes": str(4 * 1024 * 1024),
        },
    )


def eventq_topics(
    names: TopicNames,
    partitions: int,
    replication_factor: int = 1,
    retention_ms: int = ONE_WEEK_MS,
) -> list[TopicSpec]:
    return [
        commands_topic(names.commands, partitions, replication_factor, retention_ms),
        jobs_topic(names.jobs, partitions, replication_factor),
    ]


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


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def describe_topic(admin, name: str) -> tuple[int, dict[str, str]] | None:
    """(partition count, configs) of an existing topic, or None if it does not exist."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    metadata = admin.list_topics(topic=name, timeout=TOPIC_OPERATION_TIMEOUT_S)
    topic = metadata.topics.get(name)
    if topic is None or topic.error is not None:
        return None
    resource = ConfigResource(ResourceType.TOPIC, name)
    futures = admin.describe_configs([resource], request_timeout=TOPIC_OPERATION_TIMEOUT_S)
    entries = futures[resource].result(timeout=TOPIC_OPERATION_TIMEOUT_S)
    return len(topic.partitions), {key: entry.value for key, entry in entries.items()}


def _wait_visible(admin, name: str) -> tuple[int, dict[str, str]] | None:
    """A created topic reaches the metadata cache a moment after CreateTopics returns."""
    deadline = time.monotonic() + TOPIC_OPERATION_TIMEOUT_S
    while time.monotonic() < deadline:
        existing = describe_topic(admin, name)
        if existing is not None and existing[0] > 0:
            return existing
        time.sleep(0.05)
    return None


def _differences(spec: TopicSpec, partitions: int, configs: dict[str, str]) -> list[str]:
    problems = []
    if partitions != spec.partitions:
        problems.append(f"has {partitions} partitions, eventq needs {spec.partitions}")
    for key, wanted in spec.configs.items():
        actual = configs.get(key)
        if actual != wanted:
            problems.append(f"{key}={actual}, eventq needs {wanted}")
    return problems


def ensure_topics(bootstrap: str, specs: list[TopicSpec]) -> list[TopicReport]:
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
