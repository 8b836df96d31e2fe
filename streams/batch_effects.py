"""What one record of `eventq.commands` did, gathered while its commands are applied
(streams/apply.py) and then stored once (streams/processor.py): each job's last state,
the records beside the jobs, the follow-ups to hand on, the replies to send, and the
order its changelog is written in (docs/architecture.md, "The processor" and
"Batches").

A batch's changelog is ordered so that any prefix of it is safe to restore from (a
crash may leave any prefix of what was written since the last commit). Every tombstone
is preceded, in the same changelog partition, by the partition's watermark record (the
position of the last command that removed a job: streams/apply.py), so the live jobs'
states come first, then the watermark, then the tombstones. A prefix without the
watermark has no tombstone of this batch; with it, every state written before any
removal in the batch is there, and a job whose tombstone is missing is still present
and gets its removal again.

Workflows (docs/workflows.md, "Determinism"; docs/architecture.md, "Workflows"): records
beside the jobs (``Step.side``: a dependent's inputs, an upstream's registrations) are
stored with the batch, and first in its changelog: side records, live states, the
watermark, tombstones. Why that order keeps every prefix safe, given that the follow-ups
of the records in the prefix are in the command log: a side record goes with a job's state
(an input with the notice that changed its dependent, a registration deleted with its
upstream's ending or removal) or with no state at all (a ``depend``'s registration, an
``expire`` of an absent upstream that drops expired ones). A prefix that holds the state
or the watermark that makes the command read again ``ALREADY_APPLIED`` therefore holds its
side records too; a prefix that holds side records without their state re-applies the
command, which writes the same values again (what the registrations it reads lack was
deleted by this batch and its notices are in the log already; what they hold extra was
written by a later command of the batch: a later job of the dependent's id wins, and a
notice read from it tells of a real change, a duplicate its dependent passes over).

Slices (docs/architecture.md, "Lanes"): the partition's admitted-through offset is kept
like the watermark, in the table, and written last in the changelog: a prefix without
it re-reads the slice from the command log, where positions make that harmless.
"""

from __future__ import annotations

from eventq.core import Job
from eventq.core.followups import FollowUp
from eventq.state.jobs_table import BULK_ADMITTED_KEY, WATERMARK_KEY
from eventq.state.waiters import Applied

Changelog = list[tuple[bytes, "bytes | None"]]  # (key, value); None: a tombstone


class BatchEffects:
    """What one record's commands did: each job's last state, the records beside the
    jobs, the follow-ups to hand on, the replies to send."""

    __slots__ = ("jobs", "records", "side", "follow_ups", "removed", "replies", "handed",
                 "admitted")

    def __init__(self) -> None:
        self.jobs: dict[bytes, Job | None] = {}  # key -> the job after this batch
        self.records: dict[bytes, bytes | None] = {}  # key -> last state record or None
        self.side: dict[bytes, bytes | None] = {}  # key -> last side record or None
        self.follow_ups: list[FollowUp] = []  # in the order the commands gave them
        self.removed = False  # a removal moved the partition's watermark
        self.replies: list[tuple[int, Applied]] = []
        # Another process's commands: (its node, its request id, the reply), for it to
        # ask for (eventq/state/waiters.py, ``handed``).
        self.handed: list[tuple[str, int, bytes]] = []
        self.admitted: int | None = None  # a slice's last bulk offset

    def changelog(self, watermark: int | None) -> Changelog:
        """The records to store, in the order that keeps every prefix restorable (see
        the module's docstring): records beside the jobs (written and deleted), live
        states, the watermark, tombstones, and last the bulk offset this record
        admitted."""
        live = [(key, value) for key, value in self.records.items() if value is not None]
        dead: Changelog = [(key, None) for key, value in self.records.items() if value is None]
        records: Changelog = [*self.side.items(), *live]
        if dead or self.removed:
            assert watermark is not None
            records = [*records, (WATERMARK_KEY, str(watermark).encode()), *dead]
        if self.admitted is not None:
            records.append((BULK_ADMITTED_KEY, str(self.admitted).encode()))
        return records
