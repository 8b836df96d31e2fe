"""What this process does about owning its partitions: take them (fencing whoever owned
them before), hold them while its lease lasts, give them up cleanly on a rebalance, and
let go at once when it may have lost them (docs/fencing.md).

Losing happens when the lease expired (the process was paused, or cut off from the
group coordinator, past its session: streams/lease.py) or a changelog transaction
cannot commit (another process fenced it, or Kafka failed it: streams/transactions.py).
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

from faust.types import TP

from eventq.kafka.logreader import end_offsets
from eventq.settings import Settings
from streams.lease import OwnershipLease
from streams.table_recovery import recover_tables
from streams.transactions import ChangelogLost

log = logging.getLogger(__name__)


class Steward:
    def __init__(self, app, settings: Settings, lease: OwnershipLease) -> None:
        self._app = app
        self._settings = settings
        self.lease = lease
        self._letting_go: asyncio.Task | None = None
        self.losses = 0
        self.last_loss: str | None = None

    def attach(self, *, engine, store, index, processor, changelogs, admitter) -> None:
        self._engine, self._store, self._index = engine, store, index
        self._processor, self._changelogs, self._admitter = processor, changelogs, admitter

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
        self._engine.ready.clear()
        self._store.active = frozenset()
        self.lease.end()
        self._letting_go = asyncio.ensure_future(self._let_go())

    def changelog_lost(self, partition: int, error: BaseException) -> None:
        self.lost(f"partition {partition}'s changelog transaction cannot commit ({error})")

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
        thread = getattr(self._app.consumer, "_thread", None)
        consumer = getattr(thread, "_consumer", None)
        if consumer is None:
            return
        coordinator = consumer._coordinator
        thread.thread_loop.call_soon_threadsafe(coordinator.request_rejoin)

    async def log_start(self, partition: int) -> int | None:
        """The command log's first offset in ``partition`` (retention deletes before it)."""
        ends = await asyncio.to_thread(
            end_offsets, self._settings.kafka_bootstrap, self._settings.commands_topic)
        return ends.get(partition, (None, None))[0]

    async def read_again(self, partition: int, offset: int) -> None:
        await self._app.consumer.seek(TP(self._settings.commands_topic, partition), offset)

    # --- the rebalance -------------------------------------------------------------

    async def take(self, partitions: list[int]) -> bool:
        """Fence the previous owners of ``partitions``, recover their tables from the
        changelog and open their transactions. False (and let go) if that failed."""
        if self._letting_go is not None:
            await self._letting_go
            self._letting_go = None
        began = time.monotonic()
        changelogs = self._changelogs
        taken = changelogs.owned()
        # Partitions taken earlier and begun are being applied: only the new ones are
        # recovered (recovering one that is being applied would put older states back).
        new = [p for p in partitions if p not in taken]
        try:
            await changelogs.release(taken - set(partitions), None)
            await changelogs.take(new)
            self._drop_stale_changelog_events(new)
            dbs = {p: self._store.db(p) for p in new}
            recovered = await asyncio.to_thread(
                recover_tables, self._settings.kafka_bootstrap, self._settings.jobs_topic, dbs)
            await changelogs.begin()
        except (ChangelogLost, Exception) as error:
            self.lost(f"could not take partitions {partitions}: {type(error).__name__}: "
                      f"{error}")
            return False
        log.info("took partitions %s in %.2fs: fenced their previous owners, then read "
                 "the changelog: %s", partitions, time.monotonic() - began,
                 ", ".join(f"{r.partition}: {r.records} records to {r.end}"
                           f"{' (rebuilt)' if r.wiped else ''}" for r in recovered))
        return True

    def _drop_stale_changelog_events(self, partitions: list[int]) -> None:
        """faust may still hold changelog records it fetched while these partitions
        were its standbys: applied now, over what recover_tables writes, they would put
        older states back. Apply what it buffered, then have it drop the rest."""
        recovery = self._app.tables.recovery
        recovery.flush_buffers()
        for partition in partitions:
            recovery.active_offsets[TP(self._settings.jobs_topic, partition)] = NEVER

    def resumed(self) -> None:
        """The partitions' records are applied again from their committed offsets."""
        self._letting_go = None

    async def revoked(self, partitions) -> None:
        """A rebalance takes ``partitions`` away (faust has stopped the streams): commit
        what was applied to them, unless this process may no longer (then roll back)."""
        self._engine.ready.clear()
        self._store.active = self._store.active - set(partitions)
        await self._admitter.stop()
        if self._letting_go is not None:
            await self._letting_go
        offsets = self._processor.next_offsets() if self.may_commit() else None
        await self._changelogs.release(partitions, offsets)
        self._processor.forget(partitions)

    async def release_all(self) -> None:
        """Stopping: commit what was applied (or roll it back) and close the producers."""
        offsets = self._processor.next_offsets() if self.may_commit() else None
        self._processor.suspend()
        if self._letting_go is not None:
            await self._letting_go
        await self._changelogs.release_all(offsets)


NEVER = 2**62  # a changelog offset faust's recovery never sees a record beyond
