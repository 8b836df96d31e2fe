"""[eventq] FAILED jobs per failure group (docs/workflows.md, "Failure groups and
retry"): ``inspect failed``, oldest failure first.

A FAILED job with a group is one integer (``keys.failed_key``: failure time, id) in
its group's sorted list, and its (group, key) is kept by id to take it out again.

Invariants: a group has a list exactly while some live job is FAILED in it; each
such job's key is in its group's list and in no other.
"""

from __future__ import annotations

import sys

from sortedcontainers import SortedList

from .keys import failed_key


class FailureGroups:
    """group -> the sorted ``failed_key``s of its FAILED jobs."""

    __slots__ = ("_members", "_of")

    def __init__(self) -> None:
        self._members: dict[str, SortedList] = {}
        self._of: dict[int, tuple[str, int]] = {}  # id int -> (group, key)

    def add(self, id_int: int, group: str, failed_ms: int) -> None:
        """Enter a FAILED job that is in no group (``discard`` it first)."""
        group = sys.intern(group)  # one string per group, not per job
        key = failed_key(failed_ms, id_int)
        self._of[id_int] = (group, key)
        members = self._members.get(group)
        if members is None:
            members = self._members[group] = SortedList()
        members.add(key)

    def discard(self, id_int: int) -> None:
        failed = self._of.pop(id_int, None)
        if failed is not None:
            group, key = failed
            members = self._members[group]
            members.discard(key)
            if not members:
                del self._members[group]

    def by_name(self) -> list[tuple[str, SortedList]]:
        """(group, its keys) of every group that has some, by name bytewise."""
        return [(group, self._members[group])
                for group in sorted(self._members, key=lambda group: group.encode())]

    def get(self, group: str) -> SortedList | None:
        return self._members.get(group)
