"""``eventq export-cmdlog``: eventq's live jobs as a workq command log.

Reads the live jobs from the state log (``logreader.latest_state``: the newest record
per job, tombstones remove), maps each to a workq job (``mapping.workq_job``: ms times
become ns exactly) and writes them with ``eventq.cmdlog.write_jobs``, which replays
what it wrote and lists every job that does not come back exactly. The target must be
a new or empty directory: an export never mixes with existing files.

What cannot round-trip is reported, never silently changed: jobs without TTL (``run``
jobs; workq never logged them) are not written; LEASED jobs lose their lease deadline
(they replay as LEASED in workq and come back PENDING when imported into eventq); eventq's
own -backoff and -after (docs/workflows.md, "Dependencies"; a WAITING job is written as
NEW) are listed with the jobs that do not replay exactly, as is whatever ``write_jobs``
finds (fails a workq log cannot carry, for example).

The state log is what eventq has made durable: a change the gateway has just answered
may take a moment to reach it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eventq.cmdlog import DEFAULT_MAX_SEGMENT_BYTES, HEADER, segment_name, write_jobs
from eventq.console.progress import Progress
from eventq.core import Job, State
from eventq.migrate.importer import MAX_LISTED, MigrateError
from eventq.migrate.mapping import REPLAY_LOSSES, export_notes, exportable, workq_job

if TYPE_CHECKING:  # only named: the settings are built by whoever runs the export
    from eventq.settings import Settings


@dataclass
class ExportOptions:
    directory: str
    max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES


@dataclass
class ExportResult:
    directory: str
    topic: str
    state_records: int = 0
    live_jobs: int = 0
    exported: int = 0
    by_state: dict[str, int] = field(default_factory=dict)
    records: int = 0
    paths: list[str] = field(default_factory=list)
    not_exported: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    leased: list[uuid.UUID] = field(default_factory=list)
    inexact: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    # [eventq] recurrences (docs/workflows.md, "Recurring jobs"): workq has none; the
    # jobs they added are exported as any job.
    recurrences: list[str] = field(default_factory=list)
    undecodable: int = 0
    undecodable_examples: list[str] = field(default_factory=list)
    read_seconds: float = 0.0
    write_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.undecodable == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "topic": self.topic,
            "live_jobs": self.live_jobs,
            "exported": self.exported,
            "by_state": dict(self.by_state),
            "records": self.records,
            "files": list(self.paths),
            "not_exported": [{"id": str(i), "reason": r} for i, r in self.not_exported],
            "leased": [str(i) for i in self.leased],
            "inexact": [{"id": str(i), "difference": d} for i, d in self.inexact],
            "recurrences_not_exported": list(self.recurrences),
            "undecodable": self.undecodable,
            "undecodable_examples": list(self.undecodable_examples),
            "read_seconds": round(self.read_seconds, 3),
            "write_seconds": round(self.write_seconds, 3),
            "ok": self.ok,
        }

    def lines(self) -> list[str]:
        states = ", ".join(f"{s} {n:,}" for s, n in sorted(self.by_state.items())) or "none"
        out = [
            f"Exported {self.exported:,} of {self.live_jobs:,} live jobs from {self.topic} "
            f"to {self.directory}",
            f"  jobs by state: {states}",
            f"  wrote {self.records:,} records in {len(self.paths)} segment file(s) "
            f"(read {self.read_seconds:.1f}s, write {self.write_seconds:.1f}s)",
        ]
        if self.not_exported:
            out.append(f"  not exported (workq's log cannot hold them): {len(self.not_exported):,}")
            out += [f"    {i}: {r}" for i, r in self.not_exported[:MAX_LISTED]]
        if self.leased:
            out.append(
                f"  LEASED jobs (lease deadline not kept; they come back PENDING when "
                f"imported into eventq): {len(self.leased):,}"
            )
            out += [f"    {i}" for i in self.leased[:MAX_LISTED]]
        if self.inexact:
            out.append(
                f"  jobs that do not replay exactly (workq's records cannot express it): "
                f"{len(self.inexact):,}"
            )
            out += [f"    {i}: {d}" for i, d in self.inexact[:MAX_LISTED]]
        if self.recurrences:
            out.append(f"  recurrences not exported (workq has no recurring jobs; the jobs "
                       f"they added are exported): {len(self.recurrences):,}")
            out += [f"    {name}" for name in self.recurrences[:MAX_LISTED]]
        if len(self.not_exported) + len(self.leased) + len(self.inexact) == 0:
            out.append("  every job round-trips exactly")
        if self.undecodable:
            out.append(
                f"  UNREADABLE state records (those jobs are missing from the export): "
                f"{self.undecodable:,}"
            )
            out += [f"    {e}" for e in self.undecodable_examples]
        return out


def check_target(directory: str) -> None:
    if os.path.exists(directory):
        if not os.path.isdir(directory):
            raise MigrateError(
                f"{directory} exists and is not a directory: give a new or empty directory"
            )
        entries = os.listdir(directory)
        if entries:
            raise MigrateError(
                f"{directory} is not empty ({len(entries)} entries): export-cmdlog writes a "
                "new command log and never mixes with existing files. Give a new or empty "
                "directory."
            )


def export_order(job: Job) -> tuple[int, bytes]:
    return (job.created_ms, job.id.bytes)


def run_export(settings: Settings, options: ExportOptions, progress: Progress) -> ExportResult:
    from eventq.kafka.logreader import latest_state
    from eventq.migrate.kafka_io import KafkaUnavailable, topic_partitions

    check_target(options.directory)
    try:
        topic_partitions(settings.kafka, [settings.jobs_topic])
    except KafkaUnavailable as error:
        raise MigrateError(str(error)) from None
    result = ExportResult(options.directory, settings.jobs_topic)
    progress.start("reading", None, "records")
    began = time.monotonic()
    state = latest_state(
        settings.kafka,
        settings.jobs_topic,
        lambda done, total: progress.update(done, total=total),
    )
    jobs, bad = state.jobs, state.undecodable
    result.recurrences = list(state.recurrences)
    result.read_seconds = time.monotonic() - began
    progress.finish(len(jobs), "live jobs")
    result.undecodable = bad.count
    result.undecodable_examples = list(bad.examples)
    result.live_jobs = len(jobs)
    write_export(jobs.values(), options, result, progress)
    return result


def write_export(jobs: Iterable[Job], options: ExportOptions, result: ExportResult,
                 progress: Progress) -> None:
    """Write the live ``jobs`` read into ``result`` as a workq command log, and report
    in it what cannot round-trip."""
    chosen = []
    # eventq's own flags (docs/protocol.md, "-backoff"; docs/workflows.md, "Dependencies"
    # for -after and "Tags"): workq's log cannot hold them, and they are listed with the
    # jobs that do not replay exactly.
    replay_losses = []
    for job in sorted(jobs, key=export_order):
        notes = export_notes(job)
        if not exportable(job):
            result.not_exported.append((job.id, "; ".join(notes)))
            continue
        if job.state is State.LEASED:
            result.leased.append(job.id)
        replay_losses += [(job.id, note) for note in notes if note in REPLAY_LOSSES]
        chosen.append(workq_job(job))
    result.exported = len(chosen)
    counts: dict[str, int] = {}
    for exported in chosen:
        name = State(int(exported.state)).name
        counts[name] = counts.get(name, 0) + 1
    result.by_state = counts
    progress.start("writing", len(chosen), "jobs")
    began = time.monotonic()
    try:
        written = write_jobs(
            options.directory, chosen, max_segment_bytes=options.max_segment_bytes
        )
    except (OSError, ValueError) as error:
        raise MigrateError(f"cannot write {options.directory}: {error}") from None
    if not written.paths:
        # No job to write: still leave a valid, empty command log (a header-only segment).
        path = os.path.join(options.directory, segment_name(1))
        with open(path, "xb") as f:
            f.write(HEADER)
            f.flush()
            os.fsync(f.fileno())
        written.paths.append(path)
    result.write_seconds = time.monotonic() - began
    progress.finish(len(chosen))
    result.records = written.records
    result.paths = list(written.paths)
    result.inexact = list(written.inexact) + replay_losses
