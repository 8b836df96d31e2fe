"""What the fault campaign asks Kafka itself, one broker at a time over its direct
listener (tools/faults/cluster.py names the listeners): the leaders of a topic's
partitions, the coordinator of the consumer group and of a transactional id, and the
group's members. The campaign aims faults with these (kill the leader, the
coordinator) and takes them as evidence that a fault took effect (the members changed:
a rebalance; another leader or coordinator).

Blocking: from async code, call these in a thread."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

BROKER_REQUEST_TIMEOUT_S = 5.0


class KafkaViewError(RuntimeError):
    """The broker did not answer the question; the message says why."""


@dataclass(frozen=True)
class PartitionView:
    """A partition's leader and in-sync replicas (node ids), as one broker sees them."""

    leader: int
    isr: tuple[int, ...]


@dataclass(frozen=True)
class GroupView:
    """A consumer group as its coordinator describes it."""

    state: str
    members: frozenset[str]  # member ids: a static member gets a new one at each join


def ask_broker(port: int, node: int, request) -> dict:
    """One request to the broker at 127.0.0.1:``port`` (node id ``node``) alone; its
    response as a dict."""
    return asyncio.run(_ask(port, node, request))


async def _ask(port: int, node: int, request) -> dict:
    from aiokafka.client import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{port}",
                            request_timeout_ms=int(BROKER_REQUEST_TIMEOUT_S * 1000))
    try:
        await client.bootstrap()
        return (await client.send(node, request)).to_object()
    finally:
        await client.close()


def partitions_seen(port: int, node: int, topics: list[str]
                    ) -> dict[tuple[str, int], PartitionView]:
    """(topic, partition) -> leader and ISR as that broker sees them."""
    from aiokafka.protocol.metadata import MetadataRequest

    response = ask_broker(port, node, MetadataRequest(topics, False))
    views = {}
    for topic in response["topics"]:
        for partition in topic["partitions"]:
            views[(topic["topic"], partition["partition"])] = PartitionView(
                partition["leader"], tuple(sorted(partition["isr"])))
    return views


def coordinator_seen(port: int, node: int, key: str, transactional: bool = False) -> int:
    """The node id that broker names as the coordinator of group (or transactional id)
    ``key``."""
    from aiokafka.protocol.coordination import FindCoordinatorRequest

    response = ask_broker(port, node, FindCoordinatorRequest(key, 1 if transactional else 0))
    if response["error_code"]:
        raise KafkaViewError(f"node {node} names no coordinator for {key!r}: "
                             f"error {response['error_code']}")
    return response["coordinator_id"]


def group_seen(port: int, node: int, group: str) -> GroupView:
    """The group as node ``node`` (its coordinator) describes it."""
    from aiokafka.protocol.admin import DescribeGroupsRequest

    response = ask_broker(port, node, DescribeGroupsRequest([group]))
    described = response["groups"][0]
    if described["error_code"]:
        raise KafkaViewError(f"node {node} cannot describe group {group!r}: "
                             f"error {described['error_code']}")
    return GroupView(described["state"],
                     frozenset(m["member_id"] for m in described["members"]))


def leaders_of(views: dict[tuple[str, int], PartitionView], topic: str) -> dict[int, int]:
    """partition -> leader node id (-1: none) of ``topic``, from ``partitions_seen``."""
    return {p: view.leader for (t, p), view in views.items() if t == topic}
