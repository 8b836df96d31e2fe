"""What this process does about owning its partitions: take them (fencing whoever owned
them before), hold them while its lease lasts, give them up cleanly on a rebalance, and
let go at once when it may have lost them (docs/fencing.md, "Taking a partition").

Losing happens when the lease expired (the process was paused, or cut off from the
group coordinator, past its session: streams/faust/lease.py) or a changelog transaction
cannot commit (another process fenced it, or Kafka failed it: streams/faust/transactions.py).
Then the process stops applying and answering, rolls every owned partition's table back
to its last commit, and rejoins the group: the partitions it gets after that are
recovered from the changelog and their uncommitted tails re-applied, as after any
assignment. Nothing it applied since its last commit is lost by that: those commands
are in the log, and whoever owns their partition next applies them again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable

import faust
from faust.types import TP

from eventq.kafka.committed import Committed, committed_positions
from eventq.kafka.logreader import CatchUp, catch_up_targets, end_offsets
from eventq.settings import Settings
from eventq.state.indexes import JobIndex
from streams.engine import Engine
from streams.faust.admission import BulkAdmitter
from streams.faust.command_fetch import CommandFetcher
from streams.faust.lease import OwnershipLease
from streams.faust.table_recovery import recover_tables
from streams.faust.transactions import Changelogs, describe, is_fenced
from streams.processor import Processor, wall_clock_ms
from streams.store import JobStore
from streams.timers import DeadlineTimer

log = logging.getLogger(__name__)


class Steward:
    def __init__(self, app: faust.App, settings: Settings, lease: OwnershipLease) -> None:
        self._app = app
        self._settings = settings
        self.lease = lease
        self._letting_go: asyncio.Task | None = None
        # Assignments and revocations are handled one at a time, in the order they
        # came: a take still fencing and recovering when the next rebalance arrives
        # would otherwise finish after it, and hold partitions now someone else's.
        self._assigning = asyncio.Lock()
        self._generation = 0  # counts assignments and revocations; a stale take stops
        self.losses = 0
        self.last_loss: str | None = None

    def attach(self, *, engine: Engine, store: JobStore, index: JobIndex,
               processor: Processor, changelogs: Changelogs, admitter: BulkAdmitter,
               timer: DeadlineTimer, fetcher: CommandFetcher) -> None:
        self._engine, self._store, self._index = engine, store, index
        self._processor, self._changelogs, self._admitter = processor, changelogs, admitter
        self._timer = timer
        # The command log's reader on the main loop (streams/faust/command_fetch.py), which
        # reads exactly what this steward serves.
        self._fetcher = fetcher
        self._retaking: dict[int, asyncio.Task] = {}  # partitions being taken again
        # The committed position each partition's table was recovered for: reading
        # resumes there (a later answer of the group coordinator may differ).
        self._recovered_at: dict[int, int] = {}
        # Partitions whose changelog ended before their last commit's records at their
        # last take: since when (streams/faust/table_recovery.py, ChangelogBehind).
        self._behind_since: dict[int, float] = {}

    # --- asked by the processor, the engine and the commit loop ------------------------

    def holds(self) -> bool:
        """This process may still act as the owner of its partitions."""
        return self.lease.valid() and not self._processor.suspended

    def may_commit(self) -> bool:
        """A commit may go: this process holds its partitions and lost nothing since
        (the broker refuses a commit anyway once another process fenced this one; the
        lease keeps it from committing what its lease no longer covers)."""
        return self._letting_go is None and self.holds()

    def commit_now(self) -> bool:
        """The periodic commit's question: like ``may_commit``, and an expired lease
        noticed here (no record came to notice it) is a loss: let go."""
        if self._letting_go is None and not self.lease.valid() and self._changelogs.owned():
            self.lost("its lease on its partitions expired (a pause, or cut off from the "
                      "group coordinator)")
        return self.may_commit()

    def lost(self, reason: str) -> None:
        """This process may have lost its partitions: stop applying and answering now,
        roll back, and rejoin the group."""
        if self._letting_go is not None:
            return
        self.losses += 1
        self.last_loss = reason
        log.warning("giving up every partition: %s; rolling back what was applied since "
                    "the last commit and rejoining the group", reason)
        self._processor.suspend()
        self._fetcher.drop_all()
        self._engine.ready.clear()
        self._store.active = frozenset()
        self.lease.end()
        self._stop_retaking(self._retaking)
        self._letting_go = asyncio.ensure_future(self._let_go())

    def changelog_lost(self, partition: int, error: BaseException) -> None:
        """A partition's transaction cannot commit. Fenced: another process started its
        transactional id, so this one no longer owns it, and may have lost the rest
        too. Otherwise Kafka failed it (a broker away, a coordinator moving): only that
        partition is rolled back and taken again, the others serve on."""
        reason = f"partition {partition}'s changelog transaction cannot commit ({describe(error)})"
        if is_fenced(error) or not self.lease.valid():
            self.lost(reason)
        else:
            self.take_again(partition, reason)

    def take_again(self, partition: int, reason: str) -> None:
        if self._letting_go is not None or partition in self._retaking:
            return
        log.warning("%s: rolling it back and taking it again; the other partitions serve on",
                    reason)
        self._store.active = self._store.active - {partition}
        self._processor.set_aside(partition)
        self._fetcher.drop([partition])
        self._index.drop_partition(partition)
        self.admit_served()
        self._retaking[partition] = asyncio.ensure_future(self._retake(partition))

    def admit_served(self) -> None:
        """Have the bulk lane admit into exactly the partitions served now (once the
        process serves: before that its catch-up starts it). A partition taken again on
        its own joins it when it serves again: seed 4005 of the fault campaign, where
        partitions retaken after a failed take were served but never admitted into
        again, and 478 acknowledged bulk adds stayed invisible."""
        if self._engine.ready.is_set():
            self._admitter.start(sorted(self._store.active))

    async def _retake(self, partition: int) -> None:
        generation = self._generation
        await self._changelogs.release([partition], None)
        delay_s = RETAKE_FIRST_S
        while True:
            async with self._assigning:
                if generation != self._generation:
                    return  # a rebalance came: it takes the partition or gives it up
                if await self._take([partition]):
                    break
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, RETAKE_MAX_S)
        positions = await self.resume([partition], generation)
        if positions is None:
            return
        target = positions.targets.get(partition, -1)

        def caught_up() -> None:
            self._retaking.pop(partition, None)
            self._store.active = self._store.active | {partition}
            self.admit_served()
            log.info("partition %d taken again and serving", partition)

        self._processor.expect_partition_caught_up(partition, target, caught_up)

    def _stop_retaking(self, partitions: Iterable[int]) -> None:
        for partition in list(partitions):
            task = self._retaking.pop(partition, None)
            if task is not None:
                task.cancel()

    async def _let_go(self) -> None:
        try:
            await self._admitter.stop()
            await self._changelogs.release_all(None)
        except Exception:  # never let a failure here keep the process from rejoining
            log.exception("rolling back after losing the partitions failed")
            self._changelogs.unclean = True
        finally:
            self._rejoin()

    def _rejoin(self) -> None:
        """Ask the Kafka consumer (in faust's consumer thread) to rejoin the group: its
        partitions are revoked and assigned again, and recovered from the log."""
        # faust's consumer thread and the aiokafka consumer in it: not in faust's
        # ConsumerT (nor has aiokafka types), hence Any.
        thread: Any = getattr(self._app.consumer, "_thread", None)
        consumer: Any = getattr(thread, "_consumer", None)
        if consumer is None:
            return
        coordinator = consumer._coordinator
        thread.thread_loop.call_soon_threadsafe(coordinator.request_rejoin)

    async def log_start(self, partition: int) -> int | None:
        """The command log's first offset in ``partition`` (retention deletes before it)."""
        ends = await asyncio.to_thread(
            end_offsets, self._settings.kafka, self._settings.commands_topic)
        return ends[partition][0] if partition in ends else None

    async def read_again(self, partition: int, offset: int) -> None:
        self._fetcher.read_again(partition, offset)

    def highwater(self, partition: int) -> int | None:
        """The command log's end in ``partition`` as of its last fetch (None: unknown)."""
        return self._fetcher.highwater(partition)

    # --- the rebalance -------------------------------------------------------------

    async def take(self, partitions: list[int]) -> list[int] | None:
        """A new assignment: give up the partitions no longer owned, fence the previous
        owners of the new ones, recover their tables from the changelog and open their
        transactions. Returns the partitions taken; one that could not be (Kafka away)
        is taken again in the background. None if this process lets go meanwhile, or a
        newer rebalance came (its own take decides)."""
        self._generation += 1
        generation = self._generation
        if self._letting_go is not None:
            await self._letting_go
            self._letting_go = None
        async with self._assigning:
            if generation != self._generation:
                return None
            self._stop_retaking(self._retaking)
            taken = self._changelogs.owned()
            await self._changelogs.release(taken - set(partitions), None)
            # Partitions taken earlier and begun are being applied: only the new ones are
            # recovered (recovering one being applied would put older states back).
            new = [p for p in partitions if p not in taken]
            failed = set(new) - set(await self._take(new, report=True))
        if self._letting_go is not None or generation != self._generation:
            return None  # lost meanwhile (the rejoin recovers), or a new rebalance
        for partition in sorted(failed):
            self._retaking[partition] = asyncio.ensure_future(self._retake(partition))
        return [p for p in partitions if p not in failed]

    async def _take(self, partitions: list[int], report: bool = False) -> list[int]:
        """Fence, recover and begin ``partitions``; the ones done (the others released)."""
        if not partitions:
            return []
        began = time.monotonic()
        generation = self._generation
        changelogs = self._changelogs
        failed = await changelogs.take(partitions)
        started = [p for p in partitions if p not in failed]
        recovered = []
        try:
            self._drop_stale_changelog_events(started)
            dbs = {p: self._store.db(p) for p in started}
            # Reading resumes from the committed positions read here, and the table must
            # first hold what the commits behind them wrote (the changelog end each
            # names). A stale answer is an older position with its older end: its
            # commands are applied again, which their positions make harmless.
            committed = await committed_positions(
                self._settings.kafka, self._settings.app_id,
                self._settings.commands_topic, started)
            committed = self._unless_behind_too_long(committed)
            recovered = await asyncio.to_thread(
                recover_tables, self._settings.kafka, self._settings.jobs_topic, dbs,
                {p: c.changelog_end for p, c in committed.items()
                 if c.changelog_end is not None},
                given_up=lambda: generation != self._generation or self._letting_go is not None)
            for r in recovered:
                if r.behind is not None:
                    failed[r.partition] = r.behind
                    self._behind_since.setdefault(r.partition, time.monotonic())
                else:
                    self._behind_since.pop(r.partition, None)
                    self._recovered_at[r.partition] = committed[r.partition].offset
            await changelogs.release([r.partition for r in recovered if r.behind], None)
            failed |= await changelogs.begin()
        except Exception as error:  # Kafka away while reading the changelog
            failed |= dict.fromkeys(started, error)
        if failed:
            await changelogs.release(list(failed), None)
            for partition, why in sorted(failed.items()):
                log.warning("could not take partition %d (%s); trying again shortly",
                            partition, describe(why))
        done = [p for p in partitions if p not in failed]
        if report or failed:
            log.info("took partitions %s in %.2fs: fenced their previous owners, then read "
                     "the changelog: %s", done, time.monotonic() - began,
                     ", ".join(f"{r.partition}: {r.records} records to {r.end}"
                               f"{' (rebuilt)' if r.wiped else ''}"
                               for r in recovered if r.partition in done))
        return done

    def _unless_behind_too_long(self, committed: dict[int, Committed]) -> dict[int, Committed]:
        """A partition whose changelog has ended before its last commit for longer than
        any broker stays stale (its topic was recreated, or an unclean election cut its
        tail) is recovered from what the changelog holds, and its whole command log is
        applied again from its start: slow, but all that is left."""
        now = time.monotonic()
        for partition, since in self._behind_since.items():
            if partition in committed and now - since > CHANGELOG_BEHIND_LIMIT_S:
                log.critical(
                    "partition %d's changelog has ended before its last commit's records "
                    "for %.0fs: taking it from what the changelog holds and applying its "
                    "whole command log again, from its first offset", partition, now - since)
                committed = {**committed, partition: Committed(-1, None)}
        return committed

    async def resume(self, partitions: list[int],
                     generation: int | None = None) -> CatchUp | None:
        """Index ``partitions`` from their tables and have their uncommitted tails read
        again: where each resumes, and the offset it must reach before serving
        (eventq.kafka.logreader.CatchUp). None if a new rebalance came meanwhile (since
        the take of ``generation``, by default the last one)."""
        if generation is None:
            generation = self._generation
        now_ms = wall_clock_ms()
        self.indexed = 0
        for partition in partitions:
            self._processor.forget([partition])
            self.indexed += self._index.rebuild(
                partition, self._store.slims_in(partition), now_ms,
                self._store.paused_in(partition), self._store.registrations_in(partition),
                self._store.recurrences_in(partition))
            await asyncio.sleep(0)
        self._timer.consider(now_ms)
        recovered_at = {p: self._recovered_at[p] for p in partitions if p in self._recovered_at}
        catch_up = await asyncio.to_thread(
            catch_up_targets, self._settings.kafka, self._settings.app_id,
            self._settings.commands_topic, partitions, recovered_at)
        if self._letting_go is not None or generation != self._generation:
            return None  # lost meanwhile (the rejoin recovers), or a new rebalance
        for partition, offset in recovered_at.items():
            if self._recovered_at.get(partition) == offset:
                del self._recovered_at[partition]
        for partition in partitions:
            self._processor.resume_partition(partition, catch_up.positions[partition])
        # Fetched from now on, each from exactly where the processor expects its next
        # record (a revocation or loss since the checks above would have said so).
        self._fetcher.serve({p: catch_up.positions[p] for p in partitions})
        return catch_up

    def _drop_stale_changelog_events(self, partitions: list[int]) -> None:
        """faust may still hold changelog records it fetched while these partitions
        were its standbys: applied now, over what recover_tables writes, they would put
        older states back. Apply what it buffered, then have it drop the rest."""
        # faust's TableManager: its recovery is not in TableManagerT, hence Any.
        tables: Any = self._app.tables
        recovery = tables.recovery
        recovery.flush_buffers()
        for partition in partitions:
            recovery.active_offsets[TP(self._settings.jobs_topic, partition)] = NEVER

    def resumed(self) -> None:
        """The partitions' records are applied again from their committed offsets."""
        self._processor.suspended = False

    async def revoked(self, partitions: set[int]) -> None:
        """A rebalance takes ``partitions`` away (faust has stopped the streams): commit
        what was applied to them, unless this process may no longer (then roll back)."""
        self._generation += 1  # a take or retake under way stops
        self._engine.ready.clear()
        self._store.active = self._store.active - set(partitions)
        self._engine.let_go(set(partitions))
        # faust stopped only its own streams: no record of these is applied from now
        # on, before anything is committed or rolled back below.
        await self._fetcher.stop(partitions)
        await self._admitter.stop()
        if self._letting_go is not None:
            await self._letting_go
        async with self._assigning:  # after a take under way: it may hold some of them
            self._stop_retaking(partitions)
            for partition in partitions:
                self._recovered_at.pop(partition, None)
            offsets = self._processor.next_offsets() if self.may_commit() else None
            await self._changelogs.release(partitions, offsets)
            self._processor.forget(partitions)

    async def release_all(self) -> None:
        """Stopping: commit what was applied (or roll it back) and close the producers."""
        await self._fetcher.stop_all()  # (faust stopped only its own streams)
        offsets = self._processor.next_offsets() if self.may_commit() else None
        self._processor.suspend()
        self._stop_retaking(self._retaking)
        if self._letting_go is not None:
            await self._letting_go
        await self._changelogs.release_all(offsets)


# How long a changelog may end before its last commit's records before the partition
# is taken from what it holds (every broker that was cut off has rejoined long before).
CHANGELOG_BEHIND_LIMIT_S = 120.0
NEVER = 2**62  # a changelog offset faust's recovery never sees a record beyond
RETAKE_FIRST_S = 1.0  # a partition that could not be taken is tried again after this,
RETAKE_MAX_S = 30.0  # doubling up to this
