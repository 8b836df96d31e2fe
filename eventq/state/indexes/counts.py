"""Live jobs per queue name and state, for the dashboard and the metrics
(docs/architecture.md, "Metrics and the dashboard").

Invariant: a name is here exactly while some live job has it, with each state's
count of its live jobs (one list of counts per name, none per job).
"""

from __future__ import annotations

from eventq.core.job import State

from .entries import STATES


class StateCounts:
    """name -> [live jobs in each state], indexed by the state's number."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}

    def add(self, name: str, state: State) -> None:
        counts = self._counts.get(name)
        if counts is None:
            counts = self._counts[name] = [0] * len(STATES)
        counts[state] += 1

    def remove(self, name: str, state: State) -> None:
        counts = self._counts[name]
        counts[state] -= 1
        if not any(counts):
            del self._counts[name]

    def by_name(self) -> dict[str, dict[State, int]]:
        """{queue name: {state: live jobs}} of the queues holding any job."""
        return {name: {state: counts[state] for state in STATES}
                for name, counts in self._counts.items()}
