"""One contract for every fold of the command log (docs/architecture.md, "Testing
without a broker"): the same generated history of `eventq.commands` is folded

(a) by the pure fold of ``eventq replay --from-commands`` (eventq/run/replay.py ``Derived``),
(b) by the processor (streams/processor.py) over the in-memory engine (streams/memory.py),
    applying records as the fetcher hands them (streams/faust/command_fetch.py), one
    to a fetch or a delivery's records at once: partitions
    interleaved, records delivered again, records passed over and read again,
    commits, and kills between apply and commit after which the table is what the
    changelog holds (its committed records, or any prefix of what was written since)
    and the uncommitted tail is applied again,
(c) by the Spark fold without Spark (eventq/spark/rows.py ``explode_commands`` and
    ``fold_commands``, whose per-job step is eventq/core/fold.py ``JobFold``),

and every job's final state, each partition's state digest (eventq/core/digest.py, and
Spark's own ``hash_jobs``/``combine_digest`` for (c)) and the outcome counts must agree.
The processor's index and paused queues must match its table.

Histories: 2 or 3 partitions, two jobs in each, commands drawn by the jobs' states
(tests/support/core_strategies.py ``small_command``: add, schedule, start-attempt,
complete, fail, delete, touch, release-attempt, timeout-attempt, expire) and pause and
resume (in every partition), as single records, batch records and bulk slices (some
admitted twice), at increasing broker times.

Workflows (docs/workflows.md, "Dependencies"): a third job in each partition is a
dependent, added or scheduled with -after naming the other jobs of any partition, other
dependents, or ids that are never jobs, and deleted, leased, completed or failed now and
then; timers' expirations of any id (absent upstreams' registrations go with them). The
processor writes the follow-ups (depend, upstream notices) into the log as it applies,
through the memory engine: acknowledged at once, or only at a commit or ``ack`` (then a
crash loses those in flight, and their commands, read again, write them again). Once every
record is applied, besides the above:

- the records beside the jobs (registrations, inputs) are those of the fold of each
  partition's final log (tests/core/test_dag.py ``apply_command``);
- no dependent is stuck: each live dependent whose TTL has not passed has a ``depend``
  in each upstream's log for its life, and each link holds the outcome of the last
  change its upstream's log told it of (an ending after its registration, or the
  upstream finished when it registered), else UNFINISHED;
- no dependent is released twice;
- the index lists the WAITING jobs of each queue in lease order (waiting-len,
  ``inspect waiting-jobs``) and counts them in neither ready-len nor scheduled-len.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass

import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from eventq.core import (
    Accepted,
    Add,
    Complete,
    Delete,
    Depend,
    Expire,
    Fail,
    Job,
    Pause,
    Released,
    Resume,
    Schedule,
    StartAttempt,
    State,
    UpstreamOutcome,
    apply,
    decode_command,
    encode_command,
    is_ready,
    is_scheduled_waiting,
    lease_order_key,
    state_digest,
)
from eventq.core.batch import NOTHING_ADMITTED, SliceSource, admits, position, read_record
from eventq.core.commands import QUEUE_COMMANDS
from eventq.core.fold import JobFold
from eventq.core.followups import Notify, Register
from eventq.core.job import link_outcome
from eventq.core.partitioner import job_key, partition_for_key
from eventq.core.step import step
from eventq.core.workflow import INPUT_KEY_PREFIX, REGISTRATION_KEY_PREFIX
from eventq.run.replay import Derived, compare
from eventq.spark import rows, state_rows
from eventq.spark.arrow import arrow_schema
from eventq.state.jobs_table import PAUSED_KEY_PREFIX
from streams.memory import Driver, MemoryLog, Message
from support.core_strategies import ALL_KINDS, small_command, time_steps
from support.dag_world import Table, apply_command

PARTITION_COUNTS = (2, 3)
QUEUES = ("a", "b")  # the names small_command gives jobs
MAX_RECORDS = 24


def _job_ids(partitions: int, per_partition: int = 2) -> dict[int, list[uuid.UUID]]:
    """The first ids (UUID(int=1), 2, ...) that fill every partition."""
    found: dict[int, list[uuid.UUID]] = {p: [] for p in range(partitions)}
    n = 0
    while any(len(ids) < per_partition for ids in found.values()):
        n += 1
        job_id = uuid.UUID(int=n)
        ids = found[partition_for_key(job_key(job_id), partitions)]
        if len(ids) < per_partition:
            ids.append(job_id)
    return found


JOB_IDS = {n: _job_ids(n) for n in PARTITION_COUNTS}
# A dependent in each partition: the first id after the jobs' that falls there.
DEPENDENT_IDS = {n: {p: next(i for i in ids if i not in JOB_IDS[n][p])
                     for p, ids in _job_ids(n, 3).items()} for n in PARTITION_COUNTS}
PHANTOMS = (uuid.UUID(int=2**64 + 1), uuid.UUID(int=2**64 + 2))  # never jobs
LONG_TTL_MS = 10**9  # longer than any history: its registrations never expire


class History:
    """A command log and what happens to it: ``ops`` (deliveries, commits, crashes...)
    and, when ``drafts`` are given, records appended as the processor runs (op
    ``append``; the rest at the end), so that the follow-ups it writes meet them."""

    def __init__(self, log: MemoryLog, ops: list[tuple], acks_at_once: bool = True,
                 drafts: list[Message] | None = None, by_fetch: bool = False) -> None:
        self.log = log
        self.ops = ops
        self.acks_at_once = acks_at_once  # the driver's follow-ups (streams/memory.py)
        self.by_fetch = by_fetch  # deliveries as whole fetches (streams/faust/command_fetch.py)
        self.drafts = list(drafts or [])  # records still to append, with their times

    def append(self, count: int) -> None:
        """Append the next ``count`` drafted records, each at its time (not before
        the log's clock)."""
        for draft in self.drafts[:count]:
            self.log.now_ms = max(self.log.now_ms, draft.timestamp_ms)
            self.log.append(draft.partition, draft.value, draft.key)
        del self.drafts[:count]

    def __repr__(self) -> str:  # what hypothesis shows of a failing example
        lines = [f"History of {self.log.partitions} partitions:"]
        for record in self.log:
            lines.append(f"  {record.partition}@{record.offset} t+"
                         f"{record.timestamp_ms - self.log.start_ms}: {describe(record.value)}")
        lines.append(f"  ops: {self.ops} (follow-ups acknowledged "
                     f"{'at once' if self.acks_at_once else 'at ack or commit'}; "
                     f"{'whole fetches' if self.by_fetch else 'one record at a time'})")
        return "\n".join(lines)


def describe(value: bytes) -> str:
    source, items = read_record(value)
    commands = [decode_command(item).command for item in items]
    return (f"slice {source.describe()} " if source else "") + repr(commands)


@st.composite
def dependent_command(draw, partitions: int, partition: int, at_ms: int):
    """A command for the partition's dependent: mostly an add or schedule with -after
    (upstreams in any partition, other dependents, ids that are never jobs; a long TTL
    or a short one), now and then a delete, a lease, a complete or a fail."""
    dependent = DEPENDENT_IDS[partitions][partition]
    kind = draw(st.sampled_from(["add"] * 5 + ["schedule", "delete", "start", "complete",
                                               "fail"]))
    if kind == "delete":
        return Delete(dependent)
    if kind == "start":
        return StartAttempt(dependent, 1)
    if kind == "complete":
        return Complete(dependent, draw(st.binary(max_size=3)))
    if kind == "fail":
        return Fail(dependent, draw(st.binary(max_size=3)))
    candidates = [i for ids in JOB_IDS[partitions].values() for i in ids]
    candidates += [d for d in DEPENDENT_IDS[partitions].values() if d != dependent]
    if draw(st.integers(0, 3)) == 0:
        candidates += PHANTOMS
    after = tuple(draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3,
                                unique=True)))
    name = draw(st.sampled_from(QUEUES))
    ttl = draw(st.sampled_from([LONG_TTL_MS, LONG_TTL_MS, LONG_TTL_MS, 1, 50, 300]))
    priority = draw(st.integers(-1, 1))
    if kind == "schedule":
        return Schedule(dependent, name, 30, ttl, at_ms + draw(st.integers(-50, 200)), b"d",
                        priority, after=after)
    return Add(dependent, name, 30, ttl, b"d", priority, max_fails=draw(st.integers(0, 2)),
               after=after)


