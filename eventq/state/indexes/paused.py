"""Paused queues (docs/protocol.md, "eventq extensions", pause) as each owned
partition's log says.

Every partition gets every pause and resume, and a queue is paused here while any of
them says so (they agree once each has applied the same commands): a partition that
moves away takes its view with it.

Invariant: a partition is here only while it is owned (``drop_partition`` forgets it).
"""

from __future__ import annotations

from collections.abc import Iterable


class Paused:
    """partition -> the names its log has paused and not resumed."""

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[int, set[str]] = {}

    def set(self, partition: int, name: str, paused: bool) -> None:
        """A pause or resume applied in ``partition``."""
        names = self._names.setdefault(partition, set())
        if paused:
            names.add(name)
        else:
            names.discard(name)

    def drop_partition(self, partition: int) -> None:
        self._names.pop(partition, None)

    def __contains__(self, name: str) -> bool:
        """Whether any owned partition says ``name`` is paused."""
        return any(name in names for names in self._names.values())

    def leasable(self, names: Iterable[str]) -> list[str]:
        """``names`` once each, paused queues left out (they hand out no jobs)."""
        unique = dict.fromkeys(names)
        if any(self._names.values()):
            return [name for name in unique if name not in self]
        return list(unique)
