"""The checker's rules in log time: over one job's commands as the log holds them
(logview.py ``JobLog``: each command, its broker LogAppendTime, and whether the core
accepted it), and between the client's acknowledged ops and those commands.

The client's clock cannot order two grants seen by different clients closer than their
latencies, and under faults latencies pass any TTR; the log orders them exactly. A job's
commands all live in one partition (keyed by its id), so their positions order them;
their times are the broker's stamps, the clock every TTR, TTL and schedule time is
judged by (eventq/core/commands.py: a command carries no time of its own).

Rules on a job's log alone. Each is stated independently of the state machine's code
(what the protocol promises, docs/protocol.md, "Job states"), so a machine that breaks
the promise is caught, not echoed:

- **log-overlapping-grant**: an accepted start-attempt while the job's previous lease
  is still running. A lease starts with an accepted start-attempt and ends only with
  an accepted timeout, release, complete, fail (with or without retries left), delete,
  or expiry; a touch keeps it running.
- **log-grant-after-end**: an accepted start-attempt after the job ended: completed,
  failed for good (a final fail, attempts exhausted, a last attempt timed out, an
  upstream that ended uncompleted), deleted or expired, with no accepted retry (a
  ``Retry`` record, or an upstream's retry that retried this job) or new add of the id
  since (``reopens``). A final job is never
  ready again; a removed one is absent.
- **log-grant-before-ready**: an accepted start-attempt stamped before the job could be
  ready: before its schedule time, or before the backoff wait of a return (a fail with
  retries left, or a timed-out attempt with attempts left) ended, backoff x 2^(r-1)
  after the return's stamp, r counting returns since the add or the last retry
  (docs/protocol.md, "eventq extensions", -backoff). A retry (docs/workflows.md,
  "retry") may make the job ready at once: from it only its delay is a bound.
- **log-grant-after-ttl**: an accepted start-attempt stamped at or after the TTL's end
  (the add's stamp, or the schedule time, + TTL; a retry leaves it where it was): a job
  exists for its TTL only (docs/protocol.md, "Job states"), whether or not its expiry
  is in the log yet.
- **log-early-timeout**: an accepted timeout stamped before the running lease's
  deadline: its start's stamp + the job's TTR, or its last accepted touch's stamp + the
  touch's TTR (the job's when the touch names none). The TTR is honoured in log time.
- **log-early-expiry**: an accepted expiry stamped before the TTL's end (the add's
  stamp, or the schedule time, + TTL), or of a job with no TTL (a ``run``'s).

Rules between the history and the log (client ops matched to their commands):

- **unlogged-ack**: an ok add or schedule, complete, fail or delete whose accepted
  command is not in the log. An ok reply is sent once the command was applied, and
  applying it put it there; a complete or fail is found by its result bytes (unique
  per op and its repeats after an indeterminate reply: where a repeat landed too, the
  op may be either command), an add, schedule or delete by its kind (one incarnation
  of an id accepts one of each).
- **unexplained-grant**: an ok grant of the client that no accepted, never-released
  start-attempt of the job explains. Each grant a client received is one accepted
  start-attempt of that job, and a different one for each client grant (the gateway
  hands an attempt to one client; an attempt given back with a release was handed to
  nobody, docs/architecture.md, "Abandoned commands"). The start-attempt came after the
  lease was invoked and before it returned, so it lies after every command of an ok op
  that returned before the lease was invoked, and before every command of an ok op
  invoked after the lease returned (those commands found as for unlogged-ack; of an op
  that may be several, the earliest bounds from below, the latest from above). Grants
  are matched to start-attempts inside those bounds, earliest bound first (optimal for
  points in intervals); a grant left without one is reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from eventq.core.commands import Retry, Schedule, Touch
from eventq.core.events import EventType
from eventq.core.job import State, retry_wait_ms

from .history import OK, Op
from .logview import JobLog, LogEntry
from .violation import Violation

E = EventType  # event names below are EventType members' names

LEASE_ENDS = frozenset(e.name for e in (
    E.ATTEMPT_TIMED_OUT, E.ATTEMPT_RELEASED, E.COMPLETED, E.FAILED, E.FAIL_RETRIED,
    E.DELETED, E.EXPIRED))
FINAL = frozenset(e.name for e in (E.COMPLETED, E.FAILED, E.ATTEMPTS_EXHAUSTED,
                                   E.UPSTREAM_FAILED))
REMOVED = frozenset(e.name for e in (E.DELETED, E.EXPIRED))
REOPENS = frozenset(e.name for e in (E.RETRIED, E.UPSTREAM_RETRIED, E.ADDED))
RETURNS = frozenset({E.FAIL_RETRIED.name})  # and a requeued timeout
STARTED = E.ATTEMPT_STARTED.name

LOG_KINDS = (
    "log-overlapping-grant", "log-grant-after-end", "log-grant-before-ready",
    "log-grant-after-ttl", "log-early-timeout", "log-early-expiry", "unlogged-ack",
    "unexplained-grant",
)


def _config(log: JobLog) -> tuple[int, int, int]:
    """The job's TTR, TTL (0: none) and backoff, from the command that made it."""
    made = log.created
    if made is None:
        return 0, 0, 0
    c = made.command
    return getattr(c, "ttr_ms", 0), getattr(c, "ttl_ms", 0), getattr(c, "backoff_ms", 0)


