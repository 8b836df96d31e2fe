"""The faust application: the `jobs` table whose changelog is `eventq.jobs`, the group
that assigns this process its partitions of `eventq.commands`, and what applies them:
the fetcher on the main loop (streams/faust/command_fetch.py), handing whole fetches to
the processor (docs/architecture.md, "Batches").

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
from typing import Callable

import faust
from faust.types import TP

from eventq.address import address_of
from eventq.kafka.bulklane import bulk_group_id
from eventq.kafka.security import faust_options
from eventq.limits import KAFKA_MESSAGE_BYTES
from eventq.observe.livestats import LiveStats
from eventq.settings import Settings
from eventq.state.indexes import JobIndex
from eventq.state.jobs_table import ROCKSDB_OPTIONS
from eventq.state.waiters import Waiters
from streams.catch_up import CHECK_EVERY_S as CATCH_UP_CHECK_S
from streams.catch_up import STALL_S as CATCH_UP_STALL_S
from streams.catch_up import CatchUpWatch
from streams.engine import Engine
from streams.faust import durable_flush, fetch_wait, table_recovery
from streams.faust import lease as lease_hooks
from streams.faust import patches as faust_patches
from streams.faust.admission import BulkAdmitter
from streams.faust.command_fetch import CommandFetcher
from streams.faust.lease import OwnershipLease
from streams.faust.ownership import Steward
from streams.faust.transactions import Changelogs, commit_loop
from streams.follow_ups import FollowUpWriter, follow_up_writer
from streams.processor import Processor, wall_clock_ms
from streams.store import JobStore
from streams.timers import DeadlineTimer

log = logging.getLogger(__name__)

CATCH_UP_REPORT_S = 30.0

def instance_id(settings: Settings) -> str:
    """A stable consumer group instance id per data dir (one server per data dir)."""
    path = settings.data_dir / "instance-id"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        value = f"{settings.app_id}-{uuid.uuid4().hex[:12]}"
        path.write_text(value + "\n")
        return value


def new_node_id() -> str:
    """Identifies this process in the commands it issues (correlation, docs/architecture.md)."""
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
    changelog_buffer: durable_flush.DurableProducerBuffer
    changelogs: Changelogs
    steward: Steward
    admitter: BulkAdmitter
    owner_of: object  # partition -> gateway address of its active owner, or None
    members: object  # () -> gateway addresses of every process in the group
    lag: object  # () -> {owned partition: (last offset applied, log end or None)}
    follow_ups: FollowUpWriter  # workflows' commands for other partitions
    fetcher: CommandFetcher  # reads the command log
    # What writes commands (the gateway's, the timers', the follow-ups'): faust's
    # producer, None until the app has started it (docs/architecture.md, "Batches").
    command_producer: Callable[[], object]


def build_streams(settings: Settings) -> Streams:
    faust_patches.install()  # no wait_first per consumed record
    # eventq commits the command log's offsets in the changelog's transactions
    # (streams/faust/transactions.py), never through faust's consumer.
    faust_patches.commit_in_transactions()
    faust_patches.check_stalls_only_where_positioned()
    fetch_wait.install()  # rebalances do not queue behind 1.5 s fetches; read committed
    table_recovery.install()  # eventq recovers the tables of its active partitions
    lease_hooks.install()  # heartbeats renew the lease on the partitions
    app = faust.App(
        settings.app_id,
        **faust_options(settings.kafka),
        store="rocksdb://",
        datadir=str(settings.state_dir),
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_allow_declare=False,  # eventq creates its topics with exact configs
        topic_disable_leader=True,
        # Warm copies of other processes' tables (docs/architecture.md, "Scaling out"): a
        # partition whose owner dies moves to a process that only has to read the
        # changelog's last records.
        table_standby_replicas=settings.standby_replicas,
        # How peers find this process's gateway: faust hands every member the URL of
        # each partition's owner (eventq/gateway/cluster.py).
        canonical_url=f"http://{settings.advertised_address}",
        # A killed process's partitions move after this long (static membership keeps
        # them through a quicker restart); heartbeats must come well within it.
        broker_session_timeout=settings.session_timeout_ms / 1000,
        broker_heartbeat_interval=min(1.0, settings.session_timeout_ms / 6000),
        processing_guarantee="at_least_once",  # exactly-once is unreliable in faust
        consumer_auto_offset_reset="earliest",
        web_enabled=False,
        producer_acks=-1,
        # Static membership: a restarted process takes its partitions back at once
        # instead of waiting for its dead predecessor's session (60 s) to expire.
        consumer_group_instance_id=instance_id(settings),
        broker_commit_interval=1.0,
        # Sizes from eventq/limits.py: faust's producer writes command records of up to
        # the largest command (its default 1,000,000 bytes crashed on a 1 MiB payload;
        # docs/architecture.md, "Limits"), and a fetch must take the largest command
        # record whole. (The changelog has producers of its own: streams/faust/transactions.py.)
        producer_max_request_size=KAFKA_MESSAGE_BYTES,
        consumer_max_fetch_size=KAFKA_MESSAGE_BYTES,
        # Counted in records, not bytes: 1024 records of the largest size are 4 GiB.
        stream_buffer_maxsize=1024,
        # faust reads no changelog of an active partition (streams/faust/table_recovery.py):
        # its check of persisted offsets against a changelog's end has nothing to say.
        recovery_consistency_check=False,
        # The stream's queue fast path (research/faust-levers.md: ~5 us per event).
        cython_optimizations=True,
        # The command log is read on the main loop, a fetch at a time
        # (streams/faust/command_fetch.py): faust's consumer holds its partitions paused.
        PartitionAssignor=faust_patches.commands_left_to_fetcher(settings.commands_topic),
    )
    # faust's producer buffer (its send_soon) gives up after 0.1 s; eventq's waits.
    changelog_buffer = durable_flush.install(app)
    # faust's producer writes the commands (streams/command_writer.py) and the bulk
    # lane's admitted slices, which must never be duplicated by a retry (a second
    # `fail` would count twice): idempotent, acks from all in-sync replicas.
    app.producer._settings_extra = lambda: {"acks": "all", "enable_idempotence": True}
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
        # No stream reads the changelog: as faust's own changelog topics are
        # (faust/tables/base.py `_new_changelog_topic`), it is declared without acks.
        # With acks, faust's stall detector (faust/transport/drivers/aiokafka.py
        # `verify_event_path`) took every partition whose end moved past the consumer's
        # position for a stream that never started: after `stream_processing_timeout`
        # (5 min) it logged a 15-line ERROR per partition every 2.5 s
        # (docs/architecture.md, "The changelog").
        acks=False,
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
    store = JobStore(table, settings.partitions)
    lease = OwnershipLease(settings.session_timeout_ms / 1000)
    lease_hooks.register(settings.app_id, lease)
    steward = Steward(app, settings, lease)
    engine = Engine(
        commands_topic=settings.commands_topic,
        partitions=settings.partitions,
        write_timeout_ms=settings.write_timeout_ms,
        index=index,
        store=store,
        waiters=waiters,
        node=node,
        holds=steward.holds,
    )
    timer = DeadlineTimer(index, waiters, engine.send, wall_clock_ms,
                          unconfirmed=engine.offers.withdraw_attempt,
                          registrations=store.earliest_registration_ms)
    changelogs = Changelogs(
        bootstrap=settings.kafka, app_id=settings.app_id,
        topic=settings.jobs_topic, commands_topic=settings.commands_topic, store=store,
        on_lost=steward.changelog_lost,
    )
    # Workflows' follow-ups go to the command log with the gateway's command producer
    # (acks=all, idempotent), each partition's commit waiting for those of what it
    # covers (streams/follow_ups.py).
    def command_producer() -> object:
        return app.producer._producer

    follow_ups = follow_up_writer(
        command_producer, settings.commands_topic, settings.partitions,
        changelogs)
    processor = Processor(
        store, index, waiters, node, timer.consider, changelogs.persist,
        max_state_record_bytes=settings.max_state_record_bytes,
        stats=LiveStats() if settings.http_address is not None else None,
        ownership=steward, follow_ups=follow_ups,
    )

    admitter = BulkAdmitter(
        bootstrap=settings.kafka,
        bulk_topic=settings.bulk_topic,
        commands_topic=settings.commands_topic,
        group_id=bulk_group_id(settings.app_id),
        producer=lambda: app.producer._producer,
        processor=processor,
        interactive_since=lambda: engine.writer.last_write_at if engine.writer else 0.0,
    )

    fetcher = CommandFetcher(
        bootstrap=settings.kafka, topic=settings.commands_topic,
        partitions=settings.partitions, client_id=f"{settings.app_id}-commands",
        handle_batch=processor.handle_batch,
        on_error=lambda partition, error: steward.take_again(
            partition, f"applying a record of partition {partition} failed ({error!r})"),
        on_failure=lambda error: asyncio.ensure_future(app.crash(error)),
    )

    # Subscribes faust's group to the command log: its assignor gives this process its
    # partitions, with their tables (the fetcher reads them, faust's consumer none).
    @app.agent(commands)
    async def process(stream):
        async for event in stream.events():
            unread_by_faust(event.message)

    def unread_by_faust(message) -> None:
        """faust's consumer was to leave the command log to the fetcher: what it read
        anyway is not applied twice (the fetcher applies it), and said."""
        log.error("faust's consumer read %s[%d]@%d although its partitions are left to "
                  "the fetcher (a faust change? streams/faust/patches.py): not applied "
                  "by faust", message.topic, message.partition, message.offset)

    steward.attach(
        engine=engine, store=store, index=index, processor=processor, changelogs=changelogs,
        admitter=admitter, timer=timer, fetcher=fetcher,
    )

    @app.on_before_shutdown.connect
    async def give_partitions_up(app, **kwargs) -> None:
        """Stopping: the streams are idle and this process is still in the group: commit
        what was applied (or roll it back), before the consumer leaves the group."""
        await steward.release_all()
        await fetcher.close()

    @app.task
    async def commit_periodically() -> None:
        await commit_loop(changelogs, processor.next_offsets, steward.commit_now)()

    @table.on_recover
    async def rebuild_indexes() -> None:
        """faust's recovery done (of standbys only: streams/faust/table_recovery.py): fence the
        previous owners of the actively owned partitions, bring their tables up to the
        changelog, rebuild their derived indexes, and re-apply the uncommitted tail."""
        began = time.monotonic()
        owned = sorted(
            tp.partition
            for tp in app.assignor.assigned_actives()
            if tp.topic == settings.commands_topic
        )
        for partition in index.partitions() - set(owned):
            index.drop_partition(partition)
        taken = await steward.take(owned)
        if taken is None:
            return
        store.active = frozenset(taken)
        processor.forget_watermarks()
        catch_up = await steward.resume(taken)
        if catch_up is None:
            return
        targets = catch_up.targets
        steward.resumed()
        log.info(
            "recovered %d partitions, %d live jobs indexed in %.2fs; re-applying the "
            "uncommitted tail up to %s before serving",
            len(taken), steward.indexed, time.monotonic() - began, targets,
        )

        def caught_up() -> None:
            engine.ready.set()
            # The admitted offsets are the table's now: the bulk lane may go on, in every
            # partition served (one taken again on its own meanwhile included).
            steward.admit_served()
            log.info("serving: state is up to date with %s", settings.commands_topic)

        processor.expect_catch_up(targets, caught_up)
        if not engine.ready.is_set():
            asyncio.ensure_future(report_catch_up(catch_up.starts))

    async def report_catch_up(starts: dict[int, int]) -> None:
        """A catch-up that takes long says where it stands (a hang shows in the log),
        and a partition in it that stops moving is read again (streams/catch_up.py)."""
        watch = CatchUpWatch()
        reported = time.monotonic()
        while not engine.ready.is_set():
            await asyncio.sleep(CATCH_UP_CHECK_S)
            if engine.ready.is_set():
                return
            now = time.monotonic()
            for partition, offset in watch.stalled(processor.catching_up(), now).items():
                offset = max(offset, starts.get(partition, 0))  # never before the tail
                log.warning(
                    "catch-up of partition %d stalled for %.0fs behind its target: reading "
                    "it again from offset %d", partition, CATCH_UP_STALL_S, offset)
                await steward.read_again(partition, offset)
            if now - reported >= CATCH_UP_REPORT_S:
                reported = now
                log.info("still re-applying the uncommitted tail: %s",
                         processor.catch_up_status())

    @app.on_partitions_revoked.connect
    async def stop_serving(app, revoked, **kwargs) -> None:
        """Partitions leave this worker (the streams are idle): stop serving them, and
        commit what was applied to them (or roll it back, if this process may no longer
        commit), before anyone else may take them."""
        lost = {tp.partition for tp in revoked if tp.topic == settings.commands_topic}
        if lost:
            await steward.revoked(lost)

    def owner_of(partition: int) -> str | None:
        """From faust's last assignment (every member gets every owner's URL)."""
        url = app.assignor._tps_url.get(TP(settings.jobs_topic, partition))
        return None if url is None else address_of(str(url))

    def members() -> list[str]:
        return [address_of(str(url)) for url in app.assignor.changelog_distribution]

    def lag() -> dict[int, tuple[int, int | None]]:
        """The consumer's view of each owned partition's end (its high watermark, as
        of the last fetch), beside what was applied."""
        return {partition: (through, steward.highwater(partition))
                for partition, through in processor.applied_offsets().items()}

    return Streams(
        app, table, engine, processor, index, waiters, timer, changelog_buffer,
        changelogs, steward, admitter, owner_of, members, lag, follow_ups, fetcher,
        command_producer,
    )
