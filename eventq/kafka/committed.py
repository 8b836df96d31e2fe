"""A consumer group's committed positions with their metadata (the changelog end a
commit names: eventq/kafka/commit_metadata.py).

Asked with aiokafka's admin client: confluent-kafka 2.16.1 hands an offset's metadata
over decoded past its end (a UnicodeDecodeError, or trailing bytes, depending on what
follows it in memory), so it cannot be trusted with it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from eventq.kafka.commit_metadata import changelog_end

COMMITTED_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Committed:
    """A partition's committed position in the command log, and the end of the
    changelog records the transaction that committed it wrote (None: not said)."""

    offset: int  # the next offset the group processes; -1: nothing committed
    changelog_end: int | None


async def committed_positions(bootstrap: str, group: str, topic: str, partitions,
                              timeout_s: float = COMMITTED_TIMEOUT_S) -> dict[int, Committed]:
    """{partition: Committed} as the group's coordinator answers now. Raises if Kafka
    does not answer within ``timeout_s``."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.structs import TopicPartition

    admin = AIOKafkaAdminClient(
        bootstrap_servers=[s.strip() for s in bootstrap.split(",") if s.strip()])
    try:
        async with asyncio.timeout(timeout_s):
            await admin.start()
            answer = await admin.list_consumer_group_offsets(
                group, partitions=[TopicPartition(topic, p) for p in partitions])
    finally:
        await admin.close()
    committed = {p: Committed(-1, None) for p in partitions}
    for tp, position in answer.items():
        if tp.topic == topic and position.offset >= 0:
            committed[tp.partition] = Committed(position.offset,
                                                changelog_end(position.metadata))
    return committed