@dataclass
class _Walk:
    """What the rules track along a job's log (one incarnation at a time)."""

    lease_start: LogEntry | None = None
    deadline_ms: float = math.inf
    ended_by: LogEntry | None = None
    ready_ms: int = 0
    ready_why: str = "its add"
    returns: int = 0
    expires_ms: float = math.inf  # the TTL's end of the incarnation


def reopens(entry: LogEntry) -> bool:
    """Whether an accepted entry starts the job afresh (attempts, fails and returns 0,
    not ended): an add (a recurrence's slot job is one: the processor writes the
    slot's add, docs/workflows.md, "recur"), a retry (a ``Retry`` record,
    docs/workflows.md, "retry"), or an upstream's retry that did retry this dependent
    (one with another ended upstream stays FAILED: then the job after it still is)."""
    if not entry.accepted or entry.event not in REOPENS:
        return False
    if entry.event == E.UPSTREAM_RETRIED.name:
        return entry.job_after is None or entry.job_after.state is not State.FAILED
    return True


def _violation(kind: str, log: JobLog, message: str) -> Violation:
    return Violation(kind, log.job_id, (), f"job {log.job_id} in the log: {message}")


def _on_start(log: JobLog, entry: LogEntry, walk: _Walk, ttr_ms: int) -> list[Violation]:
    found = []
    at = f"start-attempt {entry.attempt} at position {entry.position} (t={entry.at_ms})"
    if walk.lease_start is not None:
        found.append(_violation(
            "log-overlapping-grant", log, f"{at} was accepted while attempt "
            f"{walk.lease_start.attempt}'s lease (started at position "
            f"{walk.lease_start.position}) was still running"))
    if walk.ended_by is not None:
        found.append(_violation(
            "log-grant-after-end", log, f"{at} was accepted after the job ended "
            f"({walk.ended_by.event} at position {walk.ended_by.position})"))
    if entry.at_ms >= walk.expires_ms:
        found.append(_violation(
            "log-grant-after-ttl", log, f"{at} was accepted after the job's TTL ended at "
            f"t={walk.expires_ms:.0f}"))
    if entry.at_ms < walk.ready_ms:
        found.append(_violation(
            "log-grant-before-ready", log, f"{at} was accepted before the job was ready "
            f"at t={walk.ready_ms} ({walk.ready_why})"))
    walk.lease_start, walk.deadline_ms = entry, entry.at_ms + ttr_ms
    return found