@st.composite
def histories(draw) -> History:
    partitions = draw(st.sampled_from(PARTITION_COUNTS))
    ids = JOB_IDS[partitions]
    start_ms = draw(st.integers(0, 10**12))
    log = MemoryLog(partitions, start_ms=start_ms)  # a draft: appended as the ops say
    model: dict[uuid.UUID, Job | None] = {}  # to draw plausible commands, not checked
    bulk = [0] * partitions  # each bulk partition's next position
    slices: dict[int, tuple[SliceSource, list]] = {}
    for _ in range(draw(st.integers(1, MAX_RECORDS))):
        log.advance(draw(time_steps))
        kind = draw(st.sampled_from(["single"] * 4 + ["batch"] * 3 + ["slice", "again",
                                                                       "queue", "sweep"]))
        partition = draw(st.integers(0, partitions - 1))
        if kind == "sweep":  # a timer's expire of any id: an absent one drops registrations
            every = [i for i_s in ids.values() for i in i_s]
            every += [*DEPENDENT_IDS[partitions].values(), *PHANTOMS]
            log.append_command(Expire(draw(st.sampled_from(every))))
            continue
        if kind == "queue":
            log.append_everywhere(draw(st.sampled_from([Pause, Resume]))(
                draw(st.sampled_from(QUEUES))))
            continue
        if kind == "again" and partition in slices:  # an admission repeated
            log.append_slice(*slices[partition])
            continue
        count = 1 if kind in ("single", "again") else draw(st.integers(1, 5))
        offset = log.end(partition)
        commands: list = []
        for index in range(count):
            # No queue command in a slice: eventq's bulk writers write none (see
            # test_a_resume_in_an_admitted_slice_survives_a_table_ahead_of_its_commit).
            if kind == "batch" and draw(st.integers(0, 9)) == 0:
                commands.append(draw(st.sampled_from([Pause, Resume]))(
                    draw(st.sampled_from(QUEUES))))
                continue
            if draw(st.integers(0, 3)) == 0:  # the partition's dependent
                commands.append(draw(dependent_command(partitions, partition, log.now_ms)))
                continue
            job_id = draw(st.sampled_from(ids[partition]))
            # Now and then any kind alike: a second add of a live job, an expire, a
            # delete, which a re-read tail must not undo.
            kinds = ALL_KINDS if draw(st.integers(0, 3)) == 0 else None
            if model.get(job_id) is None and draw(st.booleans()):  # an upstream that lasts
                command = Add(job_id, draw(st.sampled_from(QUEUES)), 30, LONG_TTL_MS, b"u")
            else:
                command = draw(small_command(job_id, model.get(job_id), log.now_ms, kinds))
            model[job_id] = apply(model.get(job_id), command, log.now_ms,
                                  position(offset, index))[1]
            commands.append(command)
        if kind == "slice":
            source = SliceSource(partition, bulk[partition], bulk[partition] + len(commands))
            bulk[partition] = source.end
            slices[partition] = (source, commands)
            log.append_slice(source, commands)
        else:
            log.append_commands(partition, commands)
    p = st.integers(0, partitions - 1)
    op = st.one_of(
        st.tuples(st.just("deliver"), p, st.integers(1, 8)),
        st.tuples(st.just("deliver"), p, st.integers(1, 8)),
        st.just(("commit",)),
        st.tuples(st.just("crash"), st.sampled_from([0, 0, 1, 2, 3, 5, 1000]), st.booleans()),
        st.tuples(st.just("rewind"), p, st.integers(1, 4)),
        st.tuples(st.just("skip"), p, st.integers(1, 3)),
        st.just(("ack",)),
        st.tuples(st.just("append"), st.integers(1, 6)),
        st.tuples(st.just("append"), st.integers(1, 6)),
    )
    ops = [draw(op) for _ in range(draw(st.integers(0, 30)))]
    drafts = sorted(log, key=lambda record: (record.timestamp_ms, record.partition,
                                             record.offset))
    return History(MemoryLog(partitions, start_ms=start_ms), ops,
                   acks_at_once=draw(st.booleans()), drafts=drafts,
                   by_fetch=draw(st.booleans()))


