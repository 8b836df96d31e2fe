"""``eventq import-cmdlog``: a workq command log into eventq.

1. Read the directory's segments in order and replay them with workq's meaning
   (``eventq.cmdlog.Replayer``) at ``now`` (default: the wall clock). A corrupt record
   is reported with its file, offset and reason; ``on_corrupt="stop"`` (the default)
   ends the import there, before anything is published; ``"skip"`` reports each one
   and goes on (a record whose extent is unknown, such as a torn tail, loses the rest
   of its file).
2. Map every live job to an ``Import`` command (``mapping.import_command``: a complete
   snapshot, ms times, LEASED -> PENDING). A dry run stops here and reports.
3. Publish the commands to the bulk topic (``kafka_io.Publisher``), keyed and
   partitioned as every eventq producer does: the server admits them into the command
   log a slice at a time (docs/architecture.md, "Lanes"), so workers are never stalled.
4. Optionally wait until the running server has applied them: until its admission of
   the bulk topic has passed each command, then the state log shows the result.
   Each job is then *imported*, *already present* (the id was live in eventq: the
   import is refused as a duplicate and changes nothing, so re-running an import is
   harmless), *expired before import* (its TTL passed by the broker's clock when the
   command was written: eventq ignores it), or *gone* (applied, then removed before it
   could be seen).
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack

from eventq.cmdlog import CorruptRecord, Replayer, WorkqJob, WorkqState, iter_commands
from eventq.cmdlog.segments import SKIP, STOP, list_segments
from eventq.console.progress import Progress
from eventq.core import CodecError, EventType, Import, decode_state, encode_command
from eventq.core.batch import offset_of
from eventq.core.codec import EVENT_KEY, EVENT_KEYS, JOB_KEY, JOB_KEYS, TYPE_KEY, VERSION_KEY
from eventq.core.job import has_workflow, was_retried
from eventq.core.partitioner import job_key, partition_for_key
from eventq.kafka.bulklane import end_offsets
from eventq.migrate.mapping import Unimportable, import_command
from eventq.protocol.values import format_time

if TYPE_CHECKING:  # only named: the Kafka side is imported when it is used
    from eventq.migrate.kafka_io import PublishResult
    from eventq.settings import Settings

MAX_LISTED = 50  # corrupt records, unimportable jobs and failures listed in a report


class MigrateError(Exception):
    """A failure to report as one clear message (what went wrong and what to do)."""


@dataclass
class ImportOptions:
    directory: str
    now_ns: int | None = None  # the replay clock; None: the wall clock
    on_corrupt: str = STOP
    dry_run: bool = False
    wait: bool = True
    wait_timeout_s: float = 60.0  # give up when nothing progresses for this long


@dataclass
class ImportReport:
    directory: str
    now_ns: int
    on_corrupt: str
    dry_run: bool
    segments: int = 0
    bytes: int = 0
    records: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    skipped_expired: int = 0
    unknown_id: int = 0
    rejected: int = 0
    corrupt: list[CorruptRecord] = field(default_factory=list)
    stopped_at: CorruptRecord | None = None
    live_by_state: dict[str, int] = field(default_factory=dict)  # workq's states
    leased_requeued: int = 0
    unimportable: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    to_publish: int = 0
    read_seconds: float = 0.0
    plan_seconds: float = 0.0  # mapping the live jobs to Import commands
    # publishing
    topic: str = ""
    partitions: int = 0
    published: int = 0
    failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    publish_seconds: float = 0.0
    expired_before_import: int = 0
    # waiting
    waited: bool = False
    imported: int = 0
    already_present: int = 0
    already_present_different: int = 0
    gone: int = 0
    not_applied: int = 0
    wait_seconds: float = 0.0

    @property
    def live(self) -> int:
        return sum(self.live_by_state.values())

    @property
    def ok(self) -> bool:
        return (
            self.stopped_at is None
            and not self.unimportable
            and not self.failed
            and not self.not_applied
        )

    def records_per_s(self) -> float:
        return self.records / self.read_seconds if self.read_seconds > 0 else 0.0

    def jobs_per_s(self) -> float:
        return self.published / self.publish_seconds if self.publish_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        def corrupt(c: CorruptRecord) -> dict[str, Any]:
            return {"file": c.path, "offset": c.offset, "kind": c.kind, "reason": c.reason}

        return {
            "directory": self.directory,
            "now": format_time(self.now_ns // 1_000_000),
            "on_corrupt": self.on_corrupt,
            "dry_run": self.dry_run,
            "segments": self.segments,
            "bytes": self.bytes,
            "records": self.records,
            "records_by_type": dict(self.by_type),
            "skipped_expired": self.skipped_expired,
            "unknown_id": self.unknown_id,
            "rejected": self.rejected,
            "corrupt": [corrupt(c) for c in self.corrupt],
            "stopped_at": None if self.stopped_at is None else corrupt(self.stopped_at),
            "live_by_state": dict(self.live_by_state),
            "leased_requeued": self.leased_requeued,
            "unimportable": [{"id": str(i), "reason": r} for i, r in self.unimportable],
            "to_publish": self.to_publish,
            "read_seconds": round(self.read_seconds, 3),
            "plan_seconds": round(self.plan_seconds, 3),
            "records_per_s": round(self.records_per_s(), 1),
            "topic": self.topic,
            "partitions": self.partitions,
            "published": self.published,
            "failed": self.failed,
            "failures": [{"key": k, "reason": r} for k, r in self.failures],
            "publish_seconds": round(self.publish_seconds, 3),
            "jobs_per_s": round(self.jobs_per_s(), 1),
            "expired_before_import": self.expired_before_import,
            "waited": self.waited,
            "imported": self.imported,
            "already_present": self.already_present,
            "already_present_different": self.already_present_different,
            "gone": self.gone,
            "not_applied": self.not_applied,
            "wait_seconds": round(self.wait_seconds, 3),
            "ok": self.ok,
        }

    def lines(self) -> list[str]:
        out = [
            f"{'Dry run: would import' if self.dry_run else 'Import'} from {self.directory}"
            f" (replayed as of {format_time(self.now_ns // 1_000_000)})",
            f"  read: {self.records:,} records in {self.segments} segment file(s), "
            f"{self.bytes:,} bytes, in {self.read_seconds:.1f}s "
            f"({self.records_per_s():,.0f} records/s)",
        ]
        if self.by_type:
            per_type = ", ".join(f"{name} {n:,}" for name, n in sorted(self.by_type.items()))
            out.append(f"  records by type: {per_type}")
        out.append(f"  skipped as expired (TTL passed before now): {self.skipped_expired:,}")
        if self.unknown_id:
            out.append(
                f"  no-ops on ids not live (expired, deleted or skipped): {self.unknown_id:,}"
            )
        if self.rejected:
            out.append(f"  contradictory records left without effect: {self.rejected:,}")
        if self.corrupt or self.stopped_at:
            listed = self.corrupt[:MAX_LISTED]
            out.append(f"  corrupt records: {len(self.corrupt) + (self.stopped_at is not None):,}")
            for c in listed:
                out.append(f"    {describe_corrupt(c)} (skipped)")
            if len(self.corrupt) > len(listed):
                out.append(f"    ... and {len(self.corrupt) - len(listed):,} more")
            if self.stopped_at is not None:
                out.append(f"    {describe_corrupt(self.stopped_at)} (stopped here)")
        if self.stopped_at is not None:
            out.append(
                "  STOPPED at a corrupt record: nothing was published. Run again with "
                "--on-corrupt skip to report and skip corrupt records and import the rest."
            )
            return out
        states = ", ".join(f"{s} {n:,}" for s, n in sorted(self.live_by_state.items())) or "none"
        out.append(f"  live jobs: {self.live:,} ({states})")
        if self.leased_requeued:
            out.append(
                f"  LEASED jobs imported as PENDING (their workers are gone; attempts kept): "
                f"{self.leased_requeued:,}"
            )
        if self.unimportable:
            out.append(f"  jobs eventq cannot hold (not imported): {len(self.unimportable):,}")
            for job_id, reason in self.unimportable[:MAX_LISTED]:
                out.append(f"    {job_id}: {reason}")
            if len(self.unimportable) > MAX_LISTED:
                out.append(f"    ... and {len(self.unimportable) - MAX_LISTED:,} more")
        if self.dry_run:
            out.append(f"  would publish: {self.to_publish:,} jobs (dry run: nothing published)")
            return out
        if not self.to_publish:
            out.append("  nothing to publish")
            return out
        out.append(
            f"  published: {self.published:,} of {self.to_publish:,} jobs to {self.topic} "
            f"({self.partitions} partitions) in {self.publish_seconds:.1f}s "
            f"({self.jobs_per_s():,.0f} jobs/s); failed: {self.failed:,}"
        )
        for key, reason in self.failures[:MAX_LISTED]:
            out.append(f"    {key}: {reason}")
        if self.failed:
            out.append(
                "  Kafka did not take every job: fix the cause above and re-run the import "
                "(jobs that made it are refused as duplicates, so re-running is harmless)"
            )
        if self.expired_before_import:
            out.append(
                f"  expired before import (TTL passed by the broker's clock; eventq ignores "
                f"them): {self.expired_before_import:,}"
            )
        if self.waited:
            out.append(
                f"  applied by the server in {self.wait_seconds:.1f}s: imported "
                f"{self.imported:,}; already present (duplicates refused, state kept) "
                f"{self.already_present:,}"
                + (
                    f" ({self.already_present_different:,} differ from the log)"
                    if self.already_present_different
                    else ""
                )
                + (f"; gone again (deleted or expired since) {self.gone:,}" if self.gone else "")
            )
            if self.not_applied:
                out.append(
                    f"  NOT APPLIED within the wait: {self.not_applied:,} jobs. Is `eventq serve` "
                    "running on these topics (same --commands-topic, --jobs-topic, --app-id)? "
                    "The commands are in the log and will be applied when it runs; re-running "
                    "the import is harmless."
                )
        elif self.to_publish:
            out.append("  not waiting for the server to apply them (--no-wait)")
        return out


def describe_corrupt(c: CorruptRecord) -> str:
    return f"{c.path}: offset {c.offset}: {c.kind}: {c.reason}"


# ----------------------------------------------------------------------- reading


def segment_bytes(directory: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    segments = list_segments(directory)
    return segments, {path: os.path.getsize(path) for _, path in segments}


def check_directory(directory: str) -> None:
    if not os.path.exists(directory):
        raise MigrateError(f"{directory} does not exist: give the workq command-log directory")
    if not os.path.isdir(directory):
        raise MigrateError(f"{directory} is not a directory: give the workq command-log directory")
    if not list_segments(directory):
        raise MigrateError(
            f"{directory} holds no workq segment files (named like 000000001.log): "
            "is it workq's command-log directory?"
        )


def read_log(report: ImportReport, progress: Progress) -> dict[uuid.UUID, WorkqJob]:
    """Read and replay the directory into ``report``; return the live jobs."""
    segments, sizes = segment_bytes(report.directory)
    report.segments = len(segments)
    report.bytes = total = sum(sizes.values())
    before = {}  # bytes of the files before each one
    running = 0
    for _, path in segments:
        before[path] = running
        running += sizes[path]

    def on_corrupt(err: CorruptRecord) -> None:
        report.corrupt.append(err)
        tail = "" if err.resume_offset is not None else "; the rest of this file is skipped"
        progress.message(f"corrupt record: {describe_corrupt(err)} (skipped{tail})")

    replayer = Replayer(report.now_ns)
    apply = replayer.apply
    progress.start("reading", None, "records")
    count = 0
    began = time.monotonic()
    try:
        for path, offset, _time_ns, command in iter_commands(
            report.directory,
            on_corrupt=report.on_corrupt,
            report=on_corrupt if report.on_corrupt == SKIP else None,
        ):
            apply(command)
            count += 1
            if count & 0x3FFF == 0:
                progress.update(count, fraction=(before[path] + offset) / total if total else None)
    except CorruptRecord as err:
        report.stopped_at = err
        progress.message(f"corrupt record: {describe_corrupt(err)} (stopping: nothing published)")
    report.read_seconds = time.monotonic() - began
    summary = replayer.finish_summary()
    report.records = summary.records
    report.by_type = dict(summary.by_type)
    report.skipped_expired = summary.skipped_expired
    report.unknown_id = summary.unknown_id
    report.rejected = summary.rejected
    report.live_by_state = dict(summary.live_by_state)
    progress.finish(count, fraction=1.0 if report.stopped_at is None else None)
    return replayer.jobs


def plan_imports(
    jobs: dict[uuid.UUID, WorkqJob], report: ImportReport
) -> list[Import]:
    """The Import commands of the live jobs (unimportable ones go to the report)."""
    imports = []
    for job in jobs.values():
        try:
            imports.append(import_command(job))
        except Unimportable as error:
            report.unimportable.append((error.job_id, error.reason))
            continue
        if job.state == WorkqState.LEASED:
            report.leased_requeued += 1
    report.to_publish = len(imports)
    return imports


# ---------------------------------------------------------------------- publishing


def publish_imports(
    settings: Settings, imports: list[Import], keys: list[bytes], report: ImportReport,
    progress: Progress, partitions: int,
) -> PublishResult:
    from eventq.migrate.kafka_io import Publisher

    # The bulk lane (docs/architecture.md, "Lanes"): a large import never stalls workers.
    publisher = Publisher(settings.kafka, settings.bulk_topic)
    total = len(imports)

    def records() -> Iterator[tuple[bytes, int, bytes]]:
        for command, key in zip(imports, keys):
            yield key, partition_for_key(key, partitions), encode_command(command)

    progress.start("publishing", total, "jobs")
    def show(acked: int, produced: int) -> None:
        progress.update(acked, f"failed {publisher.result.failed:,}")

    result = publisher.publish(records(), show)
    report.published = result.published
    report.failed = result.failed
    report.failures = list(result.failures)
    report.publish_seconds = result.seconds
    progress.finish(result.published + result.failed, f"failed {result.failed:,}")
    for command, key in zip(imports, keys):
        delivery = result.deliveries.get(key)
        if (
            delivery is not None
            and command.expires_ms is not None
            and delivery.timestamp_ms >= command.expires_ms
        ):
            report.expired_before_import += 1
    return result


# ------------------------------------------------------------------------ waiting


def _imported_at(value: bytes) -> tuple[int | None, int | None]:
    """(record offset of the Imported event or None, the job's version or None) of a
    state record."""
    try:
        record = msgpack.unpackb(value, raw=False)
        event, job = record[EVENT_KEY], record[JOB_KEY]
        version = job[JOB_KEYS["version"]] if isinstance(job, dict) else None
        imported = (event[EVENT_KEYS["offset"]] if event[TYPE_KEY] == EventType.IMPORTED
                    else None)
        if imported is not None and record[VERSION_KEY] != 1:  # a position (core/batch.py)
            imported = offset_of(imported)
        return imported, version
    except Exception:  # not ours to judge here: the full decode reports it
        return None, None


def wait_applied(
    settings: Settings, imports: list[Import], keys: list[bytes], publish_result: PublishResult,
    report: ImportReport,
    progress: Progress, partitions: int, timeout_s: float, commands_before: dict[int, int],
) -> None:
    """Wait until the server has admitted and applied every published command (see the
    module doc), then classify each job from the state log. The commands were written to
    the bulk lane, so the server's admission of it (its bulk group's committed offsets,
    eventq/kafka/bulklane.py) says when; an Imported event at or after the command log's end
    before publishing (``commands_before``) is this run's."""
    from eventq.kafka.bulklane import admitted_offsets, bulk_group_id, wait_state_logged
    from eventq.migrate.kafka_io import StateLogTail

    deliveries = publish_result.deliveries
    by_key: dict[bytes, Import] = {}
    for command, key in zip(imports, keys):
        delivery = deliveries.get(key)
        if delivery is None:
            continue  # failed to publish
        if command.expires_ms is not None and delivery.timestamp_ms >= command.expires_ms:
            continue  # eventq ignores it: counted as expired before import
        by_key[key] = command
    report.waited = True
    # Per partition, our records' bulk offsets in order, and how many are admitted.
    queue: dict[int, list[int]] = {}
    for key in by_key:
        d = deliveries[key]
        queue.setdefault(d.partition, []).append(d.offset)
    for offsets in queue.values():
        offsets.sort()
    group = bulk_group_id(settings.app_id)
    began = last_change = time.monotonic()
    total = len(by_key)
    admitted_count = 0
    progress.start("applying", total, "jobs")
    admitted: dict[int, int] = {}
    while total:
        admitted = admitted_offsets(settings.kafka, group, settings.bulk_topic, queue)
        count = sum(bisect.bisect_left(offsets, admitted.get(p, 0)) for p, offsets in queue.items())
        now = time.monotonic()
        if count > admitted_count:
            admitted_count, last_change = count, now
        progress.update(admitted_count)
        if admitted_count == total or now - last_change > timeout_s:
            break
        time.sleep(0.2)
    # What was applied is in the state log once its changelog transaction commits.
    wait_state_logged(settings.kafka, settings.app_id, settings.commands_topic,
                      timeout_s)
    latest: dict[bytes, bytes | None] = {}
    tail = StateLogTail(settings.kafka, settings.jobs_topic, partitions)
    try:
        tail.read_to_end(by_key, lambda key, value: latest.__setitem__(key, value), 120.0)
    finally:
        tail.close()
    limit = {p: admitted.get(p, 0) for p in queue}
    for key, command in by_key.items():
        d = deliveries[key]
        if d.offset >= limit.get(d.partition, 0):
            continue  # not admitted within the wait
        value = latest.get(key)
        if value is None:
            report.gone += 1  # processed, but no live job now
            continue
        imported_offset, _version = _imported_at(value)
        partition = partition_for_key(key, partitions)
        if imported_offset is not None and imported_offset >= commands_before.get(partition, 0):
            report.imported += 1  # the state log holds this run's Imported event
        else:
            report.already_present += 1
            if not _same_job(value, command):
                report.already_present_different += 1
    report.not_applied = total - admitted_count
    report.wait_seconds = time.monotonic() - began
    progress.finish(admitted_count, f"not applied {total - admitted_count:,}"
                    if admitted_count < total else "")


