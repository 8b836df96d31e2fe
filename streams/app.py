"""The faust application: one agent on `eventq.commands`, the `jobs` table whose
changelog is `eventq.jobs`, and the service that runs the producer, timers and gateway.

Built from the one Settings object; nothing here reads the environment.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass

import faust
import mode

from eventq.gateway.waiters import Waiters
from eventq.indexes import JobIndex
from eventq.settings import Settings
from streams import durable_flush
from streams.engine import Engine
from streams.processor import Processor, wall_clock_ms
from streams.store import JobStore
from streams.timers import DeadlineTimer

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# RocksDB memory per partition DB, sized for a 2-core, 24 GiB machine running 8
# partitions: at most 8 x (64 MiB cache + 2 x 16 MiB memtables) = 768 MiB. faust's
# defaults (2 GiB cache and 3 x 64 MiB memtables per partition) would allow 17 GiB.
ROCKSDB_OPTIONS = {
    "block_cache_size": 64 * MIB,
    "write_buffer_size": 16 * MIB,
    "max_write_buffer_number": 2,
    "target_file_size_base": 32 * MIB,
    "max_open_files": 512,
}


def faust_broker_url(bootstrap: str) -> str:
    """faust takes several brokers as kafka://a:9092;b:9092."""
    return "kafka://" + ";".join(part.strip() for part in bootstrap.split(",") if part.strip())


def new_node_id() -> str:
    """Identifies this process in the commands it issues (correlation, ARCHITECTURE.md)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass
class Streams:
    app: faust.App
    table: faust.Table
    engine: Engine
    processor: Processor
    index: JobIndex
    waiters: Waiters
    timer: DeadlineTimer


def build_streams(settings: Settings) -> Streams:
    app = faust.App(
        settings.app_id,
        broker=faust_broker_url(settings.kafka_bootstrap),
        store="rocksdb://",
        datadir=str(settings.state_dir),
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_allow_declare=False,  # eventq creates its topics with exact configs
        topic_disable_leader=True,
        table_standby_replicas=0,  # one process serves all partitions (see README)
        processing_guarantee="at_least_once",  # exactly-once is unreliable in faust
        consumer_auto_offset_reset="earliest",
        web_enabled=False,
        producer_acks=-1,
        broker_commit_interval=1.0,
        stream_buffer_maxsize=8192,
    )
    durable_flush.install(app)  # a commit must never pass an unwritten changelog record
    commands = app.topic(
        settings.commands_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=settings.partitions,
    )
    changelog = app.topic(
        settings.jobs_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=settings.partitions,
        compacting=True,
        deleting=False,
    )
    table = app.Table(
        "jobs",
        partitions=settings.partitions,
        changelog_topic=changelog,
        key_type=bytes,  # raw bytes both ways: eventq.core.codec does the encoding
        value_type=bytes,
        options=dict(ROCKSDB_OPTIONS),
    )
    index = JobIndex()
    waiters = Waiters()
    node = new_node_id()
    store = JobStore(table, settings.partitions, settings.commands_topic)
    engine = Engine(
        commands_topic=settings.commands_topic,
        partitions=settings.partitions,
        write_timeout_ms=settings.write_timeout_ms,
        index=index,
        store=store,
        waiters=waiters,
        node=node,
    )
    timer = DeadlineTimer(index, waiters, engine.send, wall_clock_ms)
    processor = Processor(table, store, index, waiters, node, timer.consider)

    @app.agent(commands)
    async def process(stream):
        async for event in stream.events():
            processor.handle(event.message, event.value)

    @table.on_recover
    async def rebuild_indexes() -> None:
        """Recovery done: rebuild the derived indexes of the actively owned partitions."""
        began = time.monotonic()
        owned = sorted(
            tp.partition
            for tp in app.assignor.assigned_actives()
            if tp.topic == settings.commands_topic
        )
        for partition in set(index.by_partition) - set(owned):
            index.drop_partition(partition)
        total = 0
        now_ms = wall_clock_ms()
        for partition in owned:
            total += index.rebuild_partition(partition, store.jobs_in(partition), now_ms)
            await asyncio.sleep(0)
        store.active = frozenset(owned)
        processor.forget_watermarks()
        engine.ready.set()
        timer.consider(now_ms)
        log.warning(
            "serving %d partitions, %d live jobs indexed in %.2fs",
            len(owned), total, time.monotonic() - began,
        )

    @app.on_partitions_revoked.connect
    async def stop_serving(app, revoked, **kwargs) -> None:
        """Partitions leave this worker: stop reading them until recovery is done."""
        lost = {tp.partition for tp in revoked if tp.topic == settings.commands_topic}
        if lost:
            engine.ready.clear()
            store.active = store.active - lost

    return Streams(app, table, engine, processor, index, waiters, timer)
