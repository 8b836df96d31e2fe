"""Queue names known without jobs: named by a lease, a pause, or a job that left.

A lease names its queues into being (docs/protocol.md, "inspect"), and one lease line
can name 2,500 new queues, each an empty queue object of 740 bytes, never freed:
leases naming random queues would grow the server without bound (docs/architecture.md,
"Hostile inputs"). So a queue holding no ready, scheduled or WAITING job is only a
name here, and at most ``MAX_EMPTY_QUEUE_NAMES`` of those are remembered, the least
recently named forgotten first.

Invariant: at most ``MAX_EMPTY_QUEUE_NAMES`` names, in the order last named. (That
none of them names a queue holding jobs is ``Queues``' to keep.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import KeysView

MAX_EMPTY_QUEUE_NAMES = 10_000


class EmptyNames:
    """A bounded set of names, least recently named first."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def __len__(self) -> int:
        return len(self.names)

    def keys(self) -> KeysView[str]:
        return self.names.keys()

    def remember(self, name: str) -> None:
        """Name ``name`` now (the least recently named goes past the bound)."""
        names = self.names
        names[name] = None
        names.move_to_end(name)
        if len(names) > MAX_EMPTY_QUEUE_NAMES:
            names.popitem(last=False)

    def forget(self, name: str) -> None:
        """``name`` holds jobs now: a queue, no longer only a name."""
        self.names.pop(name, None)
