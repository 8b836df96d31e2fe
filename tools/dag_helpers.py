"""A DAG of chains as a DataFrame, and what the command log says happened to its jobs
(for tests/spark/test_dag.py and bench/dag_bench.py): each job's commands folded
with the core, as the processor applied them, keeping when it was leased, completed and
told of its upstreams.

Only the log is read (eventq.kafka.logreader), never the server: an order that holds in
the log held for the workers. Times are the broker's (LogAppendTime, one clock for every
partition); positions order the commands of one partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from eventq.core import Accepted, apply, decode_command
from eventq.core.batch import NOTHING_ADMITTED, admits, position, read_record
from eventq.core.commands import QUEUE_COMMANDS
from eventq.core.events import EventType
from eventq.core.job import Job, UpstreamOutcome
from eventq.kafka.logreader import read_topic


def chains_frame(spark, jobs: int, chain_length: int, edges: bool = True):
    """``jobs`` rows (step, needs, body): job ``step`` waits for ``step - 1`` unless it
    starts a chain of ``chain_length`` (``needs`` empty); without ``edges`` every
    ``needs`` is empty (the same jobs, none waiting), for comparison."""
    from pyspark.sql import functions as F

    step = F.col("id")
    root = step % chain_length == 0 if edges else F.lit(True)
    return spark.range(jobs).select(
        step.alias("step"),
        F.when(root, F.array().cast("array<long>")).otherwise(F.array(step - 1)).alias("needs"),
        F.concat(F.lit("step "), step.cast("string")).alias("body"),
    )


NOTICE_EVENTS = frozenset({EventType.UPSTREAM_NOTED, EventType.RELEASED,
                           EventType.UPSTREAM_FAILED})


@dataclass(frozen=True)
class Moment:
    """A command the processor accepted: its position in its partition, broker time."""

    position: int
    at_ms: int


@dataclass(frozen=True)
class Notice:
    """An upstream's notice a dependent applied: the upstream's change it tells of (its
    position in the upstream's partition and broker time) and when it was applied."""

    upstream: uuid.UUID
    outcome: UpstreamOutcome
    change: int
    change_ms: int
    applied: Moment


@dataclass
class Timeline:
    """One job's accepted history."""

    partition: int
    upstreams: tuple[uuid.UUID, ...] = ()
    leases: list[Moment] = field(default_factory=list)
    given_back: list[Moment] = field(default_factory=list)  # leases nobody received
    completes: list[Moment] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    released: Moment | None = None


def _commands(bootstrap: str, topic: str):
    """(partition, position, broker time, command) of every command a processor
    applies, in each partition's order: a copy of a bulk slice admitted before is
    passed over, as the processor passes over it (eventq/core/batch.py, ``admits``)."""
    admitted: dict[int, int] = {}
    for record in read_topic(bootstrap, topic):
        source, items = read_record(record.value)
        if source is not None:
            if not admits(source, admitted.get(record.partition, NOTHING_ADMITTED)):
                continue
            admitted[record.partition] = source.end
        for index, data in enumerate(items):
            yield (record.partition, position(record.offset, index), record.timestamp_ms,
                   decode_command(data).command)


def timelines(bootstrap: str, topic: str, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Timeline]:
    """The accepted history of each job of ``ids`` in the command log ``topic``."""
    wanted = set(ids)
    jobs: dict[uuid.UUID, Job | None] = {}
    found: dict[uuid.UUID, Timeline] = {}
    for partition, at, at_ms, command in _commands(bootstrap, topic):
        if isinstance(command, QUEUE_COMMANDS) or command.job_id not in wanted:
            continue
        job_id = command.job_id
        outcome, after = apply(jobs.get(job_id), command, at_ms, at)
        jobs[job_id] = after
        if not isinstance(outcome, Accepted):
            continue
        line = found.setdefault(job_id, Timeline(partition))
        _note(line, outcome.event, after, Moment(at, at_ms))
    return found


def _note(line: Timeline, event, job: Job | None, moment: Moment) -> None:
    kind = event.type
    if kind is EventType.ADDED and job is not None:
        line.upstreams = tuple(link.id for link in job.upstreams)
    elif kind is EventType.ATTEMPT_STARTED:
        line.leases.append(moment)
    elif kind is EventType.ATTEMPT_RELEASED:
        line.given_back.append(moment)
    elif kind is EventType.COMPLETED:
        line.completes.append(moment)
    elif kind in NOTICE_EVENTS:
        line.notices.append(Notice(event.upstream, event.outcome, event.change,
                                   event.change_ms, moment))
        if kind is EventType.RELEASED:
            line.released = moment


def edge_order_faults(lines: dict[uuid.UUID, Timeline]) -> list[str]:
    """Every way the log breaks "each job once, each after its upstreams": a job not
    worked (leased, less the leases given back because no client received them: an
    ATTEMPT_RELEASED, CI 2026-11-27) or completed exactly once, or any lease of it
    before the notice of an upstream's complete (that very complete: its position) was
    applied, or at a broker time before that complete. Empty when the run was right."""
    faults = []
    for job_id, line in lines.items():
        worked = len(line.leases) - len(line.given_back)
        if worked != 1 or len(line.completes) != 1:
            faults.append(f"{job_id}: {len(line.leases)} leases ({len(line.given_back)} given "
                          f"back), {len(line.completes)} completes")
            continue
        for lease in line.leases:
            for upstream in line.upstreams:
                faults.extend(f"{job_id} after {upstream}: {fault}" for fault
                              in _edge_faults(lines.get(upstream), line, upstream, lease))
    return faults


def _edge_faults(up: Timeline | None, line: Timeline, upstream: uuid.UUID,
                 lease: Moment) -> list[str]:
    if up is None or len(up.completes) != 1:
        return ["the upstream never completed once"]
    complete = up.completes[0]
    told = [n for n in line.notices if n.upstream == upstream
            and n.outcome is UpstreamOutcome.COMPLETED and n.change == complete.position]
    if not told:
        return ["no notice of the upstream's complete"]
    faults = []
    if told[0].applied.position > lease.position:
        faults.append("leased before the notice was applied")
    if complete.at_ms > lease.at_ms:
        faults.append(f"leased at {lease.at_ms}, before the complete at {complete.at_ms}")
    return faults