# ---------------------------------------------------------------------- the three folds


def pure_fold(log: MemoryLog) -> Derived:
    """(a) What ``eventq replay --from-commands`` derives (eventq/run/replay.py)."""
    derived = Derived()
    for record in log:  # partition by partition, in offset order, as read_topic reads
        derived.feed(record)  # type: ignore[arg-type]  # a Message is a Record's shape
    return derived


async def processor_fold(history: History) -> Driver:
    """(b) The processor over the in-memory engine, driven by the history's ops, then
    to the end of the log."""
    driver = Driver(history.log, acks_at_once=history.acks_at_once,
                    by_fetch=history.by_fetch)
    for op in history.ops:
        if op[0] == "deliver":
            await driver.deliver(op[1], op[2])
        elif op[0] == "commit":
            driver.commit()
        elif op[0] == "ack":
            driver.ack()
        elif op[0] == "append":
            history.append(op[1])
        elif op[0] == "crash":
            driver.crash(keep=op[1], written=len(op) > 2 and op[2])
        elif op[0] == "rewind":
            driver.rewind(op[1], op[2])
        else:
            driver.skip(op[1], op[2])
    history.append(len(history.drafts))
    await driver.drain()
    return driver


@dataclass
class SparkFold:
    jobs: dict[uuid.UUID, Job]
    outcomes: list[dict]  # fold_commands' rows
    paused: dict[int, set[str]]  # the queues paused in each partition at the end


