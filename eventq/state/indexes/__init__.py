"""Derived in-memory indexes over the live jobs of the partitions this process owns.

docs/architecture.md, "The processor": ready jobs per queue name in lease order, scheduled
jobs per name, WAITING jobs per name (``queues``), live jobs per tag by created time,
then id (``tags``), FAILED jobs per failure group (``failed``), live jobs per queue
and state (``counts``), and deadline heaps: the jobs' TTR and TTL (``deadlines``), the
deadlines of registrations (``registrations``) and the recurrences' next slots
(``recurrences``); paused queues (``paused``) and the names of queues without jobs
(``names``). Each module is one index with its own invariants; ``JobIndex``
(``job_index``) keeps them together. They are pure derived data: rebuilt from the jobs
table when a partition is assigned, updated by the processor after every applied
command, and read by the gateway. No I/O and no clock here: ``now_ms`` is passed in.

Memory per job is the design constraint (docs/architecture.md, "Memory and restores": at
most 400 bytes of RSS per queued job, at 1,000,000 jobs). A job costs no Python object
per field here:

- its entry is one ``bytes`` (``entries``), keyed by the id's 128-bit integer;
- its place in a queue is one integer whose order is the lease order (``keys``:
  ``order_key`` packed most significant field first, the id in the low bits);
- its deadline is one integer in a heap: the time, the kind, the id;
- a registration with a deadline (eventq/core/workflow.py) is one integer in a heap of
  its own: the deadline and the upstream's id;
- a job with tags is one integer (created time, id) in each of its tags' sorted lists:
  a job without tags costs nothing there.

Payloads and results are never here: they stay in RocksDB.
"""

from .deadlines import HEAP_SLACK, REPUSH_WITHIN_MS, Due
from .entries import Entry
from .job_index import JobIndex
from .keys import NEVER_MS, TTL, TTR, order_key, tagged_key
from .names import MAX_EMPTY_QUEUE_NAMES
from .queues import SPARE_QUEUES, Queue

__all__ = [
    "HEAP_SLACK", "MAX_EMPTY_QUEUE_NAMES", "NEVER_MS", "REPUSH_WITHIN_MS", "SPARE_QUEUES",
    "TTL", "TTR", "Due", "Entry", "JobIndex", "Queue", "order_key", "tagged_key",
]
