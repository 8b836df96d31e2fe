"""Rebuilding and checking state from the log (docs/architecture.md, "The idea": the log
is the source of truth).

- ``rebuild_from_state_log``: write the RocksDB tables of a data dir from `eventq.jobs`
  (eventq/run/restore.py: faust's own layout and persisted changelog offsets, so a server
  started on it resumes recovery where the rebuild stopped).
- ``derive_from_commands``: run the pure core over `eventq.commands` from the start, in
  offset order per partition, exactly as the processor does, and return the state.
- ``compare``: job-by-job differences between two states.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from eventq.core import CodecError, Input, Job, State, decode_command, decode_input, state_digest
from eventq.core.batch import NOTHING_ADMITTED, admits, position, read_record
from eventq.core.commands import NO_JOB_COMMANDS
from eventq.core.digest import input_entries
from eventq.core.followups import SideRecord
from eventq.core.machine import ALREADY_APPLIED, Accepted, Ignored
from eventq.core.step import Step, step
from eventq.core.workflow import INPUT_KEY_PREFIX, input_ids
from eventq.kafka.logreader import Progress, Record, Undecodable, end_offsets, read_topic
from eventq.kafka.security import KafkaTarget
from eventq.limits import MAX_STATE_RECORD_BYTES
from eventq.run import statedir
from eventq.run.restore import open_table, restore_tables, table_path
from eventq.state.jobs_table import slims_of


class ReplayError(RuntimeError):
    """The replay cannot run; the message says why and what to do."""


@dataclass
class RebuildReport:
    jobs_by_state: Counter[State] = field(default_factory=Counter)
    records_read: int = 0
    partitions: int = 0
    undecodable: Undecodable = field(default_factory=Undecodable)

    @property
    def jobs(self) -> int:
        return sum(self.jobs_by_state.values())


def rebuild_from_state_log(
    bootstrap: KafkaTarget, jobs_topic: str, state_dir: Path, progress: Progress | None = None
) -> RebuildReport:
    """Replace the data dir's tables with the newest record per key of `eventq.jobs`
    (eventq/run/restore.py, the server's own restore), then count its jobs by state."""
    statedir.refuse_if_in_use(state_dir)
    statedir.discard_tables(state_dir)
    statedir.release(state_dir)  # a crashed server's marker: its tables are rebuilt now
    restored = restore_tables(bootstrap, jobs_topic, state_dir, None, progress)
    report = RebuildReport(records_read=restored.records, partitions=len(restored.partitions))

    def undecodable(partition: int, key: bytes, error: Exception) -> None:
        report.undecodable.count += 1
        if len(report.undecodable.examples) < 20:
            report.undecodable.examples.append(
                f"{jobs_topic}[{partition}] key {key!r}: {error}")

    for partition in restored.partitions:
        db = open_table(table_path(state_dir, partition))
        try:
            for slim in slims_of(db, partition, undecodable):
                report.jobs_by_state[slim.state] += 1
        finally:
            db.close()
    return report


@dataclass
class Derived:
    """The state folded from the command log so far; ``feed`` it records in offset order
    per partition (partitions may interleave), e.g. incrementally as the log grows."""

    jobs: dict[uuid.UUID, Job] = field(default_factory=dict)
    # Workflows' inputs, kept beside the dependents (docs/workflows.md, "Inputs"):
    # (dependent, upstream) -> what the upstream handed on. The digest covers them.
    inputs: InputsByEdge = field(default_factory=dict)
    commands: int = 0
    outcomes: Counter = field(default_factory=Counter)
    undecodable: Undecodable = field(default_factory=Undecodable)
    max_state_record_bytes: int = MAX_STATE_RECORD_BYTES  # the processor's, to agree
    watermarks: dict[int, int] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)  # partition -> next to read
    admitted: dict[int, int] = field(default_factory=dict)  # partition -> bulk position
    readmitted: int = 0  # slice records skipped as second copies

    def feed(self, record: Record) -> None:
        """Fold one record of the command log (one command or a batch) exactly as the
        processor does (streams/processor.py: the same positions, watermark rule and
        ``step``, so rejections agree too)."""
        self.next_offsets[record.partition] = record.offset + 1
        try:
            source, items = read_record(record.value)
        except CodecError as error:
            self.commands += 1
            self.undecodable.note(record, error)
            return
        if source is not None:  # a slice of the bulk lane: skip a second copy of one
            admitted = self.admitted.get(record.partition, NOTHING_ADMITTED)
            if source.partition != record.partition or not admits(source, admitted):
                self.readmitted += 1
                return
            self.admitted[record.partition] = source.end
        for index, data in enumerate(items):
            self.commands += 1
            self._feed_command(record, position(record.offset, index), data)

    def _feed_command(self, record: Record, at: int, data: bytes) -> None:
        try:
            command = decode_command(data).command
        except CodecError as error:
            self.undecodable.note(record, error)
            return
        if isinstance(command, NO_JOB_COMMANDS):  # a queue's or a recurrence's: no job
            return
        job = self.jobs.get(command.job_id)
        if job is None and at <= self.watermarks.get(record.partition, -1):
            result = Step(Ignored(ALREADY_APPLIED), None)  # never happens in one clean pass
        else:
            result = step(job, command, record.timestamp_ms, at, self.max_state_record_bytes)
        self.outcomes[type(result.outcome).__name__] += 1
        if isinstance(result.outcome, Accepted):
            self._keep_inputs(result.side)
            if result.removes:
                self.jobs.pop(command.job_id, None)
                self.watermarks[record.partition] = at
            else:
                assert result.job is not None  # an accepted step that keeps the job
                self.jobs[command.job_id] = result.job


    def _keep_inputs(self, side: tuple[SideRecord, ...]) -> None:
        # Only inputs: registrations are bookkeeping the processor reads, not state
        # (their effects are the notices, which are commands in this log).
        for key, value in side:
            if key.startswith(INPUT_KEY_PREFIX):
                ids = input_ids(key)
                if value is None:
                    self.inputs.pop(ids, None)
                else:
                    self.inputs[ids] = decode_input(value)

    def digest(self) -> str:
        """The state digest of the jobs and inputs folded so far (eventq/core/digest.py),
        to compare with a live server's ``inspect digest``."""
        return state_digest(self.jobs.values(), input_entries(self.inputs))


