"""A consumer group's committed positions with their metadata (the changelog end a
commit names: eventq/kafka/commit_metadata.py).

Asked with aiokafka's protocol classes: confluent-kafka 2.16.1 hands an offset's
metadata over decoded past its end (a UnicodeDecodeError, or trailing bytes, depending
on what follows it in memory), and aiokafka's admin ``list_consumer_group_offsets``
ignores the answer's top-level error: a coordinator that is moving or loading answers
with no partitions at all, which it returns as "nothing committed". Here any error
raises, and the caller asks again later.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from eventq.kafka.commit_metadata import changelog_end
from eventq.kafka.security import KafkaTarget, aiokafka_options

COMMITTED_TIMEOUT_S = 30.0


class CommittedUnknown(Exception):
    """The group's coordinator did not say where the group stands."""


@dataclass(frozen=True)
class Committed:
    """A partition's committed position in the command log, and the end of the
    changelog records the transaction that committed it wrote (None: not said)."""

    offset: int  # the next offset the group processes; -1: nothing committed
    changelog_end: int | None


def positions_of(response: Any, topic: str, partitions: Sequence[int],
                 ) -> dict[int, Committed]:  # Any: aiokafka's OffsetFetchResponse, untyped
    """{partition: Committed} from an OffsetFetch response; raises CommittedUnknown for
    an error at the top or at any partition asked, and for a partition missing."""
    from aiokafka.errors import for_code

    top = getattr(response, "error_code", 0)
    if top:
        raise CommittedUnknown(f"the group coordinator answered {for_code(top).__name__}")
    found: dict[int, Committed] = {}
    for answered_topic, answered in response.topics:
        for partition, offset, metadata, error in answered:
            if answered_topic != topic:
                continue
            if error:
                raise CommittedUnknown(
                    f"{topic}[{partition}]: the group coordinator answered "
                    f"{for_code(error).__name__}")
            found[partition] = Committed(
                offset if offset >= 0 else -1,
                changelog_end(metadata) if offset >= 0 else None)
    missing = sorted(set(partitions) - set(found))
    if missing:
        raise CommittedUnknown(f"the group coordinator said nothing of {topic} {missing}")
    return {p: found[p] for p in partitions}


async def committed_positions(bootstrap: KafkaTarget, group: str, topic: str,
                              partitions: Iterable[int], timeout_s: float = COMMITTED_TIMEOUT_S,
                              ) -> dict[int, Committed]:
    """{partition: Committed} as the group's coordinator answers now. Raises if Kafka
    does not answer within ``timeout_s`` or answers with an error."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.protocol.commit import OffsetFetchRequest

    asked = sorted(partitions)
    admin = AIOKafkaAdminClient(**aiokafka_options(bootstrap))
    try:
        async with asyncio.timeout(timeout_s):
            await admin.start()
            coordinator = await admin.find_coordinator(group)
            response = await admin._send_request(
                OffsetFetchRequest(group, [(topic, asked)]), coordinator)
    finally:
        await admin.close()
    return positions_of(response, topic, asked)