def spark_fold(log: MemoryLog) -> SparkFold:
    """(c) The Spark fold without Spark: the command log as Spark's Kafka source reads
    it, exploded into commands (second copies of slices dropped), sorted as
    eventq/spark/stats.py sorts them, and folded per job. ``fold_commands`` gives the
    outcome rows; the same per-job ``JobFold`` gives the final states, and its rows
    must be ``fold_commands``' own."""
    records: dict[str, list] = {"key": [], "partition": [], "offset": [], "at_ms": [],
                                "value": []}
    for record in log:
        for column, value in (("key", record.key), ("partition", record.partition),
                              ("offset", record.offset), ("at_ms", record.timestamp_ms),
                              ("value", record.value)):
            records[column].append(value)
    schema = pa.schema([("key", pa.binary()), ("partition", pa.int32()),
                        ("offset", pa.int64()), ("at_ms", pa.int64()),
                        ("value", pa.binary())])
    exploded = [row for batch in rows.explode_commands(
        iter([pa.RecordBatch.from_pydict(records, schema=schema)])) for row in batch.to_pylist()]
    # Spark sorts a null first: a queue's command in a batch names no job.
    exploded.sort(key=lambda row: (row["job_id"] is not None, row["job_id"] or "",
                                   row["partition"], row["position"]))
    command_schema = arrow_schema(rows.COMMAND_DDL)
    outcomes = [row for batch in rows.fold_commands(
        iter([pa.RecordBatch.from_pylist(exploded, schema=command_schema)]))
        for row in batch.to_pylist()]
    folds: dict[str, JobFold] = {}
    stepped: list[dict] = []
    paused: dict[int, dict[str, tuple[int, bool]]] = {}
    for row in exploded:
        command = decode_command(row["value"]).command
        if isinstance(command, QUEUE_COMMANDS):
            last = paused.setdefault(row["partition"], {})
            if command.name not in last or last[command.name][0] < row["position"]:
                last[command.name] = (row["position"], isinstance(command, Pause))
            continue
        stepped.append(folds.setdefault(row["job_id"], JobFold()).step(
            command, row["at_ms"], row["position"]))
    columns = [field.name for field in arrow_schema(rows.OUTCOME_DDL)]
    assert [{c: row.get(c) for c in columns} for row in stepped] == outcomes
    jobs = {fold.job.id: fold.job for fold in folds.values() if fold.job is not None}
    return SparkFold(jobs, outcomes, {
        p: {name for name, (_, is_paused) in names.items() if is_paused}
        for p, names in paused.items()})


def spark_digest(jobs: list[Job]) -> str:
    """A state digest the way ``eventq spark`` computes one (state_rows.hash_jobs)."""
    batch = pa.RecordBatch.from_pylist([state_rows.job_row(job) for job in jobs],
                                       schema=arrow_schema(state_rows.JOB_DDL))
    parts = [(row["sum"], row["count"])
             for out in state_rows.hash_jobs(iter([batch])) for row in out.to_pylist()]
    return state_rows.combine_digest(parts)


