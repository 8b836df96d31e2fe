"""A world of workflows across partitions, for tests of the pure core (docs/workflows.md,
"Determinism"), against a reference model written apart from it.

A random DAG of jobs (fan-in, fan-out, diamonds; upstreams added late or never, ids that
are never jobs), each job with a fate its worker or an operator gives it: completed,
failed, deleted, evicted by its TTL, completed then deleted, never added, or (a job no
other depends on) added, deleted and added again under the same id, then completed, so
that notices and registrations of its first life meet its second; or (docs/workflows.md,
"retry") failed by its worker, then retried by an operator under its id and completed, so
that its dependents failed in ``upstream-failed`` because of it come back, down the
graph, and run. The jobs
live in 2 to 4 simulated partitions by the Kafka hash of their key. Each partition is a
log of commands, folded one command at a time as the processor does
(eventq/core/step.py, then followups.register / notify with the records it reads; the
watermark for absent jobs); follow-ups are appended to the log of their key's
partition, stamped with a broker clock. Which partition applies next, when workers and
operators act, and crashes are drawn at random. A crash either rolls a partition's
table back k commands and applies them again (the table as its last commit left it: the
follow-ups are written again, duplicates), or applies its last k commands again over the
table as it is (a table ahead of its commit: nothing may change) and writes their
follow-ups again. A dependent's first depends are also delivered once more at a random
later time (as a crash of its partition long after would write them again).

Once every log is applied and nobody has anything left to do:

- every job's state, ``waiting``, group, result, links and inputs are what the
  reference model says: a plain graph walk over the DAG and the fates, which knows
  nothing of notices, registrations or positions (``expect``);
- folding each partition's final log again from an empty table gives the same jobs and
  the same records beside them (the pure fold of the log is the live state);
- every notice a dependent applied tells of a change its upstream really had (the
  position and outcome of one of its endings), and none twice to one life of it.

Workers act as workers do, on jobs they can lease (so only a released dependent runs);
an operator deletes a job, and its TTL evicts it, only once every dependent that is ever
added has registered with it (else the dependent, waiting for an absent upstream, would
wait by the spec whatever the reference says: that rule has its own unit tests).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from hypothesis import strategies as st

from eventq.core import (
    UPSTREAM_FAILED_GROUP,
    Accepted,
    Add,
    Complete,
    Delete,
    Depend,
    Expire,
    Fail,
    Input,
    Job,
    Rejected,
    Retry,
    StartAttempt,
    State,
    UpstreamOutcome,
    decode_input,
    decode_registration,
    upstream_failure,
    waiting_count,
)
from eventq.core.batch import position
from eventq.core.events import NOTICE_EVENTS
from eventq.core.followups import Notify, Register, notify, register
from eventq.core.partitioner import job_key, partition_for_key
from eventq.core.step import step
from eventq.core.workflow import INPUT_KEY_PREFIX

T0 = 1_700_000_000_000
LONG_TTL = 10**12  # never passes in a run
FATES = ["complete"] * 5 + ["fail", "delete", "evict", "absent", "complete-delete"] + [
    "readd"] * 2 + ["fail-retry"] * 3
# A worker leases and finishes it (a fail-retry job twice: it fails, is retried, completes).
WORKED = ("complete", "fail", "complete-delete", "readd", "fail-retry")
FINAL = (State.COMPLETED, State.FAILED)


@dataclass(frozen=True)
class Dag:
    ids: tuple[uuid.UUID, ...]  # in an order where upstreams come first
    after: dict[uuid.UUID, tuple[uuid.UUID, ...]]
    fate: dict[uuid.UUID, str]  # every id named, jobs and the ids never added
    ttl: dict[uuid.UUID, int]
    partitions: int

    def dependents(self, job_id: uuid.UUID) -> list[uuid.UUID]:
        return [d for d in self.ids if job_id in self.after[d] and self.fate[d] != "absent"]


def result_of(job_id: uuid.UUID) -> bytes:
    return b"ok " + job_id.bytes[:3]


def fail_result_of(job_id: uuid.UUID) -> bytes:
    return b"no " + job_id.bytes[:3]


@st.composite
def dags(draw) -> Dag:
    count = draw(st.integers(2, 7))
    ids = tuple(uuid.UUID(int=draw(st.integers(1, 2**32)) << 64 | n) for n in range(count))
    phantoms = [uuid.UUID(int=(2**40 + n)) for n in range(2)]  # never jobs
    after, fate, ttl = {}, {}, {}
    for n, job_id in enumerate(ids):
        pool = list(ids[:n]) + (phantoms if draw(st.integers(0, 5)) == 0 else [])
        upstreams = draw(st.lists(st.sampled_from(pool), unique=True, max_size=3)) if pool else []
        after[job_id] = tuple(upstreams)
        fate[job_id] = draw(st.sampled_from(FATES))
        ttl[job_id] = draw(st.integers(1, 40)) if fate[job_id] == "evict" else LONG_TTL
    for phantom in phantoms:
        fate[phantom] = "absent"
    for job_id in ids:  # only a job no other depends on lives twice
        if fate[job_id] == "readd" and any(job_id in ups for ups in after.values()):
            fate[job_id] = "complete"
    return Dag(ids, after, fate, ttl, draw(st.integers(2, 4)))


# ------------------------------------------------------------------ reference model


@dataclass(frozen=True)
class Kind:
    """How a job ends, for its dependents: ``completes``; ``never`` ends (absent, or
    waiting forever); or ends otherwise, for one of ``reasons`` (which one may depend on
    timing), with one of ``results`` when failed."""

    name: str  # "completes" | "never" | "ends"
    reasons: frozenset[str] = frozenset()
    results: frozenset[bytes] = frozenset()


COMPLETES, NEVER = Kind("completes"), Kind("never")


def kinds(dag: Dag) -> dict[uuid.UUID, Kind]:
    kind: dict[uuid.UUID, Kind] = {i: NEVER for i, f in dag.fate.items() if f == "absent"}
    # The results a job may have while FAILED for a while only (docs/workflows.md,
    # "retry").
    transient: dict[uuid.UUID, frozenset[bytes]] = dict.fromkeys(kind, frozenset())
    for job_id in dag.ids:  # upstreams first
        fate = dag.fate[job_id]
        if fate == "absent":
            continue
        ups = [kind[u] for u in dag.after[job_id]]
        ended = [(u, k) for u, k in zip(dag.after[job_id], ups) if k.name == "ends"]
        if ended:  # failed by the first ending its partition applies, unless gone first
            results = frozenset(upstream_failure(u, UpstreamOutcome[r.upper()])
                                for u, k in ended for r in k.reasons)  # fmt: skip
            extra = {"delete": {"deleted"}, "evict": {"evicted"}}.get(fate, set())
            kind[job_id] = Kind("ends", frozenset({"failed", *extra}), results)
        elif all(k is COMPLETES for k in ups):
            kind[job_id] = {
                "complete": COMPLETES, "complete-delete": COMPLETES, "readd": COMPLETES,
                "fail-retry": COMPLETES,  # failed, retried by an operator, completed
                "fail": Kind("ends", frozenset({"failed"}), frozenset({fail_result_of(job_id)})),
                "delete": Kind("ends", frozenset({"deleted"})),
                "evict": Kind("ends", frozenset({"evicted"})),
            }[fate]  # fmt: skip
        elif fate in ("delete", "evict"):  # waits for an upstream that never ends, then goes
            kind[job_id] = Kind("ends", frozenset({"evicted" if fate == "evict" else "deleted"}))
        else:
            kind[job_id] = NEVER
        # FAILED for a while (its worker failed it before a retry, or an upstream did),
        # a job an operator removes or its TTL evicts may be gone while FAILED: then its
        # dependents never hear of the retry, and it ended for them as FAILED.
        transient[job_id] = frozenset(
            upstream_failure(u, UpstreamOutcome.FAILED) for u in dag.after[job_id] if transient[u]
        ) | ({fail_result_of(job_id)} if fate == "fail-retry" and all(
            k is COMPLETES for k in ups) else set())  # fmt: skip
        if fate in ("delete", "evict") and transient[job_id]:
            k = kind[job_id]
            kind[job_id] = Kind("ends", k.reasons | {"failed"}, k.results | transient[job_id])
    return kind


@dataclass
class Expect:
    state: State
    waiting: int
    group: str | None
    results: frozenset[bytes | None]  # what its result may be
    links: tuple[frozenset[UpstreamOutcome], ...]  # what each link's outcome may be
    inputs: dict[uuid.UUID, tuple[bool, frozenset[bytes]]]  # by upstream: may be


_LINK = {"completes": UpstreamOutcome.COMPLETED, "never": UpstreamOutcome.UNFINISHED}


def expect(dag: Dag) -> dict[uuid.UUID, Expect]:
    """The live jobs at the end and what each must hold (the graph walk)."""
    kind = kinds(dag)
    out = {}
    for job_id in dag.ids:
        fate, k, ups = dag.fate[job_id], kind[job_id], dag.after[job_id]
        if fate in ("absent", "delete", "evict") or (fate == "complete-delete" and k is COMPLETES):
            continue  # never added, or gone
        links = tuple(
            frozenset({_LINK[kind[u].name]}) if kind[u].name in _LINK
            else frozenset(UpstreamOutcome[r.upper()] for r in kind[u].reasons)
            for u in ups
        )  # fmt: skip
        inputs = {}
        for u in ups:
            if kind[u] is COMPLETES:
                inputs[u] = (True, frozenset({result_of(u)}))
            elif kind[u].name == "ends" and "failed" in kind[u].reasons:
                inputs[u] = (False, kind[u].results)  # if its link says FAILED
        not_completed = sum(1 for u in ups if kind[u] is not COMPLETES)
        cascade = any(kind[u].name == "ends" for u in ups)
        if cascade:
            e = Expect(State.FAILED, not_completed, UPSTREAM_FAILED_GROUP, k.results, links, inputs)
        elif k is COMPLETES:
            e = Expect(State.COMPLETED, 0, None, frozenset({result_of(job_id)}), links, inputs)
        elif k.name == "ends":  # failed by its worker
            e = Expect(State.FAILED, 0, None, frozenset({fail_result_of(job_id)}), links, inputs)
        else:
            e = Expect(State.WAITING, not_completed, None, frozenset({None}), links, inputs)
        out[job_id] = e
    return out


# ---------------------------------------------------------------------- simulation


@dataclass
class Table:
    jobs: dict[uuid.UUID, Job] = field(default_factory=dict)
    side: dict[bytes, bytes] = field(default_factory=dict)
    watermark: int = -1

    def copy(self) -> Table:
        return Table(dict(self.jobs), dict(self.side), self.watermark)


@dataclass
class Partition:
    log: list[tuple[object, int]] = field(default_factory=list)  # (command, broker time)
    table: Table = field(default_factory=Table)
    applied: int = 0
    history: list[tuple[Table, list]] = field(default_factory=list)  # before each, emitted


def apply_command(table: Table, command, at_ms: int, at: int) -> list:
    """The processor's work for one command (streams/processor.py plus the workflow's
    reads): returns the follow-up commands it writes."""
    job = table.jobs.get(command.job_id)
    if job is None and at <= table.watermark:
        return []  # already applied (the watermark of absent jobs)
    result = step(job, command, at_ms, at)
    assert not (isinstance(result.outcome, Rejected) and result.outcome.error.code
                == "SERVER-ERROR"), result.outcome  # fmt: skip
    if result.job is None:
        table.jobs.pop(command.job_id, None)
    else:
        table.jobs[command.job_id] = result.job
    if result.removes:
        table.watermark = max(table.watermark, at)
    follow_ups, side = list(result.follow_ups), list(result.side)
    then = result.then
    if isinstance(then, Register):
        raw = table.side.get(then.key)
        effects = register(then, None if raw is None else decode_registration(raw))
    elif isinstance(then, Notify):
        stored = sorted((k, v) for k, v in table.side.items() if k.startswith(then.prefix))
        effects = notify(then, [decode_registration(v) for _, v in stored])
    else:
        effects = None
    if effects is not None:
        follow_ups += effects.follow_ups
        side += effects.side
        if effects.removes:
            table.watermark = max(table.watermark, at)
    for key, value in side:
        if value is None:
            table.side.pop(key, None)
        else:
            table.side[key] = value
    return [f.command for f in follow_ups]


class World:
    def __init__(self, dag: Dag, rnd: random.Random) -> None:
        self.dag, self.rnd = dag, rnd
        self.parts = [Partition() for _ in range(dag.partitions)]
        self.now = T0
        self.done: set[tuple[str, uuid.UUID]] = set()  # (action, job) done once
        # (upstream, dependent, the dependent's creation) of every depend applied
        self.registered: set[tuple[uuid.UUID, uuid.UUID, int]] = set()
        self.crashes = rnd.randint(0, 4)
        self.first_depends: dict[uuid.UUID, list] = {}  # a dependent's first life's
        self.sweeps = rnd.randint(0, 2)
        self.idle = False  # nothing else to do: a job living twice waits no more

    def part_of(self, job_id: uuid.UUID) -> Partition:
        return self.parts[partition_for_key(job_key(job_id), self.dag.partitions)]

    def append(self, command) -> None:
        self.now += self.rnd.randint(0, 3)
        self.part_of(command.job_id).log.append((command, self.now))

    def job(self, job_id: uuid.UUID) -> Job | None:
        return self.part_of(job_id).table.jobs.get(job_id)

    # -- applying
    def apply_next(self, part: Partition) -> None:
        index = part.applied
        command, at_ms = part.log[index]
        before = part.table.copy()
        emitted = apply_command(part.table, command, at_ms, position(index))
        if isinstance(command, Depend):
            self.registered.add((command.upstream, command.dependent, command.dependent_created))
        part.history.append((before, emitted))
        part.applied += 1
        if isinstance(command, Add) and command.after:
            self.first_depends.setdefault(command.job_id, emitted)
        for follow_up in emitted:
            self.append(follow_up)

    def crash(self, part: Partition) -> None:
        k = self.rnd.randint(1, part.applied)
        if self.rnd.random() < 0.5:  # the table as the last commit left it
            part.table = part.history[part.applied - k][0]
            del part.history[part.applied - k:]
            part.applied -= k
            return
        for index in range(part.applied - k, part.applied):  # a table ahead of its commit
            command, at_ms = part.log[index]
            before = part.table.copy()
            emitted = apply_command(part.table, command, at_ms, position(index))
            assert part.table == before, f"re-applying {command} changed the table"
            for follow_up in [*emitted, *part.history[index][1]]:
                self.append(follow_up)

    # -- workers, operators, timers
    def removable(self, job_id: uuid.UUID) -> bool:
        """Every dependent ever added has registered with it, in each of its lives (see
        the module)."""
        for d in self.dag.dependents(job_id):
            lives = 2 if self.dag.fate[d] == "readd" else 1
            if lives == 2 and ("add2", d) not in self.done:
                return False
            if len({c for u, e, c in self.registered if (u, e) == (job_id, d)}) < lives:
                return False
        return True

    def actions(self) -> list:
        dag, out = self.dag, []
        for job_id in dag.ids:
            fate, job = dag.fate[job_id], self.job(job_id)
            if fate == "absent":
                continue
            add = Add(job_id, "q", 10**6, dag.ttl[job_id], b"p", after=dag.after[job_id])
            if ("add", job_id) not in self.done:
                if fate != "readd" or self.idle or any(
                    (u_job := self.job(u)) is not None and u_job.state in FINAL
                    for u in dag.after[job_id]
                ):  # a job living twice comes late, so that notices of its first life race
                    out.append(("add", job_id, add))
            elif fate == "readd" and ("add2", job_id) not in self.done:
                if job is not None and ("delete1", job_id) not in self.done:
                    out.append(("delete1", job_id, Delete(job_id)))
                elif job is None and ("delete1", job_id) in self.done:
                    out.append(("add2", job_id, add))  # its first life is gone: again
            elif job is None:
                continue
            elif fate in WORKED and job.state is State.NEW and ("lease", job_id) not in self.done:
                out.append(("lease", job_id, StartAttempt(job_id, 1)))
            elif fate in WORKED and job.state is State.LEASED and ("work", job_id) not in self.done:
                finish = (Fail(job_id, fail_result_of(job_id)) if fate in ("fail", "fail-retry")
                          else Complete(job_id, result_of(job_id)))  # fmt: skip
                out.append(("work", job_id, finish))
            elif fate == "fail-retry" and job.state is State.FAILED and job.group is None and (
                "retry", job_id) not in self.done:  # failed by its worker: an operator retries
                out.append(("retry", job_id, Retry(job_id)))
            elif fate == "fail-retry" and ("retry", job_id) in self.done and (
                job.state is State.NEW and ("lease2", job_id) not in self.done
            ):
                out.append(("lease2", job_id, StartAttempt(job_id, 1)))
            elif fate == "fail-retry" and job.state is State.LEASED and (
                "lease2", job_id) in self.done and ("work2", job_id) not in self.done:
                out.append(("work2", job_id, Complete(job_id, result_of(job_id))))
            elif (fate == "delete" or (fate == "complete-delete" and job.state is State.COMPLETED)
                  ) and ("delete", job_id) not in self.done and self.removable(job_id):
                out.append(("delete", job_id, Delete(job_id)))
            elif fate == "evict" and ("expire", job_id) not in self.done and self.removable(
                job_id
            ) and job.expires_ms is not None:
                if self.now >= job.expires_ms:
                    out.append(("expire", job_id, Expire(job_id)))
                else:
                    out.append(("tick", job_id, None))
        for job_id, depends in self.first_depends.items():  # delivered again, late
            second_life = dag.fate[job_id] != "readd" or ("add2", job_id) in self.done
            if ("echo", job_id) not in self.done and depends and second_life:
                out.append(("echo", job_id, depends))
        if self.sweeps:  # a timer's expire of an id that is no job: drops what expired
            absent = [i for i, f in dag.fate.items() if f == "absent"]
            if absent:
                out.append(("sweep", self.rnd.choice(absent), None))
        return out

    def run(self) -> None:
        for _ in range(20_000):
            pending = [p for p in self.parts if p.applied < len(p.log)]
            actions = self.actions()
            crashable = [p for p in self.parts if p.applied] if self.crashes else []
            if not pending and not [a for a in actions if a[0] not in ("sweep", "echo")]:
                if self.idle:
                    return
                self.idle = True
                continue
            roll = self.rnd.random()
            if crashable and roll < 0.03:
                self.crashes -= 1
                self.crash(self.rnd.choice(crashable))
            elif pending and (roll < 0.7 or not actions):
                self.apply_next(self.rnd.choice(pending))
            elif actions:
                lives = [a for a in actions if a[0] in ("delete1", "add2")]
                # a second life soon, so that the first's notices are still on their way
                kind, job_id, command = self.rnd.choice(lives or actions)
                if kind == "tick":
                    self.now += self.rnd.randint(5, 30)
                elif kind == "sweep":
                    self.sweeps -= 1
                    self.append(Expire(job_id))
                elif kind == "echo":
                    self.done.add((kind, job_id))
                    for depend in command:
                        self.append(depend)
                else:
                    self.done.add((kind, job_id))
                    self.append(command)
        raise AssertionError("the run did not settle")


# -------------------------------------------------------------------------- checks


def inputs_of(table: Table) -> dict[tuple[uuid.UUID, uuid.UUID], Input]:
    found = {}
    for key, value in table.side.items():
        if key.startswith(INPUT_KEY_PREFIX):
            text = key[len(INPUT_KEY_PREFIX):].decode()
            dependent, upstream = (uuid.UUID(part) for part in text.split(":"))
            found[dependent, upstream] = decode_input(value)
    return found


def check_against_the_reference(world: World) -> None:
    expected = expect(world.dag)
    live = {job_id: job for p in world.parts for job_id, job in p.table.jobs.items()}
    assert set(live) == set(expected)
    inputs = {k: v for p in world.parts for k, v in inputs_of(p.table).items()}
    wanted_inputs = set()
    for job_id, e in expected.items():
        job = live[job_id]
        assert (job.state, waiting_count(job), job.group) == (e.state, e.waiting, e.group), job
        assert job.result in e.results, (job.result, e.results)
        assert tuple(link.id for link in job.upstreams) == world.dag.after[job_id]
        for link, allowed in zip(job.upstreams, e.links):
            assert link.outcome in allowed, (job_id, link, allowed)
            if link.outcome in (UpstreamOutcome.COMPLETED, UpstreamOutcome.FAILED):
                wanted_inputs.add((job_id, link.id))
                completed, results = e.inputs[link.id]
                got = inputs[job_id, link.id]
                assert got.completed is completed and got.result in results, (got, results)
        if job.upstreams and e.group is None and e.state is not State.WAITING:
            assert job.released_ms is not None  # it ran: released first
    assert set(inputs) == wanted_inputs  # none left behind by a job gone or retried


def check_the_fold_of_the_logs(world: World) -> None:
    endings: set[tuple[uuid.UUID, int, UpstreamOutcome]] = set()
    applied: list[tuple[uuid.UUID, int, uuid.UUID, int, UpstreamOutcome]] = []
    for part in world.parts:
        table = Table()
        for index, (command, at_ms) in enumerate(part.log):
            before = table.jobs.get(command.job_id)
            at = position(index)
            skipped = before is None and at <= table.watermark
            result = None if skipped else step(before, command, at_ms, at)
            apply_command(table, command, at_ms, at)
            if result is None:
                continue
            if isinstance(result.then, Notify) and result.then.outcome is not None:
                endings.add((command.job_id, at, result.then.outcome))
            if isinstance(result.outcome, Accepted) and isinstance(result.outcome.event,
                                                                   NOTICE_EVENTS):
                assert before is not None and before.added_at == command.dependent_created
                applied.append((command.dependent, command.dependent_created, command.upstream,
                                command.change, command.outcome))  # fmt: skip
        assert table.jobs == part.table.jobs
        assert table.side == part.table.side
    for dependent, created, upstream, change, outcome in applied:
        assert (upstream, change, outcome) in endings, (dependent, upstream, change, outcome)
    once = [(d, c, u, change) for d, c, u, change, _ in applied]
    assert len(once) == len(set(once)), "a notice applied twice to one life of a dependent"