def _on_timeout(log: JobLog, entry: LogEntry, walk: _Walk) -> list[Violation]:
    if walk.lease_start is None or entry.at_ms >= walk.deadline_ms:
        return []
    return [_violation(
        "log-early-timeout", log, f"attempt {entry.attempt} timed out at t={entry.at_ms} "
        f"(position {entry.position}), before its lease's deadline t={walk.deadline_ms:.0f}")]


def _on_expiry(log: JobLog, entry: LogEntry, ttl_ms: int) -> list[Violation]:
    made = log.created
    if made is None:
        return []
    start = log.scheduled_ms if log.scheduled_ms is not None else made.at_ms
    expiry = start + ttl_ms if ttl_ms else math.inf
    if entry.at_ms >= expiry:
        return []
    return [_violation(
        "log-early-expiry", log, f"it expired at t={entry.at_ms} (position "
        f"{entry.position}), before its TTL ended"
        + (f" at t={expiry}" if ttl_ms else " (it has no TTL)"))]


def _after(walk: _Walk, entry: LogEntry, log: JobLog, backoff_ms: int) -> None:
    """Update the walk once the rules have judged ``entry``."""
    event = entry.event
    if event in LEASE_ENDS:
        walk.lease_start, walk.deadline_ms = None, math.inf
    if event == E.TOUCHED.name and isinstance(entry.command, Touch):
        ttr = entry.command.ttr_ms if entry.command.ttr_ms is not None else _config(log)[0]
        walk.deadline_ms = entry.at_ms + ttr
    if event in FINAL or event in REMOVED or (event == E.ATTEMPT_TIMED_OUT.name
                                              and entry.requeued is False):
        walk.ended_by = entry
    if event in RETURNS or (event == E.ATTEMPT_TIMED_OUT.name and entry.requeued):
        walk.returns += 1
        if backoff_ms:
            walk.ready_ms = max(walk.ready_ms,
                                entry.at_ms + retry_wait_ms(backoff_ms, walk.returns))
            walk.ready_why = f"return {walk.returns} at position {entry.position}, backoff"
    if reopens(entry):
        walk.ended_by, walk.returns = None, 0
        walk.ready_ms, walk.ready_why = entry.at_ms, f"{event} at position {entry.position}"
        if event == E.ADDED.name:
            walk.expires_ms = _ttl_end(entry)
        if event == E.ADDED.name and isinstance(entry.command, Schedule):
            walk.ready_ms, walk.ready_why = entry.command.time_ms, "its schedule time"
        elif isinstance(entry.command, Retry):
            walk.ready_ms = entry.at_ms + entry.command.delay_ms


def _ttl_end(added: LogEntry) -> float:
    """When the TTL of the job ``added`` made ends (inf: it has none)."""
    ttl_ms = getattr(added.command, "ttl_ms", 0)
    if not ttl_ms:
        return math.inf
    start = added.command.time_ms if isinstance(added.command, Schedule) else added.at_ms
    return start + ttl_ms


def log_violations(log: JobLog) -> list[Violation]:
    """Every log-time rule over one job's log."""
    ttr_ms, ttl_ms, backoff_ms = _config(log)
    walk = _Walk()
    found: list[Violation] = []
    for entry in log.entries:
        if entry.accepted:
            if entry.event == STARTED:
                found += _on_start(log, entry, walk, ttr_ms)
            elif entry.event == E.ATTEMPT_TIMED_OUT.name:
                found += _on_timeout(log, entry, walk)
            elif entry.event == E.EXPIRED.name:
                found += _on_expiry(log, entry, ttl_ms)
            _after(walk, entry, log, backoff_ms)
    return found


# --- the history against the log ------------------------------------------------------

_ANCHOR_COMMANDS = {"add": ("ADD",), "schedule": ("SCHEDULE",), "complete": ("COMPLETE",),
                    "fail": ("FAIL",), "delete": ("DELETE",)}