# ------------------------------------------------------------------------ the contract


@dataclass
class WorkflowFold:
    """Each partition's final log folded as the processor would fold it once (jobs,
    records beside them, watermark), with what the checks of dependents need."""

    tables: dict[int, Table]
    released: Counter  # (job id, its add's position) -> Released events
    # upstream id -> in its log's order: ("depend", dependent, created, notice outcome
    # or None) for each depend registered, ("notify", outcome or None, removed)
    told: dict[uuid.UUID, list[tuple]]


def workflow_fold(log: MemoryLog) -> WorkflowFold:
    tables: dict[int, Table] = {}
    released: Counter = Counter()
    told: dict[uuid.UUID, list[tuple]] = {}
    for partition in range(log.partitions):
        table = tables[partition] = Table()
        admitted = NOTHING_ADMITTED
        for record in log.records(partition):
            source, items = read_record(record.value)
            if source is not None:
                if not admits(source, admitted):
                    continue
                admitted = source.end
            for index, data in enumerate(items):
                command = decode_command(data).command
                if isinstance(command, QUEUE_COMMANDS):
                    continue
                at, at_ms = position(record.offset, index), record.timestamp_ms
                before = table.jobs.get(command.job_id)
                skipped = before is None and at <= table.watermark
                result = None if skipped else step(before, command, at_ms, at)
                apply_command(table, command, at_ms, at)
                if result is None:
                    continue
                outcome, then = result.outcome, result.then
                if isinstance(outcome, Accepted) and isinstance(outcome.event, Released):
                    assert before is not None
                    released[command.job_id, before.added_at] += 1
                if isinstance(command, Depend) and isinstance(then, Register):
                    told.setdefault(command.upstream, []).append((
                        "depend", command.dependent, command.dependent_created,
                        None if then.notice is None else then.notice.outcome))
                if isinstance(then, Notify) and not then.absent:
                    told.setdefault(then.upstream, []).append(
                        ("notify", then.outcome, then.removed))
    return WorkflowFold(tables, released, told)


def expected_link(told: list[tuple], dependent: uuid.UUID, created: int) -> tuple[bool, object]:
    """(registered ever, the outcome its link must hold) of one life of a dependent
    with one upstream, by what the upstream's log told while it was registered."""
    registered = ever = False
    outcome = UpstreamOutcome.UNFINISHED
    for fact in told:
        if fact[0] == "depend":
            if (fact[1], fact[2]) == (dependent, created):
                registered = ever = True
                if fact[3] is not None:
                    outcome = link_outcome(fact[3])
        elif registered:
            if fact[1] is not None:
                outcome = link_outcome(fact[1])
            if fact[2]:
                registered = False
    return ever, outcome


def check_workflows(log: MemoryLog, driver: Driver, jobs: dict[uuid.UUID, Job]) -> None:
    fold = workflow_fold(log)
    folded = {i: j for table in fold.tables.values() for i, j in table.jobs.items()}
    assert folded == jobs
    for partition, table in fold.tables.items():
        side = {k: v for k, v in driver.store.table(partition).items()
                if k.startswith((REGISTRATION_KEY_PREFIX, INPUT_KEY_PREFIX))}
        assert side == table.side, (partition, set(side) ^ set(table.side))
    assert all(n == 1 for n in fold.released.values()), fold.released
    last_ms = max(record.timestamp_ms for record in log)
    for job in jobs.values():
        if not job.upstreams or (job.expires_ms is not None and job.expires_ms <= last_ms):
            continue  # by the spec, an expired dependent's registrations are told nothing
        for link in job.upstreams:
            ever, outcome = expected_link(fold.told.get(link.id, []), job.id, job.added_at)
            assert ever, f"{job.id} never registered with {link.id}: its depend was lost"
            assert link.outcome == outcome, (job.id, link, outcome)
    # The index: WAITING jobs in lease order, in neither ready-len nor scheduled-len.
    now_ms = log.now_ms
    for name in QUEUES:
        queued = [j for j in jobs.values() if j.name == name]
        waiting = sorted((j for j in queued if j.state is State.WAITING), key=lease_order_key)
        assert driver.index.waiting_page(name, 0, 1000) == [j.id for j in waiting]
        assert driver.index.waiting_len(name) == len(waiting)
        assert driver.index.lengths(name, now_ms) == (
            sum(is_ready(j, now_ms) for j in queued),
            sum(is_scheduled_waiting(j, now_ms) for j in queued))


