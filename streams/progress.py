"""Where the apply of each partition this process owns stands (streams/processor.py): the
offset to apply next, the last one handled, where reading resumed after a recovery, the
catch-up targets to reach before serving (docs/architecture.md, "The changelog"), and
who waits for an offset to be handled.

A partition's records are applied in offset order, each once (the processor checks
each against ``next``); a partition given up while one of its records was applied
(streams/faust/ownership.py) is forgotten here, so what that apply finishes counts for
nothing.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Iterable


def _nothing() -> None:
    """No catch-up is expected yet."""


class ApplyProgress:
    def __init__(self) -> None:
        self.next: dict[int, int] = {}  # partition -> the offset to apply next
        # partition -> (the offset it is read again from, when: time.monotonic())
        self.reading_again: dict[int, tuple[int, float]] = {}
        self._applied_through: dict[int, int] = {}  # partition -> last offset handled
        self._resumed_at: dict[int, int] = {}  # partition -> first offset read after recovery
        self._catch_up: dict[int, int] = {}  # partition -> last offset to re-apply
        # One partition taken again on its own: (last offset to re-apply, then what)
        self._partition_catch_up: dict[int, tuple[int, Callable[[], None]]] = {}
        self._on_caught_up: Callable[[], None] = _nothing
        self._offset_waiters: dict[int, list[tuple[int, asyncio.Future[None]]]] = {}

    # --- catching up -----------------------------------------------------------------

    def expect_catch_up(self, targets: dict[int, int], on_caught_up: Callable[[], None]) -> None:
        """Call ``on_caught_up`` once every partition has been applied up to its target
        (the end of the log when the partitions were recovered)."""
        self._catch_up = {
            partition: target
            for partition, target in targets.items()
            if self._applied_through.get(partition, -1) < target
        }
        self._on_caught_up = on_caught_up
        if not self._catch_up:
            on_caught_up()

    def expect_partition_caught_up(self, partition: int, target: int,
                                   on_caught_up: Callable[[], None]) -> None:
        """Call ``on_caught_up`` once ``partition`` is applied up to ``target``."""
        if self._applied_through.get(partition, -1) >= target:
            on_caught_up()
        else:
            self._partition_catch_up[partition] = (target, on_caught_up)

    def catching_up(self) -> dict[int, int]:
        """Partitions still behind their catch-up target: the last offset applied."""
        return {p: self._applied_through.get(p, -1) for p in self._catch_up}

    def catch_up_remaining(self) -> dict[int, int]:
        """Partitions still catching up: how many records each has left to re-apply."""
        return {p: max(0, target - self._applied_through.get(p, -1))
                for p, target in self._catch_up.items()}

    def catch_up_status(self) -> str:
        return ", ".join(
            f"partition {p}: through {through} of {self._catch_up[p]}"
            for p, through in sorted(self.catching_up().items())
        ) or "done"

    # --- partitions coming and going ---------------------------------------------------

    def resume_partition(self, partition: int, offset: int) -> None:
        """``partition``'s next record to apply is at ``offset``."""
        self._resumed_at[partition] = offset
        self.next[partition] = offset
        self.reading_again.pop(partition, None)

    def forget(self, partitions: Iterable[int]) -> None:
        """``partitions`` left this process: nothing of theirs is applied any more, and
        whoever waited for one of their offsets is let go (it will never come here)."""
        for partition in partitions:
            self.next.pop(partition, None)
            self.reading_again.pop(partition, None)
            self._applied_through.pop(partition, None)
            self._resumed_at.pop(partition, None)
            self._catch_up.pop(partition, None)
            self._partition_catch_up.pop(partition, None)
            for _, future in self._offset_waiters.pop(partition, []):
                if not future.done():
                    future.set_result(None)

    def set_aside(self, partition: int) -> None:
        """``partition`` is forgotten, and no longer awaited by the catch-up of the
        others, which serve once they are caught up."""
        waiting = bool(self._catch_up)
        self.forget([partition])
        if waiting and not self._catch_up:
            self._on_caught_up()

    # --- what was applied ---------------------------------------------------------------

    async def applied(self, partition: int, offset: int) -> None:
        """Return once the record at ``offset`` of ``partition`` is handled."""
        if self._applied_through.get(partition, -1) >= offset:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._offset_waiters.setdefault(partition, []).append((offset, future))
        await future

    def handled(self, partition: int, offset: int) -> bool:
        """Whether the record at ``offset`` of ``partition`` is handled already."""
        return self._applied_through.get(partition, -1) >= offset

    def next_offsets(self) -> dict[int, int]:
        """Partitions with records applied: the next offset to apply (what a commit
        names, streams/faust/transactions.py)."""
        return {p: through + 1 for p, through in self._applied_through.items()
                if p in self.next}

    def applied_offsets(self, partitions: Iterable[int]) -> dict[int, int]:
        """``partitions``: the last offset of the command log handled (before the first
        record since recovery: the one before where reading resumed)."""
        return {p: self._applied_through.get(p, self._resumed_at.get(p, 0) - 1)
                for p in partitions}

    def caught_up_to(self, partition: int, offset: int) -> None:
        """The record at ``offset`` of ``partition`` is handled: answer who waited for
        it, and the catch-ups it completes."""
        if partition not in self.next:
            return  # given up while the record was applied: nothing of it counts
        self._applied_through[partition] = offset
        waiting = self._offset_waiters.get(partition)
        if waiting:
            still = []
            for at, future in waiting:
                if at <= offset:
                    if not future.done():
                        future.set_result(None)
                else:
                    still.append((at, future))
            self._offset_waiters[partition] = still
        target = self._catch_up.get(partition)
        if target is not None and offset >= target:
            del self._catch_up[partition]
            if not self._catch_up:
                self._on_caught_up()
        alone = self._partition_catch_up.get(partition)
        if alone is not None and offset >= alone[0]:
            del self._partition_catch_up[partition]
            alone[1]()
