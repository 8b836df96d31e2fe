"""A dependent's inputs are read from one snapshot, one at a time as the reply reaches
them (streams/store.py ``PinnedJobs.inputs``): 100 results of 1 MiB are never held
together, and what the processor writes meanwhile does not change the reply."""

from __future__ import annotations

import uuid

from eventq.core import Input, Job, Link, State, UpstreamOutcome, encode_input
from eventq.core.workflow import input_key
from streams.memory import MemoryDB, MemoryStore

T0 = 1_700_000_000_000


class CountingSnapshot(MemoryDB):
    """A snapshot that counts the values read from it (keys are free)."""

    __slots__ = ("reads",)

    def __init__(self, data: dict[bytes, bytes]) -> None:
        super().__init__(data)
        self.reads = 0

    def __getitem__(self, key: bytes) -> bytes:
        self.reads += 1
        return super().__getitem__(key)


def dependent_with(upstreams: list[uuid.UUID], finished: list[uuid.UUID]) -> Job:
    links = tuple(Link(up, UpstreamOutcome.COMPLETED, 1, T0) if up in finished else Link(up)
                  for up in upstreams)
    return Job(id=uuid.uuid4(), name="q", ttr_ms=1000, ttl_ms=60_000, payload=b"", priority=0,
               max_attempts=0, max_fails=0, attempts=0, fails=0, state=State.WAITING,
               created_ms=T0, scheduled_ms=None, expires_ms=T0 + 60_000,
               lease_deadline_ms=None, result=None, result_ok=None, version=1, upstreams=links,
               added_at=1)


def test_inputs_are_counted_from_keys_and_read_one_at_a_time_in_after_order():
    upstreams = [uuid.uuid4() for _ in range(4)]
    finished = [upstreams[2], upstreams[0], upstreams[3]]  # finished in another order
    job = dependent_with(upstreams, finished)
    store = MemoryStore(partitions=1, active=[0])
    data = {input_key(job.id, up): encode_input(Input(True, b"result of %d" % upstreams.index(up)))
            for up in finished}
    snapshot = CountingSnapshot(data)
    pinned = store.pinned([])  # no partition yet: give it the counting snapshot
    pinned._snapshots[0] = snapshot

    count, entries = pinned.inputs(job)
    assert (count, snapshot.reads) == (3, 0)  # nothing read before the reply asks
    first = next(entries)
    assert (first, snapshot.reads) == ((upstreams[0], Input(True, b"result of 0")), 1)
    assert list(entries) == [(upstreams[2], Input(True, b"result of 2")),
                             (upstreams[3], Input(True, b"result of 3"))]
    assert snapshot.reads == 3
