"""The command log read in whole fetches on the main loop (docs/architecture.md,
"Batches").

faust reads a topic through an aiokafka consumer in a thread of its own: every getmany
crosses to that thread and back, and each record then goes through faust's conductor,
an Event, the agent's stream and an ack (research/faust-roundtrip.md: a thin aiokafka
loop on the main loop did 13.5k commands/s at 16 clients against 1.8k through faust's
agent). So faust keeps what it does well: the consumer group and its assignor (which
partitions this process owns actively, which it keeps warm), the standby tables and
their changelog, heartbeats (the lease: streams/faust/lease.py) and rebalances. Reading
`eventq.commands` moves here: faust's consumer holds its partitions paused from the
moment they are assigned (streams/faust/patches.py ``CommandsLeftToFetcher``), and
this module's consumer, with no group, reads exactly the partitions the steward serves
(streams/faust/ownership.py), from where it places them, and hands each fetch's records of a
partition to the processor at once (``Processor.handle_batch``). Commits are eventq's
own either way (streams/faust/transactions.py).

Every partition of the topic is assigned to this consumer once and paused; the steward
decides which are read:

- ``serve``: partitions taken and resumed by the processor at their positions (the
  committed offsets, or where a retake starts): sought there, then fetched. Nothing of a
  partition is fetched before that.
- ``stop``: partitions revoked, or all of them when the process stops: paused, and a
  fetch being applied is finished first, so that the commit or rollback that follows
  sees every record that will ever be applied here.
- ``drop``: partitions that may be lost (a loss, a partition set aside to be taken
  again): paused at once; the processor applies nothing of them anyway.
- ``read_again``: the processor found a gap (streams/processor.py ``_in_order``).

The processor still checks every record (order, suspension, the lease), so a record
this module hands over late or twice is skipped, never applied twice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Iterable, Sequence

from aiokafka.errors import ConsumerStoppedError, KafkaError
from aiokafka.structs import TopicPartition

from eventq.kafka.security import KafkaTarget, aiokafka_options
from eventq.limits import KAFKA_MESSAGE_BYTES
from streams.apply import CommandRecord
from streams.faust.fetch_wait import FETCH_MAX_WAIT_MS

log = logging.getLogger(__name__)

# At most this many records are handed over per fetch (all partitions together); the
# event loop runs other tasks between fetches and between partitions of a fetch, so a
# long catch-up does not keep the gateway waiting.
MAX_RECORDS_PER_FETCH = 500
# A getmany that found nothing returns after this long (records wake it at once).
IDLE_POLL_MS = 1000
FETCH_ERROR_BACKOFF_S = 0.5  # a failed fetch (a broker away) is tried again after this
# A partition served this long without one fetch answered (its high-water mark still
# unknown) is logged with what aiokafka's fetcher holds of it: a fetch of a served
# partition normally answers within fetch_max_wait_ms, so this finds a stalled reader.
UNFETCHED_WARNING_S = 5.0

HandleBatch = Callable[[int, Sequence[CommandRecord]], Awaitable[None]]


class CommandFetcher:
    """Reads the command log for the processor. Its consumer is aiokafka's
    AIOKafkaConsumer, and what that hands back (TopicPartitions, ConsumerRecords) is
    Any here: aiokafka has no types."""

    def __init__(
        self,
        *,
        bootstrap: KafkaTarget,
        topic: str,
        partitions: int,
        client_id: str,
        handle_batch: HandleBatch,
        on_error: Callable[[int, BaseException], None],
        on_failure: Callable[[BaseException], None],
        consumer_factory: Callable[[], Any] | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._client_id = client_id
        self._handle_batch = handle_batch
        self._on_error = on_error  # an apply raised: the partition is taken again
        self._on_failure = on_failure  # reading itself failed: the process stops
        self._new_consumer = consumer_factory or self._aiokafka_consumer
        # Partitions served -> the position to place them at once the consumer runs
        # (None: placed). Only these are fetched.
        self._serving: dict[int, int | None] = {}
        # Counts every change of where a partition is read (served, dropped, sought):
        # records fetched before one are not handed over.
        self._epochs = [0] * partitions
        self._consumer: Any = None  # the AIOKafkaConsumer, once started
        self._task: asyncio.Task | None = None
        self._applying = asyncio.Lock()  # held while a fetch is handed to the processor
        self.fetches = 0
        self.records = 0

    def _aiokafka_consumer(self) -> Any:
        from aiokafka import AIOKafkaConsumer

        return AIOKafkaConsumer(
            **aiokafka_options(self._bootstrap),
            client_id=self._client_id,
            group_id=None,  # manual assignment: faust's group decides (see the docstring)
            enable_auto_commit=False,
            # A position is always set by ``serve``; "earliest" only answers a position
            # retention has deleted meanwhile (the processor logs the records lost).
            auto_offset_reset="earliest",
            # As faust's consumer reads it (streams/faust/fetch_wait.py): committed records.
            isolation_level="read_committed",
            # A fetch returns as soon as a record arrives; an idle one holds the
            # connection this long (a partition served meanwhile waits for it).
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            # The largest command record, whole (docs/architecture.md, "Limits").
            max_partition_fetch_bytes=KAFKA_MESSAGE_BYTES,
        )

    # --- what the steward says ---------------------------------------------------

    def serve(self, positions: dict[int, int]) -> None:
        """Read these partitions from these offsets (the processor expects each one's
        next record there)."""
        loop = asyncio.get_running_loop()
        for partition, offset in positions.items():
            self._epochs[partition] += 1
            self._serving[partition] = offset
            loop.call_later(UNFETCHED_WARNING_S, self._check_fetched, partition,
                            self._epochs[partition])
        self._place()
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def _check_fetched(self, partition: int, epoch: int) -> None:
        """Log a partition still served as it was ``UNFETCHED_WARNING_S`` ago whose
        fetches have never been answered, with what the fetcher holds of it (stop 40:
        one restarted process fetched nothing for 5 s under load; this says why)."""
        if self._epochs[partition] != epoch or partition not in self._serving:
            return
        if self.highwater(partition) is not None:
            return
        log.warning("%s[%d] served %.0f s ago and not fetched yet: %s", self._topic,
                    partition, UNFETCHED_WARNING_S, self._fetch_state(partition))

    def _fetch_state(self, partition: int) -> str:
        """What aiokafka's consumer holds of ``partition`` (its internals, read for a
        log line only; any of them missing says so instead)."""
        consumer, tp = self._consumer, self._tps[partition]
        if consumer is None:
            return "the consumer has not started"
        try:
            fetcher = consumer._fetcher
            assignment = consumer._subscription.subscription.assignment
            state = assignment.state_value(tp)
            leader = consumer._client.cluster.leader_for_partition(tp)
            return (f"position {state._position}, paused {state.paused}, awaiting reset "
                    f"{state.awaiting_reset}, leader {leader}, request in flight to it "
                    f"{leader in fetcher._in_flight}, records held {tp in fetcher._records}, "
                    f"fetcher failed {fetcher.error_future.done()}")
        except Exception as error:  # the internals moved: say so, never fail the loop
            return f"fetcher state unreadable ({error!r})"

    def drop(self, partitions: Iterable[int]) -> None:
        """Fetch nothing more of ``partitions`` (now: a record of theirs being applied
        finishes; ``stop`` waits for it)."""
        tps = []
        for partition in partitions:
            if self._serving.pop(partition, False) is not False:
                self._epochs[partition] += 1
                tps.append(self._tps[partition])
        if tps and self._consumer is not None:
            self._consumer.pause(*tps)

    def drop_all(self) -> None:
        self.drop(list(self._serving))

    async def stop(self, partitions: Iterable[int]) -> None:
        """Fetch nothing more of ``partitions``, and return once no record of theirs is
        being applied (a fetch being handed over is finished first)."""
        self.drop(partitions)
        if asyncio.current_task() is self._task:
            return  # asked from inside an apply (nothing else is being applied)
        async with self._applying:
            pass

    async def stop_all(self) -> None:
        await self.stop(list(self._serving))

    def read_again(self, partition: int, offset: int) -> None:
        """Fetch ``partition`` again from ``offset`` (what was fetched before is not
        handed over)."""
        if partition not in self._serving:
            return  # not read here (any more): its next serve places it
        self._epochs[partition] += 1
        self._serving[partition] = offset
        self._place()

    def highwater(self, partition: int) -> int | None:
        """The partition's end as of its last fetch (None: not fetched yet)."""
        if self._consumer is None or partition not in self._serving:
            return None
        end: int | None = self._consumer.highwater(self._tps[partition])
        return end

    async def close(self) -> None:
        """Stop reading and close the consumer (the process stops)."""
        await self.stop_all()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()
            log.info("read %d records of %s in %d fetches", self.records, self._topic,
                     self.fetches)

    # --- reading ---------------------------------------------------------------

    def _place(self) -> None:
        """Seek the partitions served that are not placed yet, then fetch them."""
        consumer = self._consumer
        if consumer is None:
            return  # the consumer places them once it runs
        placed = []
        for partition, offset in self._serving.items():
            if offset is not None:
                consumer.seek(self._tps[partition], offset)
                self._serving[partition] = None
                placed.append(self._tps[partition])
        if placed:
            consumer.resume(*placed)

    async def _start(self) -> Any:
        consumer = self._new_consumer()
        try:
            await consumer.start()
        except BaseException:
            await consumer.stop()
            raise
        # Every partition, paused: in the same step, so the consumer's fetcher (a task
        # of its own) never sees one unpaused before it is served.
        consumer.assign(self._tps)
        consumer.pause(*self._tps)
        # And each with a position, also in the same step: aiokafka looks up a position
        # for every partition that has none, paused or not (a committed-offset lookup,
        # then ListOffsets), and sends no fetch to a broker while any of its partitions
        # awaits that reset (aiokafka 0.14.0 consumer/fetcher.py:617-651); a reset that
        # keeps failing for a partition never served here would hold the served ones on
        # the same broker. A served partition is sought to its own position first
        # (``_place``); a paused one is never fetched.
        for tp in self._tps:
            consumer.seek(tp, 0)
        self._consumer = consumer
        self._place()
        log.info("reading %s in whole fetches on the main loop", self._topic)
        return consumer

    async def _run(self) -> None:
        consumer = None
        try:
            while consumer is None:
                try:
                    consumer = await self._start()
                except KafkaError as error:
                    log.warning("cannot start reading %s (%s); trying again", self._topic, error)
                    await asyncio.sleep(FETCH_ERROR_BACKOFF_S)
            while True:
                try:
                    fetched = await consumer.getmany(
                        timeout_ms=IDLE_POLL_MS, max_records=MAX_RECORDS_PER_FETCH)
                except ConsumerStoppedError:
                    return
                except KafkaError as error:
                    log.warning("fetching %s failed (%s); fetching again", self._topic, error)
                    await asyncio.sleep(FETCH_ERROR_BACKOFF_S)
                    continue
                if fetched:
                    await self._hand_over(fetched)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # nothing would apply the command log any more
            log.critical("reading %s failed: stopping", self._topic, exc_info=True)
            self._on_failure(error)

    async def _hand_over(self, fetched: dict[Any, Any]) -> None:
        """Each partition's records to the processor, unless the partition was stopped,
        dropped or sought since they were fetched."""
        epochs = list(self._epochs)
        async with self._applying:
            self.fetches += 1
            for tp, records in fetched.items():
                partition = tp.partition
                if partition not in self._serving or self._epochs[partition] != epochs[partition]:
                    continue
                self.records += len(records)
                try:
                    await self._handle_batch(partition, records)
                except Exception as error:  # the store failed: never skip past it
                    log.exception("applying %s[%d] from offset %d failed", self._topic,
                                  partition, records[0].offset)
                    self.drop([partition])
                    self._on_error(partition, error)
                await asyncio.sleep(0)  # the gateway between partitions