def anchor_entries(op: Op, log: JobLog) -> list[LogEntry]:
    """The accepted commands that may be an ok op's own, of one of ``_ANCHOR_COMMANDS``'
    kinds: more than one where a client repeated the op after an indeterminate reply
    (the same bytes again, and both may have landed: a fail with fails left is accepted
    twice)."""
    kinds = _ANCHOR_COMMANDS[op.kind]
    return [entry for entry in log.entries
            if entry.accepted and entry.kind in kinds
            and (op.kind not in ("complete", "fail") or entry.result == op.args.result)]


def anchor_entry(op: Op, log: JobLog) -> LogEntry | None:
    """The first accepted command that may be an ok op's own (``anchor_entries``)."""
    entries = anchor_entries(op, log)
    return entries[0] if entries else None


Anchor = tuple[Op, LogEntry, LogEntry]  # an ok op, the first and last command it may be


def anchors(ops: Iterable[Op], log: JobLog) -> tuple[list[Anchor], list[Violation]]:
    """The ok ops of the job matched to the commands that may be theirs, and an
    unlogged-ack for each ok op whose command is not there."""
    matched, found = [], []
    for op in ops:
        if op.outcome != OK or op.kind not in _ANCHOR_COMMANDS:
            continue
        entries = anchor_entries(op, log)
        if not entries:
            found.append(Violation(
                "unlogged-ack", log.job_id, (op.index,),
                f"{op.kind} op {op.index} of job {log.job_id} returned ok, but the log "
                "holds no accepted command of it"))
        else:
            matched.append((op, entries[0], entries[-1]))
    return matched, found


def unreleased_grants(log: JobLog) -> list[LogEntry]:
    """Accepted start-attempts whose attempt no accepted release gave back."""
    grants: list[LogEntry] = []
    for entry in log.entries:
        if entry.accepted and entry.event == STARTED:
            grants.append(entry)
        elif entry.accepted and entry.event == E.ATTEMPT_RELEASED.name and grants:
            if grants[-1].attempt == entry.attempt:
                grants.pop()
    return grants


def _bounds(grant: Op, matched: Sequence[Anchor]) -> tuple[float, float]:
    """Where the grant's start-attempt lies: after the command of every ok op that
    returned before the grant was invoked, before that of every one invoked after it
    returned; of an op that may be one of several commands, the earliest bounds from
    below and the latest from above (either may be its own)."""
    low = max((first.position for op, first, _ in matched
               if op.return_s is not None and op.return_s < grant.invoke_s), default=-1)
    high = min((last.position for op, _, last in matched
                if grant.return_s is not None and op.invoke_s > grant.return_s),
               default=math.inf)
    return low, high


def unexplained_grants(grants: Sequence[Op], matched: Sequence[Anchor],
                       log: JobLog) -> list[Violation]:
    """Client ok grants matched to distinct unreleased start-attempts inside their
    bounds (earliest upper bound first, each taking the earliest one it may)."""
    available = sorted(e.position for e in unreleased_grants(log))
    bounded = sorted(((_bounds(g, matched), g) for g in grants if g.outcome == OK),
                     key=lambda item: (item[0][1], item[0][0], item[1].index))
    used: set[int] = set()
    found = []
    for (low, high), grant in bounded:
        pick = next((p for p in available if low < p < high and p not in used), None)
        if pick is not None:
            used.add(pick)
            continue
        found.append(Violation(
            "unexplained-grant", log.job_id, (grant.index,),
            f"lease op {grant.index} got job {log.job_id}, but no accepted start-attempt of "
            f"it that no release gave back is left to explain it between positions {low} "
            f"and {high} ({len(available)} such start-attempts for {len(bounded)} client "
            "grants)"))
    return found


def history_against_log(grants: Sequence[Op], others: Iterable[Op],
                        log: JobLog) -> list[Violation]:
    matched, found = anchors(others, log)
    return found + unexplained_grants(grants, matched, log)


__all__ = ["LOG_KINDS", "reopens", "log_violations", "anchor_entry", "anchor_entries", "anchors",
           "unreleased_grants",
           "unexplained_grants", "history_against_log"]
