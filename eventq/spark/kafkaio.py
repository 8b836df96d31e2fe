"""Reading and writing eventq's topics with Spark's Kafka connector."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from eventq.kafka.security import KafkaTarget, confluent_config, spark_options
from eventq.kafka.topics import partition_count
from eventq.limits import KAFKA_MESSAGE_BYTES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

METADATA_TIMEOUT_S = 15.0
MAX_REQUEST_BYTES = KAFKA_MESSAGE_BYTES  # eventq/limits.py: any command record fits


class TopicMissing(LookupError):
    pass


def topic_partitions(bootstrap: KafkaTarget, topic: str) -> int:
    """The partition count of an existing topic (the gateway partitions by it too)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(confluent_config(bootstrap))
    try:
        metadata = admin.list_topics(topic, timeout=METADATA_TIMEOUT_S)
    except Exception as error:  # KafkaException: broker unreachable
        raise TopicMissing(
            f"cannot reach Kafka at {bootstrap}: {error}. Is Kafka running? "
            "(eventq kafka start, or --bootstrap)"
        ) from None
    partitions = partition_count(metadata, topic)
    if partitions is None:
        raise TopicMissing(
            f"topic {topic} does not exist on {bootstrap}: create it with "
            "`eventq topics create` (same --commands-topic/--jobs-topic)"
        )
    return partitions


@contextlib.contextmanager
def _connector_needed() -> Iterator[None]:
    """A session without Spark's Kafka connector fails with DATA_SOURCE_NOT_FOUND: say
    how to get one."""
    try:
        yield
    except Exception as error:
        text = str(error)
        if "DATA_SOURCE_NOT_FOUND" not in text and "Failed to find data source" not in text:
            raise
        from eventq.spark.session import SparkSetupError, default_jars_dir

        raise SparkSetupError(
            "this SparkSession has no Kafka connector: create it with "
            "eventq.spark.spark_session(), or pass the jars of "
            f"{default_jars_dir()} (`make deps` fetches them) with spark.jars"
        ) from error


def read_topic(spark: SparkSession, bootstrap: KafkaTarget, topic: str,
               fail_on_data_loss: bool = True) -> DataFrame:
    """A batch DataFrame of every record of ``topic`` from the earliest offset to the
    latest as of planning (key, value, topic, partition, offset, timestamp, ...)."""
    with _connector_needed():
        return (
            spark.read.format("kafka")
            .options(**spark_options(bootstrap))
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("kafka.isolation.level", "read_committed")
            .option("failOnDataLoss", "true" if fail_on_data_loss else "false")
            .load()
        )


def write_records(df: DataFrame, bootstrap: KafkaTarget, topic: str) -> None:
    """Write (key, value, partition) rows to ``topic`` with the gateway's guarantees:
    acks from all in-sync replicas and an idempotent producer (no duplicates on retry).
    The record timestamp is the broker's (the topic uses LogAppendTime)."""
    with _connector_needed():
        (
            df.write.format("kafka")
            .options(**spark_options(bootstrap))
            .option("topic", topic)
            .option("kafka.acks", "all")
            .option("kafka.enable.idempotence", "true")
            .option("kafka.max.request.size", str(MAX_REQUEST_BYTES))
            .option("kafka.linger.ms", "10")
            .option("kafka.batch.size", str(256 * 1024))
            .save()
        )
