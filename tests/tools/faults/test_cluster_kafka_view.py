"""The fault cluster's questions to Kafka (tools/faults/kafka_view.py): the pure part
that picks a topic's leaders out of a broker's metadata."""

from __future__ import annotations

from tools.faults.kafka_view import PartitionView, leaders_of


def test_leaders_of_one_topic_only():
    views = {("a", 0): PartitionView(1, (1, 2)), ("a", 1): PartitionView(-1, ()),
             ("b", 0): PartitionView(3, (3,))}
    assert leaders_of(views, "a") == {0: 1, 1: -1}
    assert leaders_of(views, "c") == {}