def check(history: History) -> None:
    log = history.log
    driver = asyncio.run(processor_fold(history))  # first: it writes the follow-ups
    assert not driver.in_flight
    derived = pure_fold(log)
    spark = spark_fold(log)
    store = driver.store
    table = {job.id: job for p in range(log.partitions) for job in store.jobs_in(p)}

    def differences(name: str, expected: dict, actual: dict) -> str:
        return f"{name}:\n  " + "\n  ".join(d.describe() for d in compare(expected, actual))

    assert table == derived.jobs, differences("processor vs replay", derived.jobs, table)
    assert spark.jobs == derived.jobs, differences("spark vs replay", derived.jobs, spark.jobs)
    assert store.undecodable == 0 and driver.processor.counters.unappliable == 0

    for partition in range(log.partitions):
        in_partition = [job for job in derived.jobs.values()
                        if log.partition_of(job.id) == partition]
        digest = state_digest(in_partition)
        assert state_digest(store.jobs_in(partition)) == digest, partition
        assert spark_digest([spark.jobs[job.id] for job in in_partition]) == digest

    # Outcomes: replay counts them by kind, Spark has one row per command.
    spark_outcomes = Counter(row["outcome"] for row in spark.outcomes)
    assert spark_outcomes == Counter({kind.lower(): n for kind, n in derived.outcomes.items()})

    # The processor's derived state agrees with its table: the index holds exactly the
    # table's jobs, and every partition's paused queues are what its log said last.
    assert {i: driver.index.entry(i).state for i in driver.index.job_ids()} == {
        i: job.state for i, job in table.items()}
    for partition in range(log.partitions):
        assert set(store.paused_in(partition)) == spark.paused.get(partition, set())
    assert {name for name in QUEUES if driver.index.is_paused(name)} == set().union(
        *spark.paused.values())
    check_workflows(log, driver, derived.jobs)


def expired_then_added_again(one_record: bool, keep: int) -> History:
    """A job expires in the tail after a second add of it was rejected, and the table
    holds changelog records past its commit: the job's tombstone (and, unless a prefix
    ends before it, the watermark before it). Applied again over that table, the add
    is already applied (the watermark says so: docs/architecture.md, "Positions and
    idempotency"); taken for a new add, it would make a job the expire, not yet due
    for it, leaves alive. Random histories reach this rarely, so it is given."""
    job = uuid.UUID(int=1)
    log = MemoryLog(1)
    log.append_command(Add(job, "a", 10, 1, b""))  # expires 1 ms later
    log.advance(5)
    again, expire = Add(job, "a", 10, 200, b""), Expire(job)
    if one_record:
        log.append_commands(0, [again, expire])
    else:
        log.append_command(again)
        log.advance(1)
        log.append_command(expire)
    return History(log, [("deliver", 0, 1), ("commit",), ("deliver", 0, 2), ("crash", keep)])


def input_beside_its_notice(keep: int) -> History:
    """A dependent (partition 1) released by the notice of its upstream (partition 0):
    its changelog holds the input, then the dependent's state, and the table after the
    crash holds ``keep`` of them past the commit. With the state and not the input, the
    notice read again would be already applied and the input lost: side records come
    first (streams/processor.py)."""
    upstream, dependent = JOB_IDS[2][0][0], DEPENDENT_IDS[2][1]
    log = MemoryLog(2)
    log.append_command(Add(upstream, "a", 10, LONG_TTL_MS, b""))
    log.append_command(StartAttempt(upstream, 1))
    log.append_command(Complete(upstream, b"r"))
    log.append_command(Add(dependent, "a", 10, LONG_TTL_MS, b"", after=(upstream,)))
    return History(log, [("deliver", 1, 1), ("commit",), ("deliver", 0, 4),
                         ("deliver", 1, 1), ("crash", keep)])


