"""Where a bulk load stands: the bulk topic's end against what the server has admitted
(docs/architecture.md, "Lanes"; streams/faust/admission.py commits each partition's admitted
offset, once applied, as the offset of the consumer group ``<app id>.bulk``).

Used by `--wait` of the bulk producers (Spark enqueue, a pipeline's own script): after
writing, take the bulk topic's end offsets as the targets and wait until every
partition's admission reaches them, with a progress bar of the rows admitted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Collection

from eventq.console.progress import Progress
from eventq.kafka.security import KafkaTarget, confluent_config

POLL_S = 0.25
ADMIN_TIMEOUT_S = 30.0


def bulk_group_id(app_id: str) -> str:
    """The consumer group whose committed offsets on the bulk topic are its admission."""
    return f"{app_id}.bulk"


class BulkWaitError(RuntimeError):
    """Admission stopped progressing: the error says what to check."""


@dataclass
class Admission:
    targets: dict[int, int]  # partition -> the end offset to reach
    admitted: dict[int, int]  # partition -> the group's committed (next) offset

    @property
    def remaining(self) -> int:
        return sum(max(0, end - self.admitted.get(p, 0)) for p, end in self.targets.items())

    @property
    def done(self) -> bool:
        return self.remaining == 0


def end_offsets(bootstrap: KafkaTarget, topic: str) -> dict[int, int]:
    """The current end offset of every partition of ``topic``."""
    from eventq.kafka.logreader import end_offsets as ends

    return {partition: high for partition, (_low, high) in ends(bootstrap, topic).items()}


def admitted_offsets(bootstrap: KafkaTarget, group: str, topic: str,
                     partitions: Collection[int]) -> dict[int, int]:
    """The bulk group's committed offsets (0 for a partition never admitted from)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if not partitions:
        return {}
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(confluent_config(bootstrap, {"log_level": 0}))
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    result = admin.list_consumer_group_offsets([request], request_timeout=ADMIN_TIMEOUT_S)
    found = result[group].result(timeout=ADMIN_TIMEOUT_S)
    return {tp.partition: max(tp.offset, 0) for tp in found.topic_partitions}


def committed_command_offsets(bootstrap: KafkaTarget, app_id: str, commands_topic: str,
                              partitions: Collection[int]) -> dict[int, int]:
    """The app's committed offsets on the command log (0 where none): each partition's
    changelog is committed with it, in one transaction (streams/faust/transactions.py)."""
    return admitted_offsets(bootstrap, app_id, commands_topic, partitions)


def wait_state_logged(bootstrap: KafkaTarget, app_id: str, commands_topic: str,
                      timeout_s: float = 60.0) -> bool:
    """Return once every command in the command log now is in `eventq.jobs` as well:
    the server applies a command at once but commits its changelog with the command
    log's offset about once a second (streams/faust/transactions.py), and a reader of
    `eventq.jobs` sees committed records only. False if that took over ``timeout_s``
    (the server stopped, or is far behind)."""
    targets = end_offsets(bootstrap, commands_topic)
    deadline = time.monotonic() + timeout_s
    while True:
        committed = committed_command_offsets(bootstrap, app_id, commands_topic, targets)
        if all(committed.get(p, 0) >= end for p, end in targets.items() if end > 0):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)


def wait_admitted(
    bootstrap: KafkaTarget,
    topic: str,
    group: str,
    targets: dict[int, int],
    progress: Progress,
    stall_timeout_s: float = 60.0,
    rows: int | None = None,
) -> Admission:
    """Return once the server has admitted and applied every bulk record below
    ``targets``; ``BulkWaitError`` when nothing moves for ``stall_timeout_s``.

    The bar counts ``rows`` (the rows the caller wrote) when given: a user wrote rows,
    and a bulk record holds hundreds. Admission is known by record, so the
    rows shown while it runs are the admitted records' share of them."""
    admission = Admission(targets, admitted_offsets(bootstrap, group, topic, targets))
    first_remaining = admission.remaining
    count = AdmittedCount(first_remaining, rows)
    progress.start(f"applied from {topic}", total=count.total, unit=count.unit)
    last_move, last_remaining = time.monotonic(), first_remaining
    while not admission.done:
        time.sleep(POLL_S)
        admission.admitted = admitted_offsets(bootstrap, group, topic, targets)
        remaining = admission.remaining
        progress.update(count.done(first_remaining - remaining))
        if remaining != last_remaining:
            last_move, last_remaining = time.monotonic(), remaining
        elif time.monotonic() - last_move > stall_timeout_s:
            behind = ", ".join(
                f"partition {p}: {end - admission.admitted.get(p, 0):,}"
                for p, end in sorted(targets.items()) if end > admission.admitted.get(p, 0))
            raise BulkWaitError(
                f"no bulk record of {topic} was applied for {stall_timeout_s:g}s "
                f"({remaining:,} bulk records still waiting; {behind}): is `eventq serve` "
                f"running against this Kafka with app id matching group {group}?"
            )
    progress.finish(count.total)
    return admission


@dataclass(frozen=True)
class AdmittedCount:
    """What the bar counts: rows when the caller knows how many it wrote, else records."""

    records: int
    rows: int | None

    @property
    def unit(self) -> str:
        return "records" if self.rows is None else "rows"

    @property
    def total(self) -> int:
        return self.records if self.rows is None else self.rows

    def done(self, records_done: int) -> int:
        if self.rows is None:
            return records_done
        if self.records == 0:
            return self.rows
        return self.rows * records_done // self.records
