"""A catch-up that stops moving is read again (a restart must never wait forever).

After a recovery the processor re-applies the uncommitted tail of the command log
before the gateway serves (docs/architecture.md, "The changelog"). Once, in CI, a restart's
catch-up stopped for good: both partitions applied through offset 150 of 170 and 174,
and no further record was delivered (faust's fetcher had moved past records it never
handed over, at the boundary between recovery and the seek of never-committed
partitions; nothing else wrote to the log, so nothing ever came after them). Reading a
partition again from the record after the last one applied is always safe (positions
make re-applying a no-op), so a partition that is behind its target and has not moved
for ``STALL_S`` is sought back there.
"""

from __future__ import annotations

STALL_S = 10.0  # no record applied for this long while behind: read the partition again
CHECK_EVERY_S = 1.0


class CatchUpWatch:
    """Pure: fed (partition -> last offset applied) of the partitions still catching
    up, with the time; says which have stalled and from which offset to read them."""

    def __init__(self, stall_s: float = STALL_S) -> None:
        self._stall_s = stall_s
        self._seen: dict[int, tuple[int, float]] = {}  # partition -> (applied, since)

    def stalled(self, applied: dict[int, int], now: float) -> dict[int, int]:
        """Partitions to read again, each with the offset to read from."""
        again = {}
        for partition, through in applied.items():
            seen = self._seen.get(partition)
            if seen is None or seen[0] != through:
                self._seen[partition] = (through, now)
            elif now - seen[1] >= self._stall_s:
                again[partition] = through + 1
                self._seen[partition] = (through, now)  # next try after another stall
        for partition in set(self._seen) - set(applied):
            del self._seen[partition]  # caught up
        return again
