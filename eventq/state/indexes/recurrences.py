"""The recurrences of the owned partitions (docs/workflows.md, "Recurring jobs").

Each is ``name -> (partition, every ms, next slot)`` and its queue (its job name, for
a token's prefix: docs/security.md, "Queue-name prefixes"), with a heap of (when to
check, name) for the timer. Heap items are checked when popped: a changed record pushes
its own, and a stale item (a removed or changed recurrence's) is dropped then.

Invariant: each recurrence has an item in the heap no later than its next slot's
time, until ``due`` gives it (the timer then ``rearm``s it until its fire is applied
and ``put`` pushes the new record's).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from eventq.core.recurrence import Recurrence

from .deadlines import HEAP_SLACK, HEAP_SLACK_ITEMS


class Recurrences:
    """The recurrences' records as their partitions' logs left them, and their timer."""

    __slots__ = ("_records", "_queues", "_checks")

    def __init__(self) -> None:
        self._records: dict[str, tuple[int, int, int]] = {}  # (partition, every ms, next slot)
        self._queues: dict[str, str] = {}  # each one's queue (its job name)
        self._checks: list[tuple[int, str]] = []  # heap of (when to check, name)

    def put(self, partition: int, record: Recurrence) -> None:
        """A recurrence's record as its partition's log left it (a recur, or a fire)."""
        self._records[record.name] = (partition, record.every_ms, record.next_slot)
        self._queues[record.name] = record.definition.job_name
        heapq.heappush(self._checks, (record.next_ms, record.name))
        if len(self._checks) > HEAP_SLACK * len(self._records) + HEAP_SLACK_ITEMS:
            self._checks = sorted((self._next_ms(name), name) for name in self._records)

    def remove(self, name: str) -> None:
        self._records.pop(name, None)
        self._queues.pop(name, None)

    def drop_partition(self, partition: int) -> None:
        for name in [n for n, (p, _, _) in self._records.items() if p == partition]:
            del self._records[name]
            self._queues.pop(name, None)

    def _next_ms(self, name: str) -> int:
        _, every_ms, next_slot = self._records[name]
        return every_ms * next_slot

    def names(self, prefix: str | None = None) -> list[str]:
        """The recurrences, sorted bytewise (inspect recurring); ``prefix``: only those
        whose queue starts with it (docs/security.md, "Queue-name prefixes")."""
        names: Iterable[str] = self._records.keys()
        if prefix is not None:
            names = {name for name in names if self._queues[name].startswith(prefix)}
        return sorted(names, key=lambda name: name.encode())

    def next_ms(self, name: str) -> int | None:
        """When recurrence ``name``'s next slot is due (None: not one of this process)."""
        return self._next_ms(name) if name in self._records else None

    def due(self, now_ms: int) -> list[tuple[str, int, int]]:
        """(name, every ms, next slot) of each recurrence whose next slot is due by
        ``now_ms``: the timer sends its ``fire``, and ``rearm``s it."""
        heap = self._checks
        found: dict[str, tuple[str, int, int]] = {}
        while heap and heap[0][0] <= now_ms:
            _, name = heapq.heappop(heap)
            known = self._records.get(name)
            if known is not None and known[1] * known[2] <= now_ms:
                found[name] = (name, known[1], known[2])
        return list(found.values())

    def rearm(self, name: str, when_ms: int) -> None:
        """Check recurrence ``name`` again at ``when_ms`` (its fire not applied yet)."""
        if name in self._records:
            heapq.heappush(self._checks, (when_ms, name))

    def next_check_ms(self) -> int | None:
        """When the timer is to check a recurrence next."""
        return self._checks[0][0] if self._checks else None
