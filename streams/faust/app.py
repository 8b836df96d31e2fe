"""The faust application: the `jobs` table whose changelog is `eventq.jobs`, the group
that assigns this process its partitions of `eventq.commands`, and what applies them:
the fetcher on the main loop (streams/faust/command_fetch.py), handing whole fetches to
the processor (docs/architecture.md, "Batches").

``build_streams`` reads top-down: the patches faust runs with, the app and its topics
and table, the parts that apply and serve (``assemble``), and the hooks through which
faust drives them (``Hooks``: the agent that subscribes the group, the recovery of an
assignment, the revocations, the periodic commit, the stop). Built from the one
Settings object; nothing here reads the environment.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import faust
from faust.types import TP, StreamT, TableT, TopicT

from eventq.address import address_of
from eventq.kafka.bulklane import bulk_group_id
from eventq.kafka.security import faust_options
from eventq.limits import KAFKA_MESSAGE_BYTES
from eventq.settings import Settings
from eventq.state.indexes import JobIndex
from eventq.state.jobs_table import ROCKSDB_OPTIONS
from eventq.state.livestats import LiveStats
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

CATCH_UP_REPORT_S = 30.0  # a long catch-up says where it stands this often


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
    """Identifies this process in the commands it issues (correlation, docs/architecture.md,
    "The topics")."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def aiokafka_producer(app: faust.App) -> Any:
    """faust's AIOKafkaProducer, None until the app has started it. Any: faust types its
    producer as ProducerT, which does not declare its aiokafka driver's ``_producer``,
    and aiokafka has no types."""
    driver: Any = app.producer
    return driver._producer


@dataclass
class Streams:
    app: faust.App
    table: TableT[bytes, bytes]
    engine: Engine
    processor: Processor
    store: JobStore
    index: JobIndex
    waiters: Waiters
    timer: DeadlineTimer
    changelog_buffer: durable_flush.DurableProducerBuffer
    changelogs: Changelogs
    steward: Steward
    admitter: BulkAdmitter
    follow_ups: FollowUpWriter  # workflows' commands for other partitions
    fetcher: CommandFetcher  # reads the command log
    # What writes commands (the gateway's, the timers', the follow-ups', the bulk
    # lane's slices): faust's producer, None until the app has started it
    # (docs/architecture.md, "Batches").
    command_producer: Callable[[], Any]
    jobs_topic: str

    def owner_of(self, partition: int) -> str | None:
        """The gateway address of ``partition``'s active owner, from faust's last
        assignment (every member gets every owner's URL)."""
        url = self._assignor()._tps_url.get(TP(self.jobs_topic, partition))
        return None if url is None else address_of(str(url))

    def members(self) -> list[str]:
        """The gateway addresses of every process in the group."""
        return [address_of(str(url)) for url in self._assignor().changelog_distribution]

    def lag(self) -> dict[int, tuple[int, int | None]]:
        """Each owned partition: the last offset applied, and the consumer's view of the
        partition's end (its high watermark, as of the last fetch; None: unknown)."""
        return {partition: (through, self.steward.highwater(partition))
                for partition, through in self.processor.applied_offsets().items()}

    def _assignor(self) -> Any:
        """faust's PartitionAssignor: Any, as its ``_tps_url`` and
        ``changelog_distribution`` are not in PartitionAssignorT."""
        return self.app.assignor


def build_streams(settings: Settings) -> Streams:
    install_patches()
    app = faust_app(settings)
    # faust's producer buffer (its send_soon) gives up after 0.1 s; eventq's waits.
    changelog_buffer = durable_flush.install(app)
    commands = commands_topic(app, settings)
    table = jobs_table(app, settings)
    streams = assemble(settings, app, table, changelog_buffer)
    Hooks(streams, settings).connect(commands)
    return streams


def install_patches() -> None:
    faust_patches.install()  # no wait_first per consumed record
    # eventq commits the command log's offsets in the changelog's transactions
    # (streams/faust/transactions.py), never through faust's consumer.
    faust_patches.commit_in_transactions()
    faust_patches.check_stalls_only_where_positioned()
    fetch_wait.install()  # rebalances do not queue behind 1.5 s fetches; read committed
    table_recovery.install()  # eventq recovers the tables of its active partitions
    lease_hooks.install()  # heartbeats renew the lease on the partitions


def faust_app(settings: Settings) -> faust.App:
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
    # faust's producer writes the commands (streams/command_writer.py) and the bulk
    # lane's admitted slices, which must never be duplicated by a retry (a second
    # `fail` would count twice): idempotent, acks from all in-sync replicas. (Any: the
    # aiokafka driver's ``_settings_extra`` is not in ProducerT.)
    producer: Any = app.producer
    producer._settings_extra = lambda: {"acks": "all", "enable_idempotence": True}
    return app


def commands_topic(app: faust.App, settings: Settings) -> TopicT:
    return app.topic(
        settings.commands_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=settings.partitions,
    )


def jobs_table(app: faust.App, settings: Settings) -> TableT[bytes, bytes]:
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
    return app.Table(
        "jobs",
        partitions=settings.partitions,
        changelog_topic=changelog,
        key_type=bytes,  # raw bytes both ways: eventq.core.codec does the encoding
        value_type=bytes,
        options=dict(ROCKSDB_OPTIONS),
    )