def upstream_deleted_with_follow_ups_in_flight(written: bool) -> History:
    """An upstream deleted after its dependent registered; the notice is in flight when
    the process dies (lost, or written without an acknowledgement), and the table holds
    what was written since the commit: only the records whose follow-ups were
    acknowledged. The delete, read again, tells the dependent (again)."""
    upstream, dependent = JOB_IDS[2][0][0], DEPENDENT_IDS[2][1]
    log = MemoryLog(2)
    log.append_command(Add(upstream, "a", 10, LONG_TTL_MS, b""))
    log.append_command(Add(dependent, "b", 10, LONG_TTL_MS, b"", after=(upstream,)))
    history = History(log, [("deliver", 0, 1), ("deliver", 1, 1), ("ack",), ("deliver", 0, 1),
                            ("commit",), ("append", 1), ("deliver", 0, 1),
                            ("crash", 1000, written)], acks_at_once=False)
    history.drafts = [Message(log.topic, 0, 0, log.now_ms + 5, job_key(upstream),
                              encode_command(Delete(upstream)))]
    return history


def absent_upstream_swept(keep: int) -> History:
    """A dependent with a short TTL waits for an id that is never a job; a timer's
    expire of that id after the deadline drops the registration and moves the
    watermark (a tombstone of sorts), then a crash keeps ``keep`` records of it."""
    dependent, phantom = DEPENDENT_IDS[2][1], PHANTOMS[0]
    log = MemoryLog(2)
    log.append_command(Add(dependent, "a", 10, 50, b"", after=(phantom,)))
    history = History(log, [("deliver", 1, 1), ("commit",), ("deliver", 0, 1),
                            ("deliver", 1, 1), ("append", 1), ("deliver", 0, 1),
                            ("crash", keep)])
    history.drafts = [Message(log.topic, 0, 0, log.now_ms + 100, job_key(phantom),
                              encode_command(Expire(phantom)))]
    return history


@settings(max_examples=200)
@given(histories())
@example(input_beside_its_notice(keep=1))
@example(input_beside_its_notice(keep=1000))
@example(upstream_deleted_with_follow_ups_in_flight(written=False))
@example(upstream_deleted_with_follow_ups_in_flight(written=True))
@example(absent_upstream_swept(keep=1))
@example(absent_upstream_swept(keep=1000))
@example(expired_then_added_again(one_record=False, keep=1000))
@example(expired_then_added_again(one_record=True, keep=1))  # the tombstone, no watermark?
def test_every_fold_of_a_history_agrees(history):
    check(history)


def test_a_history_without_crashes_applies_each_record_once():
    """The driver itself: records delivered in order and committed are applied once;
    a crash after the commit applies nothing again, one before it the whole tail."""
    ids = JOB_IDS[2][0]
    log = MemoryLog(2)
    log.append_command(Add(ids[0], "a", 10, 0, b"", max_fails=3))
    log.append_command(StartAttempt(ids[0], 1))
    log.append_command(Fail(ids[0], b""))

    async def scenario():
        driver = Driver(log)
        await driver.deliver(0, 2)
        driver.commit()
        await driver.deliver(0, 1)
        applied_before = driver.processor.counters.applied
        driver.crash()
        assert driver.fetch[0] == 2 and driver.crashes == 1
        await driver.drain()
        return driver, applied_before

    driver, applied_before = asyncio.run(scenario())
    assert applied_before == 3 and driver.processor.counters.applied == 1
    [job] = driver.store.jobs_in(0)
    assert job.fails == 1
    assert not any(key.startswith(PAUSED_KEY_PREFIX) for key in driver.store.table(0))


def test_a_resume_in_an_admitted_slice_survives_a_table_ahead_of_its_commit():
    """Found by the contract: a table that holds changelog records past its commit (a
    prefix of them: streams/processor.py says any is safe to restore from) re-reads
    the tail from the committed offset. The slice (its admission is in the table) is
    skipped whole, resume and all, so the pause before it, read again, must not undo
    the resume: the pause record keeps the position of the command that set it."""
    log = MemoryLog(1)
    log.append_commands(0, [Pause("a")])
    log.append_slice(SliceSource(0, 0, 1), [Resume("a")])
    history = History(log, [("deliver", 0, 2), ("crash", 1000)])
    assert spark_fold(log).paused == {0: set()}
    driver = asyncio.run(processor_fold(history))
    assert driver.store.paused_in(0) == []
