"""Workflows' follow-up commands, written to `eventq.commands` before the command that
caused them is committed (docs/workflows.md, "Determinism"; docs/architecture.md,
"Workflows").

The processor hands each applied record's follow-ups here (streams/processor.py), each
under its key: ``depend`` into an upstream's partition, ``upstream`` notices into a
dependent's. They are written like the gateway's commands, by a ``CommandWriter``
(streams/command_writer.py: a lane per partition, acks=all on the gateway's idempotent
command producer), and each write is handed to the causing partition's open
transaction (streams/faust/transactions.py ``follow_up``), whose commit waits until the
broker has them.
So a crash before that commit applies the record again, which writes its follow-ups
again (a duplicate, ignored by position where it is applied), and a crash after it
finds them in the log. A record read again whose command comes back
``ALREADY_APPLIED`` writes none: its follow-ups were acknowledged before the commit
its state came from.

Not in the changelog's transaction: the command log is read by faust, and an open
transaction on a command partition would hold back its last stable offset. Nor need
they be: a follow-up is decided from the fold of a prefix of its partition's log, so
one written by a stale owner (fenced since, its transaction never committed) is a
command the partition's next owner writes again from the same prefix: a duplicate.
"""

from __future__ import annotations

from typing import Callable, Sequence

from eventq.core import encode_command
from eventq.core.followups import FollowUp
from eventq.core.partitioner import partition_for_key
from streams.command_writer import CommandWriter, RecordProducer
from streams.faust.transactions import Changelogs


class FollowUpWriter:
    """The processor's ``follow_ups``: write them, and make the partition's next commit
    wait for them."""

    def __init__(self, writer: CommandWriter, changelogs: Changelogs, partitions: int,
                 ) -> None:
        self.writer = writer
        self._changelogs = changelogs
        self._partitions = partitions
        self.written = 0

    def __call__(self, partition: int, follow_ups: Sequence[FollowUp]) -> None:
        log_ = self._changelogs.open_log(partition)
        if log_ is None:
            # Nothing applied in the partition can be committed here (its persist says
            # so): whoever commits the record applies it again and writes them then.
            return
        for follow_up in follow_ups:
            key = follow_up.key
            try:
                written = self.writer.write(
                    partition_for_key(key, self._partitions), key,
                    encode_command(follow_up.command))
            except Exception as error:  # no running loop: nothing is written
                log_.fail(error)
                return
            log_.follow_up(written)
            self.written += 1


def follow_up_writer(producer: Callable[[], RecordProducer | None], commands_topic: str,
                     partitions: int,
                     changelogs: Changelogs) -> FollowUpWriter:
    """A writer of its own over the gateway's producer (its lanes never wait behind
    the gateway's commands). Its lanes send the next record once the last is
    acknowledged, without waiting for it to be applied as the gateway's do (a batching
    heuristic for replies): a commit waits for these acknowledgements, and during a
    rebalance a partition being moved applies nothing, so each record would wait out
    ``APPLY_WAIT_S`` and a few could outlast the commit's timeout."""
    return FollowUpWriter(CommandWriter(producer, commands_topic, partitions),
                          changelogs, partitions)