def _same_job(value: bytes, command: Import) -> bool:
    """Whether the live job of a state record is the one ``command`` would import. A job
    with upstreams, a failure group or a retry's fields was made by eventq after the
    import (no workq job has them): never the same, and it has no snapshot to compare."""
    try:
        _, job = decode_state(value)
    except CodecError:
        return False
    if job is None or has_workflow(job) or was_retried(job):
        return False
    return Import.from_job(job) == command


# ---------------------------------------------------------------------------- run


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Reading creates millions of long-lived, acyclic objects (jobs, ids, payloads):
    the cyclic collector would rescan them all again and again for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_import(settings: Settings, options: ImportOptions, progress: Progress) -> ImportReport:
    """The whole import; raises ``MigrateError`` for what stops it before publishing."""
    from eventq.migrate.kafka_io import KafkaUnavailable, topic_partitions

    if options.on_corrupt not in (STOP, SKIP):
        raise MigrateError(f"--on-corrupt must be stop or skip, not {options.on_corrupt!r}")
    check_directory(options.directory)
    now_ns = time.time_ns() if options.now_ns is None else options.now_ns
    report = ImportReport(options.directory, now_ns, options.on_corrupt, options.dry_run)
    partitions = 0
    if not options.dry_run:
        # Fail early (before reading a large log) if Kafka or the topics are missing.
        topics = [settings.commands_topic, settings.bulk_topic] + (
            [settings.jobs_topic] if options.wait else []
        )
        try:
            partitions = topic_partitions(settings.kafka, topics)[
                settings.commands_topic
            ]
        except KafkaUnavailable as error:
            raise MigrateError(str(error)) from None
        if partitions != settings.partitions:
            progress.message(
                f"note: {settings.commands_topic} has {partitions} partitions, settings say "
                f"{settings.partitions}; using the topic's {partitions}"
            )
        report.topic, report.partitions = settings.bulk_topic, partitions
    with _no_cyclic_gc():
        return _read_publish_wait(settings, options, report, progress, partitions)


def _read_publish_wait(
    settings: Settings, options: ImportOptions, report: ImportReport, progress: Progress,
    partitions: int,
) -> ImportReport:
    jobs = read_log(report, progress)
    if report.stopped_at is not None:
        return report
    began = time.monotonic()
    imports = plan_imports(jobs, report)
    report.plan_seconds = time.monotonic() - began
    del jobs
    if options.dry_run or not imports:
        return report
    keys = [job_key(command.job_id) for command in imports]
    commands_before = (
        end_offsets(settings.kafka, settings.commands_topic) if options.wait else {}
    )
    result = publish_imports(settings, imports, keys, report, progress, partitions)
    if options.wait and result.published:
        wait_applied(
            settings, imports, keys, result, report, progress, partitions,
            options.wait_timeout_s, commands_before,
        )
    return report


__all__ = [
    "ImportOptions",
    "ImportReport",
    "MigrateError",
    "describe_corrupt",
    "plan_imports",
    "read_log",
    "run_import",
]