def derive_from_commands(
    bootstrap: KafkaTarget,
    commands_topic: str,
    progress: Progress | None = None,
    max_state_record_bytes: int = MAX_STATE_RECORD_BYTES,
) -> Derived:
    """The state the processor must have reached, from `eventq.commands` alone."""
    for partition, (low, _high) in end_offsets(bootstrap, commands_topic).items():
        if low > 0:
            raise ReplayError(
                f"{commands_topic} partition {partition} starts at offset {low}: retention "
                "has removed the beginning of the command log, so state can no longer be "
                "re-derived from it (use the state log: eventq replay)"
            )
    derived = Derived(max_state_record_bytes=max_state_record_bytes)
    for record in read_topic(bootstrap, commands_topic, progress):
        derived.feed(record)
    return derived


def derive_more(bootstrap: KafkaTarget, commands_topic: str, derived: Derived) -> Derived:
    """Fold what the command log gained since ``derived`` was last fed."""
    for record in read_topic(bootstrap, commands_topic, start=derived.next_offsets):
        derived.feed(record)
    return derived


@dataclass(frozen=True)
class Difference:
    job_id: uuid.UUID
    expected: Job | None
    actual: Job | None

    def describe(self) -> str:
        if self.actual is None:
            return f"{self.job_id}: missing from the state log (commands say {self.expected})"
        if self.expected is None:
            return f"{self.job_id}: in the state log only ({self.actual})"
        fields = [
            f"{name}: commands say {getattr(self.expected, name)!r:.60}, "
            f"state log says {getattr(self.actual, name)!r:.60}"
            for name in Job.__dataclass_fields__
            if getattr(self.expected, name) != getattr(self.actual, name)
        ]
        return f"{self.job_id}: " + "; ".join(fields)


def compare(expected: dict[uuid.UUID, Job], actual: dict[uuid.UUID, Job]) -> list[Difference]:
    return [
        Difference(job_id, expected.get(job_id), actual.get(job_id))
        for job_id in sorted(expected.keys() | actual.keys())
        if expected.get(job_id) != actual.get(job_id)
    ]


InputsByEdge = dict[tuple[uuid.UUID, uuid.UUID], Input]  # (dependent, upstream) -> input


def compare_inputs(expected: InputsByEdge, actual: InputsByEdge) -> list[str]:
    """Workflows' inputs that differ (docs/workflows.md, "Inputs"), one line each."""
    lines = []
    for dependent, upstream in sorted(expected.keys() | actual.keys()):
        want, have = expected.get((dependent, upstream)), actual.get((dependent, upstream))
        if want == have:
            continue
        if have is None:
            lines.append(f"{dependent}: the input from {upstream} is missing from the state log "
                         f"(commands say {want!r:.80})")
        elif want is None:
            lines.append(f"{dependent}: the input from {upstream} is in the state log only "
                         f"({have!r:.80})")
        else:
            lines.append(f"{dependent}: the input from {upstream}: commands say {want!r:.80}, "
                         f"state log says {have!r:.80}")
    return lines


def count_by_state(jobs: Iterable[Job]) -> dict[str, int]:
    counts = Counter(job.state for job in jobs)
    return {state.name: counts.get(state, 0) for state in State}