def assemble(settings: Settings, app: faust.App, table: TableT[bytes, bytes],
             changelog_buffer: durable_flush.DurableProducerBuffer) -> Streams:
    """The parts that apply the command log and serve from it, wired to each other."""
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
    command_producer = partial(aiokafka_producer, app)
    # Workflows' follow-ups go to the command log with the gateway's command producer
    # (acks=all, idempotent), each partition's commit waiting for those of what it
    # covers (streams/follow_ups.py).
    follow_ups = follow_up_writer(
        command_producer, settings.commands_topic, settings.partitions, changelogs)
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
        producer=command_producer,
        processor=processor,
        interactive_since=lambda: engine.writer.last_write_at if engine.writer else 0.0,
    )
    fetcher = CommandFetcher(
        bootstrap=settings.kafka, topic=settings.commands_topic,
        partitions=settings.partitions, client_id=f"{settings.app_id}-commands",
        handle_batch=processor.handle_batch,
        on_error=lambda partition, error: steward.take_again(
            partition, f"applying a record of partition {partition} failed ({error!r})"),
        on_failure=lambda error: crash(app, error),
    )
    steward.attach(
        engine=engine, store=store, index=index, processor=processor, changelogs=changelogs,
        admitter=admitter, timer=timer, fetcher=fetcher,
    )
    return Streams(
        app=app, table=table, engine=engine, processor=processor, store=store, index=index,
        waiters=waiters, timer=timer, changelog_buffer=changelog_buffer,
        changelogs=changelogs, steward=steward, admitter=admitter, follow_ups=follow_ups,
        fetcher=fetcher, command_producer=command_producer, jobs_topic=settings.jobs_topic,
    )


def crash(app: faust.App, error: BaseException) -> None:
    """Stop the process: reading the command log failed, so nothing would apply it."""
    asyncio.ensure_future(app.crash(error))


async def process(stream: StreamT[bytes]) -> None:
    """The agent on the command log: it subscribes faust's group to the topic, whose
    assignor gives this process its partitions, with their tables. faust's consumer
    reads none of them (the fetcher does): what it reads anyway is not applied twice,
    and said."""
    async for event in stream.events():
        message = event.message
        log.error("faust's consumer read %s[%d]@%d although its partitions are left to "
                  "the fetcher (a faust change? streams/faust/patches.py): not applied "
                  "by faust", message.topic, message.partition, message.offset)


class Hooks:
    """What faust calls: the agent on the command log, and the steward's part in the
    app's life (streams/faust/ownership.py): the recovery of an assignment, its
    revocations, the periodic commit, the stop."""

    def __init__(self, streams: Streams, settings: Settings) -> None:
        self._streams = streams
        self._settings = settings

    def connect(self, commands: TopicT) -> None:
        app = self._streams.app
        app.agent(commands)(process)
        # mode types a signal's handler (SignalHandlerT) so that, to mypy, only one
        # taking ``*args, **kwargs`` alone fits; faust calls these with the sender and
        # the signal's arguments, as they say.
        app.on_before_shutdown.connect(self.give_partitions_up)  # type: ignore[arg-type]
        app.task(self.commit_periodically)
        self._streams.table.on_recover(self.rebuild_indexes)
        app.on_partitions_revoked.connect(self.stop_serving)  # type: ignore[arg-type]

    async def give_partitions_up(self, app: faust.App, **kwargs: object) -> None:
        """Stopping: the streams are idle and this process is still in the group: commit
        what was applied (or roll it back), before the consumer leaves the group."""
        await self._streams.steward.release_all()
        await self._streams.fetcher.close()

    async def commit_periodically(self) -> None:
        streams = self._streams
        await commit_loop(streams.changelogs, streams.processor.next_offsets,
                          streams.steward.commit_now)()

    async def stop_serving(self, app: faust.App, revoked: set[TP], **kwargs: object) -> None:
        """Partitions leave this worker (the streams are idle): stop serving them, and
        commit what was applied to them (or roll it back, if this process may no longer
        commit), before anyone else may take them."""
        commands_topic = self._settings.commands_topic
        lost = {tp.partition for tp in revoked if tp.topic == commands_topic}
        if lost:
            await self._streams.steward.revoked(lost)

    async def rebuild_indexes(self) -> None:
        """faust's recovery done (of standbys only: streams/faust/table_recovery.py): fence the
        previous owners of the actively owned partitions, bring their tables up to the
        changelog, rebuild their derived indexes, and re-apply the uncommitted tail."""
        streams, settings = self._streams, self._settings
        steward, processor, engine = streams.steward, streams.processor, streams.engine
        began = time.monotonic()
        owned = sorted(
            tp.partition
            for tp in streams.app.assignor.assigned_actives()
            if tp.topic == settings.commands_topic
        )
        for partition in streams.index.partitions() - set(owned):
            streams.index.drop_partition(partition)
        taken = await steward.take(owned)
        if taken is None:
            return
        streams.store.active = frozenset(taken)
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
            asyncio.ensure_future(self._report_catch_up(catch_up.starts))

    async def _report_catch_up(self, starts: dict[int, int]) -> None:
        """A catch-up that takes long says where it stands (a hang shows in the log),
        and a partition in it that stops moving is read again (streams/catch_up.py)."""
        engine, processor = self._streams.engine, self._streams.processor
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
                await self._streams.steward.read_again(partition, offset)
            if now - reported >= CATCH_UP_REPORT_S:
                reported = now
                log.info("still re-applying the uncommitted tail: %s",
                         processor.catch_up_status())
