"""Live jobs per tag (docs/workflows.md, "Tags"): ``inspect tagged``, in any state, by
created time, then id.

A job with tags is one integer (``keys.tagged_key``: created time, id) in each of its
tags' sorted lists; its entry holds its tags, to find its lists again when it goes. A
job without tags costs nothing here.

Invariants: a tag has a list exactly while some live job has it; a job's key is in
the list of each of its tags, and in no other.
"""

from __future__ import annotations

from sortedcontainers import SortedList

from eventq.core.slim import Slim

from .entries import Entry
from .keys import tagged_key


class Tagged:
    """tag -> the sorted ``tagged_key``s of the live jobs with it."""

    __slots__ = ("_jobs",)

    def __init__(self) -> None:
        self._jobs: dict[str, SortedList] = {}

    def __len__(self) -> int:
        """How many tags some live job has."""
        return len(self._jobs)

    def get(self, tag: str) -> SortedList | None:
        return self._jobs.get(tag)

    def counts(self) -> dict[str, int]:
        """{tag: live jobs with it}."""
        return {tag: len(jobs) for tag, jobs in self._jobs.items()}

    def change(self, old: Entry | None, slim: Slim) -> None:
        """The job ``slim`` was put (``old``: its entry before, None if new)."""
        if (slim.tags or (old is not None and old.tags)) and (
            old is None or old.tags != slim.tags or old.created_ms != slim.created_ms
        ):  # a job's tags never change: only its first put (or another job's) gets here
            if old is not None and old.tags:
                self.discard(slim.id, old.created_ms, old.tags)
            self.add(slim.id, slim.created_ms, slim.tags)

    def add(self, id_int: int, created_ms: int, tags: tuple[str, ...],
            into: dict[str, list[int]] | None = None) -> None:
        """Enter a job under each of its tags (or in ``into``, to be sorted in at once
        by ``fill``)."""
        key = tagged_key(created_ms, id_int)
        for tag in tags:
            if into is not None:
                into.setdefault(tag, []).append(key)
                continue
            jobs = self._jobs.get(tag)
            if jobs is None:
                jobs = self._jobs[tag] = SortedList()
            jobs.add(key)

    def fill(self, keys_by_tag: dict[str, list[int]]) -> None:
        """Sort a rebuild's keys into the tags' lists."""
        for tag, keys in keys_by_tag.items():
            jobs = self._jobs.get(tag)
            if jobs is None:
                self._jobs[tag] = SortedList(keys)
            else:
                jobs.update(keys)

    def discard(self, id_int: int, created_ms: int, tags: tuple[str, ...]) -> None:
        key = tagged_key(created_ms, id_int)
        for tag in tags:
            jobs = self._jobs[tag]
            jobs.discard(key)
            if not jobs:
                del self._jobs[tag]
