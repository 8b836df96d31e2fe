"""The wire format, byte for byte: golden records and golden rejections.

``codec_golden.json`` holds, for every command type, every event type, jobs with and
without a backoff, and the records older writers left (a version 1 state record, a
result stored in the event), the exact bytes the codec wrote when the file was made,
and for single-field mutations of most of them the exact ``CodecError`` message (or
which record they decode to). Records in the logs outlive the code that wrote them: a
change that alters one byte or one message here changes the format (or what an
operator reads), so it must be deliberate.

Regenerate only for such a deliberate change, and say so in the commit:

    PYTHONPATH=. .venv/bin/python tests/core/test_codec_golden.py --write

(``PYTHONPATH=.``: this checkout's eventq, not whichever one is installed.)
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from eventq.core import (
    Accepted,
    Add,
    CodecError,
    Complete,
    DecodedCommand,
    Delete,
    Deleted,
    Depend,
    Expire,
    Expired,
    Fail,
    Import,
    Input,
    Job,
    Registration,
    ReleaseAttempt,
    Retry,
    Schedule,
    StartAttempt,
    State,
    TimeoutAttempt,
    Touch,
    Upstream,
    UpstreamOutcome,
    apply,
    decode_command,
    decode_input,
    decode_job,
    decode_recurrence,
    decode_registration,
    decode_state,
    encode_command,
    encode_input,
    encode_job,
    encode_recurrence,
    encode_registration,
    encode_state,
)
from eventq.core.batch import position
from eventq.core.commands import Fire, Pause, Recur, Resume, Unrecur
from eventq.core.recurrence import Definition, Recurrence
from eventq.limits import (
    MAX_ATTEMPTS_LIMIT,
    MAX_BACKOFF_MS,
    MAX_EVERY_MS,
    MAX_PRIORITY,
    MAX_REQUEST_ID,
    MAX_TTL_MS,
    MAX_TTR_MS,
    MIN_PRIORITY,
)

GOLDEN = Path(__file__).with_name("codec_golden.json")

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
T0 = 1_700_000_000_000
BIG_POSITION = position(2**40 + 3, 7)  # an offset and an index, both over a byte


def packed(m: object) -> bytes:
    return msgpack.packb(m, use_bin_type=True)


# ------------------------------------------------------------------ golden records
# A case is (decoder name, what it must decode to, how today's encoder writes it, or
# None for records no encoder writes any more: their bytes are built by hand).


def run(*commands: Any, step: int, offset: int = 100) -> list[tuple[Any, Job | None]]:
    """The (event, job) records a history of commands leaves, one per accepted command
    (``step`` ms apart, from T0)."""
    job, records = None, []
    for n, command in enumerate(commands):
        outcome, job = apply(job, command, T0 + step * n, position(offset + n))
        assert isinstance(outcome, Accepted), (command, outcome)
        records.append((outcome.event, job))
    return records


ADD = Add(JID, "q", 1000, 60_000, b"payload", priority=5, max_attempts=2, max_fails=2)
ADD_BACKOFF = Add(JID, "q", 1000, 60_000, b"", max_attempts=3, max_fails=3, backoff_ms=250)
SCHEDULE = Schedule(JID, "later.q-1_x", 30, 90_000, T0 + 5000, b"\x00\xff" * 4, -3, 0, 1)
START, TIMEOUT = StartAttempt(JID, 1), TimeoutAttempt(JID, 1)
# Workflows (docs/workflows.md, "Dependencies"): a dependent of two upstreams, added at
# position(100).
UP1 = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
UP2 = uuid.UUID("c9bf9e57-1685-4c89-bafb-ff5af830be8a")
ADD_AFTER = Add(JID, "q", 1000, 60_000, b"payload", max_fails=2, after=(UP1, UP2))
_OK = UpstreamOutcome.COMPLETED
DONE1 = Upstream(JID, position(100), UP1, _OK, position(7, 1), T0 - 5, b"r1")
DONE2 = Upstream(JID, position(100), UP2, _OK, BIG_POSITION, T0 - 3, b"")
# Tags (docs/workflows.md, "Tags"): kept in their given order, for the job's life.
ADD_TAGS = Add(JID, "q", 1000, 60_000, b"payload", max_fails=2, tags=("nightly", "b.2-x_Y"))
TAGS_16 = tuple(f"t{n:02d}" + "x" * 61 for n in range(16))  # 16 tags of 64 bytes


# Recurring jobs (docs/workflows.md, "Recurring jobs").
RECUR = Recur("nightly", "etl", 60_000, 86_400_000, 86_400_000, b"{}")
RECUR_FULL = Recur("every.1s", "q", MAX_TTR_MS, MAX_TTL_MS, 1000, b"\x00\xff", MIN_PRIORITY,
                   MAX_ATTEMPTS_LIMIT, 3, MAX_BACKOFF_MS, ("a", "b-c", "d.e_f"))
DEFINITION = Definition("nightly", "etl", 60_000, 86_400_000, 86_400_000, b"{}", 0, 0, 0, 0, (),
                        T0)


def last(*commands: Any, step: int = 10) -> tuple[Any, Job | None]:
    return run(*commands, step=step)[-1]


def state_cases() -> dict[str, tuple[Any, Job | None]]:
    """Every event type, each in the records real histories leave."""
    started = last(ADD, START)
    leased_backoff = last(ADD_BACKOFF, START, Fail(JID, b"no"), StartAttempt(JID, 2), step=300)
    return {
        "added": last(ADD),
        "added-backoff": last(ADD_BACKOFF),
        "added-scheduled": last(SCHEDULE),
        "added-run": last(Add(JID, "q", 1, 0, b"r")),
        "completed": last(ADD, START, Complete(JID, b"result")),
        "failed": last(Add(JID, "q", 1000, 60_000, b"", max_fails=1), START, Fail(JID, b"bad")),
        "fail-retried": last(ADD, START, Fail(JID, b"again")),
        "fail-retried-backoff": last(ADD_BACKOFF, START, Fail(JID, b"again")),
        "attempt-started": started,
        "attempt-started-backoff": leased_backoff,
        "attempts-exhausted": last(
            Add(JID, "q", 1000, 60_000, b"", max_attempts=1, max_fails=2), START,
            Fail(JID, b""), StartAttempt(JID, 2),
        ),
        "attempt-timed-out-requeued": last(ADD, START, TIMEOUT, step=2000),
        "attempt-timed-out-failed": last(
            Add(JID, "q", 1000, 60_000, b"", max_attempts=1), START, TIMEOUT, step=2000
        ),
        "attempt-timed-out-backoff": last(ADD_BACKOFF, START, TIMEOUT, step=2000),
        "deleted": (Deleted(JID, T0, position(100)), None),
        "expired-evicted": (Expired(JID, T0, BIG_POSITION, True), None),
        "expired-final": (Expired(JID, T0, 7, False), None),
        "imported": last(Import.from_job(started[1])),
        "imported-backoff": last(Import.from_job(leased_backoff[1])),
        "imported-completed": last(Import.from_job(last(ADD, START, Complete(JID, b"r"))[1])),
        "attempt-released": last(ADD, START, ReleaseAttempt(JID, 1, State.NEW)),
        "attempt-released-pending": last(
            ADD, START, Fail(JID, b""), StartAttempt(JID, 2), ReleaseAttempt(JID, 2, State.PENDING)
        ),
        "touched": last(ADD, START, Touch(JID, 1, 5000)),
        "touched-own-ttr": last(ADD, START, Touch(JID, 1)),
        "added-waiting": last(ADD_AFTER),
        "fail-counted": last(ADD_AFTER, Fail(JID, b"not yet")),
        "upstream-noted": last(ADD_AFTER, DONE1),
        "upstream-noted-retried": last(ADD_AFTER, DONE1, Upstream(
            JID, position(100), UP1, UpstreamOutcome.RETRIED, position(9), T0, None)),
        "released": last(ADD_AFTER, DONE1, DONE2),
        "upstream-failed": last(ADD_AFTER, DONE1, Upstream(
            JID, position(100), UP2, UpstreamOutcome.EVICTED, position(8), T0, None)),
        "completed-dependent": last(ADD_AFTER, DONE1, DONE2, START, Complete(JID, b"done")),
        "added-tags": last(ADD_TAGS),
        "completed-tags": last(ADD_TAGS, START, Complete(JID, b"done")),
        "added-waiting-tags": last(Add(JID, "q", 1000, 60_000, b"", after=(UP1,), tags=("a",))),
        "added-waiting-scope": last(
            Add(JID, "acme.q", 1000, 60_000, b"", after=(UP1,), scope="acme.")),
        "imported-tags": last(Import.from_job(last(ADD_TAGS, START)[1])),
        # Failure groups and retry (docs/workflows.md, "Failure groups and retry").
        "failed-group": last(Add(JID, "q", 1000, 60_000, b""), START, Fail(JID, b"x", "deploy-7")),
        "failed-named-default": last(Add(JID, "q", 1000, 60_000, b""), Fail(JID, b"", "failed")),
        "retried": last(Add(JID, "q", 1000, 60_000, b""), Fail(JID, b"x", "g"), Retry(JID)),
        "retried-delay": last(ADD_BACKOFF, START, Fail(JID, b"", "kept-not"), StartAttempt(JID, 2),
                              Fail(JID, b"no"), Fail(JID, b"end", "deploy"),
                              Retry(JID, 86_400_000), step=300),
        "retried-early": last(SCHEDULE, Fail(JID, b"x"), Retry(JID)),
        "retried-waiting": last(ADD_AFTER, DONE1, Upstream(
            JID, position(100), UP2, UpstreamOutcome.FAILED, position(8), T0, b"f"), Retry(JID, 5)),
        "upstream-retried": last(ADD_AFTER, DONE1, Upstream(
            JID, position(100), UP2, UpstreamOutcome.FAILED, position(8), T0, b"f"), Upstream(
            JID, position(100), UP2, UpstreamOutcome.RETRIED, position(9), T0 + 1, None)),
        "upstream-retried-stays-failed": last(ADD_AFTER, Upstream(
            JID, position(100), UP2, UpstreamOutcome.FAILED, position(8), T0, b"f"), Upstream(
            JID, position(100), UP1, UpstreamOutcome.DELETED, position(3), T0, None), Upstream(
            JID, position(100), UP2, UpstreamOutcome.RETRIED, position(9), T0 + 1, None)),
    }


def job_cases() -> dict[str, Job]:
    states = state_cases()
    return {
        "new": states["added"][1],
        "scheduled": states["added-scheduled"][1],
        "run": states["added-run"][1],
        "leased": states["attempt-started"][1],
        "completed": states["completed"][1],
        "failed": states["failed"][1],
        "backoff-only": states["added-backoff"][1],  # b, no rn or rt
        "backoff-returned": states["fail-retried-backoff"][1],  # b, rn and rt
        "backoff-leased": states["attempt-started-backoff"][1],
        "waiting": states["added-waiting"][1],
        "released": states["released"][1],
        "upstream-failed": states["upstream-failed"][1],
        "completed-dependent": states["completed-dependent"][1],
        "tagged": states["added-tags"][1],
        "tagged-completed": states["completed-tags"][1],
        "failed-group": states["failed-group"][1],
        "retried-delay": states["retried-delay"][1],
        "retried-early": states["retried-early"][1],
        "retried-waiting": states["retried-waiting"][1],
        "waiting-scope": states["added-waiting-scope"][1],
    }


def command_cases() -> dict[str, tuple[Any, str | None, int | None]]:
    """Every command type, with and without its optional fields, and the correlation
    fields present, absent, and each alone."""
    jobs = job_cases()
    return {
        "add": (ADD, None, None),
        "add-node-request": (ADD, "n1", 42),
        "add-node-only": (ADD, "node-é", None),
        "add-request-only": (ADD, None, MAX_REQUEST_ID),
        "add-run": (Add(JID, "q", MAX_TTR_MS, 0, b""), "", 0),
        "add-limits": (
            Add(JID, "a" * 255, 1, MAX_TTL_MS, b"\x00" * 300, MIN_PRIORITY, MAX_ATTEMPTS_LIMIT,
                3, MAX_BACKOFF_MS),
            None, 2**32,
        ),
        "add-backoff": (ADD_BACKOFF, "n1", 7),
        "schedule": (SCHEDULE, None, None),
        "schedule-backoff": (
            Schedule(JID, "q", 1000, 60_000, T0, b"s", MAX_PRIORITY, 1, 1, 1), "n2", 2**16
        ),
        "complete": (Complete(JID, b"done"), "n1", 1),
        "complete-empty": (Complete(JID, b""), None, None),
        "fail": (Fail(JID, b"why"), None, None),
        "delete": (Delete(JID), None, None),
        "expire": (Expire(uuid.UUID(int=0)), None, None),
        "start-attempt": (START, "n1", 99),
        "start-attempt-over-limit": (StartAttempt(JID, MAX_ATTEMPTS_LIMIT + 1), None, None),
        "timeout-attempt": (TimeoutAttempt(JID, 3), None, None),
        "import-new": (Import.from_job(jobs["new"]), None, None),
        "import-scheduled": (Import.from_job(jobs["scheduled"]), "n1", 5),
        "import-completed": (Import.from_job(jobs["completed"]), None, None),
        "import-failed": (Import.from_job(jobs["failed"]), None, None),
        "import-backoff": (Import.from_job(jobs["backoff-returned"]), None, None),
        "import-backoff-leased": (Import.from_job(jobs["backoff-leased"]), None, None),
        "touch": (Touch(JID, 1), None, None),
        "touch-ttr": (Touch(JID, 2, MAX_TTR_MS), "n1", 3),
        "release-attempt": (ReleaseAttempt(JID, 1, State.NEW), None, None),
        "release-attempt-claim": (ReleaseAttempt(JID, 2, State.PENDING, BIG_POSITION), "n", 1),
        "release-attempt-claim-0": (ReleaseAttempt(JID, 1, State.NEW, 0), None, None),
        "pause": (Pause("q"), None, None),
        "pause-node-request": (Pause("emails"), "n1", 8),
        "resume": (Resume("q"), None, None),
        "add-after": (ADD_AFTER, None, None),
        "schedule-after": (
            Schedule(JID, "q", 1000, 60_000, T0, b"s", after=(UP2,)), "n1", 4
        ),
        "depend": (Depend(UP1, JID, position(100), T0 + 60_000), "n1", 5),
        "depend-no-deadline": (Depend(UP1, JID, BIG_POSITION, None), None, None),
        "upstream-completed": (DONE1, "n1", 6),
        "upstream-failed": (
            Upstream(JID, BIG_POSITION, UP2, UpstreamOutcome.FAILED, 0, T0, b""), None, None
        ),
        "upstream-deleted": (
            Upstream(JID, 0, UP1, UpstreamOutcome.DELETED, BIG_POSITION, T0, None), None, None
        ),
        "upstream-retried": (
            Upstream(JID, 7, UP1, UpstreamOutcome.RETRIED, 8, T0, None), None, None
        ),
        "recur": (RECUR, "n1", 9),
        "recur-full": (RECUR_FULL, None, None),
        "recur-every-max": (
            Recur("r", "q", 1, 1, MAX_EVERY_MS, b"", tags=("t" * 64,)), None, None
        ),
        "unrecur": (Unrecur("nightly"), "n1", 10),
        "fire": (Fire("nightly", 19723), None, None),
        "fire-slot-0": (Fire("r", 0), None, None),
        "add-tags": (ADD_TAGS, "n1", 9),
        "add-tags-16": (Add(JID, "q", 1, 0, b"", tags=TAGS_16), None, None),
        "schedule-backoff-after-tags": (
            Schedule(JID, "q", 1000, 60_000, T0, b"s", 1, 2, 3, 250, (UP1, UP2), ("x",)),
            None, None,
        ),
        "import-tags": (Import.from_job(jobs["tagged-completed"]), None, None),
        "fail-group": (Fail(JID, b"why", "bad-deploy.7"), "n1", 9),
        "retry": (Retry(JID), "n1", 10),
        "retry-delay": (Retry(JID, 86_400_000), None, None),
        # [eventq] docs/security.md, "Queue-name prefixes": a token's prefix (scope) on
        # the commands it issues.
        "add-after-scope": (
            Add(JID, "acme.q", 1000, 60_000, b"p", after=(UP1,), scope="acme."), "n1", 11
        ),
        "schedule-scope": (Schedule(JID, "acme.q", 1000, 60_000, T0, b"s", scope="a"), None, None),
        "complete-scope": (Complete(JID, b"done", "acme."), None, None),
        "fail-scope": (Fail(JID, b"why", "g", "acme."), None, None),
        "delete-scope": (Delete(JID, "acme."), None, None),
        "touch-scope": (Touch(JID, 1, None, "acme."), None, None),
        "retry-scope": (Retry(JID, 0, "acme."), None, None),
        "depend-scope": (Depend(UP1, JID, position(100), T0 + 60_000, "acme."), "n1", 12),
        "recur-scope": (Recur("r", "acme.q", 1, 1, MAX_EVERY_MS, b"", scope="acme."), None, None),
        "unrecur-scope": (Unrecur("nightly", "acme."), None, None),
    }


# [eventq] audit (docs/security.md, "Queue-name prefixes"): commands with the name of the
# token that issued them.
ISSUED = {
    "add-by": (ADD_AFTER, "n1", 3, "line-3"),
    "pause-by": (Pause("q"), None, None, "line-1"),
    "start-attempt-by": (START, "n2", 2**64 - 1, "x" * 255),
}


def side_cases() -> dict[str, tuple[str, Any, bytes]]:
    """The records of workflows beside the jobs (eventq/core/workflow.py)."""
    cases: list[tuple[str, str, Any]] = [
        ("registration", "registration", Registration(JID, position(100), T0 + 60_000)),
        ("registration-no-deadline", "registration", Registration(JID, BIG_POSITION, None)),
        ("registration-scope", "registration",
         Registration(JID, position(100), T0 + 60_000, "acme.")),
        ("input-completed", "input", Input(True, b"r1")),
        ("input-failed", "input", Input(False, b"")),
        ("recurrence-new", "recurrence", Recurrence(DEFINITION, 19674, None, position(100))),
        ("recurrence-fired", "recurrence", Recurrence(
            Definition("every.1s", "q", MAX_TTR_MS, MAX_TTL_MS, 1000, b"\x00\xff", MIN_PRIORITY,
                       MAX_ATTEMPTS_LIMIT, 3, MAX_BACKOFF_MS, ("a", "b-c"), T0),
            T0 // 1000, T0 + 3000, BIG_POSITION)),
        ("recurrence-fired-0", "recurrence", Recurrence(DEFINITION, 0, 0, 0)),
    ]
    encoders: dict[str, Callable[[Any], bytes]] = {
        "registration": encode_registration, "input": encode_input,
        "recurrence": encode_recurrence,
    }  # fmt: skip
    return {name: (decoder, value, encoders[decoder](value)) for name, decoder, value in cases}


def old_state_records() -> dict[str, tuple[bytes, tuple[Any, Job | None]]]:
    """State records no encoder writes any more, and what they are read as."""
    event, job = state_cases()["attempt-started"]
    v2 = msgpack.unpackb(encode_state(event, job))
    offset = event.offset // position(1)  # record offsets counted one command each
    v1 = {"v": 1, "e": dict(v2["e"], o=offset), "j": dict(v2["j"], ver=offset)}
    completed = msgpack.unpackb(encode_state(*state_cases()["completed"]))
    completed["e"]["x"] = b"result"  # before the result was stored once, in the job
    removed = {"v": 1, "e": {"t": 9, "i": JID.bytes, "a": T0, "o": 3, "ev": True}, "j": None}
    return {
        "state-v1": (packed(v1), (event, job)),
        "state-result-in-event": (packed(completed), state_cases()["completed"]),
        "state-v1-removed": (packed(removed), (Expired(JID, T0, position(3), True), None)),
        "job-v1": (packed({"v": 1, "j": v1["j"]}), job),
    }


def golden_records() -> dict[str, tuple[str, Any, bytes]]:
    """name → (decoder, expected decoded value, the record's bytes as encoded now)."""
    records: dict[str, tuple[str, Any, bytes]] = {}
    for name, (command, node, request_id) in command_cases().items():
        data = encode_command(command, node=node, request_id=request_id)
        records[f"command/{name}"] = ("command", DecodedCommand(command, node, request_id), data)
    for name, (command, node, request_id, issuer) in ISSUED.items():
        data = encode_command(command, node=node, request_id=request_id, issuer=issuer)
        records[f"command/{name}"] = (
            "command", DecodedCommand(command, node, request_id, issuer), data)
    for name, (event, job) in state_cases().items():
        records[f"state/{name}"] = ("state", (event, job), encode_state(event, job))
    for name, job in job_cases().items():
        records[f"job/{name}"] = ("job", job, encode_job(job))
    for name, (data, expected) in old_state_records().items():
        records[f"old/{name}"] = ("job" if name.startswith("job") else "state", expected, data)
    for name, (decoder, value, data) in side_cases().items():
        records[f"{decoder}/{name}"] = (decoder, value, data)
    return records


DECODERS: dict[str, Callable[[bytes], Any]] = {
    "command": decode_command, "state": decode_state, "job": decode_job,
    "registration": decode_registration, "input": decode_input,
    "recurrence": decode_recurrence,
}  # fmt: skip


# --------------------------------------------------------------- golden rejections
# Single-field mutations of golden records: every field dropped, given each of these
# values, and an unknown field added, at the top and in the nested maps listed.

VALUES: dict[str, object] = {
    "nil": None, "true": True, "-1": -1, "2^64-1": 2**64 - 1, "1.5": 1.5, "'s'": "s",
    "bin": b"x",
}  # fmt: skip

# The nested maps mutated per record (the job map's fields only in a few records: they
# are read by the same code in all of them).
JOB_MAP_MUTATED = {
    "state/attempt-started-backoff", "state/completed", "state/imported", "job/completed",
    "job/backoff-returned", "state/upstream-failed", "job/released", "job/tagged",
}  # fmt: skip


def nested_paths(name: str, m: dict[str, Any]) -> list[tuple[str, ...]]:
    if name.startswith("command/"):
        nested = ("command/import-backoff", "command/import-failed", "command/import-tags")
        return [()] + ([("j",)] if name in nested else [])
    paths = [()]
    if type(m.get("e")) is dict:
        paths.append(("e",))
    if type(m.get("j")) is dict and name in JOB_MAP_MUTATED:
        paths.append(("j",))
    if type(m.get("df")) is dict:  # a recurrence's definition
        paths.append(("df",))
    return paths


def mutations(name: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    original = msgpack.unpackb(data)
    assert packed(original) == data  # so a mutated map differs only where mutated
    for path in nested_paths(name, original):
        where = "".join(f"{p}." for p in path)

        def mutated(change: Callable[[dict[str, Any]], None]) -> bytes:
            m = msgpack.unpackb(data)
            inner = m
            for p in path:
                inner = inner[p]
            change(inner)
            return packed(m)

        inner = original
        for p in path:
            inner = inner[p]
        for key in inner:
            yield f"{where}{key} dropped", mutated(lambda m, k=key: m.pop(k))
            for label, value in VALUES.items():
                if value != inner[key] or type(value) is not type(inner[key]):
                    yield f"{where}{key}={label}", mutated(lambda m, k=key, v=value: m.update({k: v}))
        yield f"{where}zz added", mutated(lambda m: m.update(zz=1))


def outcome(decoder: str, data: bytes) -> str:
    """The CodecError's message, or "ok" and a hash of the record it re-encodes to."""
    try:
        value = DECODERS[decoder](data)
    except CodecError as error:
        return str(error)
    if decoder == "command":
        again = encode_command(value.command, node=value.node, request_id=value.request_id,
                               issuer=value.issuer)
    elif decoder == "state":
        again = encode_state(*value)
    elif decoder == "registration":
        again = encode_registration(value)
    elif decoder == "input":
        again = encode_input(value)
    elif decoder == "recurrence":
        again = encode_recurrence(value)
    else:
        again = encode_job(value)
    return "ok " + hashlib.sha256(again).hexdigest()[:16]


# Records that are no record of ours, and encoder inputs that cannot be encoded.
NOT_RECORDS: dict[str, object] = {
    "empty": b"", "never used": b"\xc1", "truncated map": b"\x81", "str": "not bytes",
    "None": None, "int": 12, "array": packed([1, 1, JID.bytes]), "nil": packed(None),
    "int keys": packed({1: 2}), "bin keys": packed({b"v": 1}), "no version": packed({"t": 1}),
    "version 3": packed({"v": 3}), "version true": packed({"v": True}),
    "trailing": encode_command(Delete(JID)) + b"\x00", "bytearray": bytearray(packed({"v": 1})),
}  # fmt: skip


def encode_errors() -> dict[str, Callable[[], object]]:
    event, job = state_cases()["attempt-started"]
    return {
        "not a command": lambda: encode_command("add"),  # type: ignore[arg-type]
        "a job as command": lambda: encode_command(job),  # type: ignore[arg-type]
        "node too long": lambda: encode_command(Delete(JID), node="n" * 256),
        "node not str": lambda: encode_command(Delete(JID), node=b"n"),  # type: ignore[arg-type]
        "request id -1": lambda: encode_command(Pause("q"), request_id=-1),
        "request id 2^64": lambda: encode_command(Delete(JID), request_id=2**64),
        "request id bool": lambda: encode_command(Delete(JID), request_id=True),
        "not an event": lambda: encode_state(job, job),  # type: ignore[arg-type]
        "not a job": lambda: encode_state(event, event),  # type: ignore[arg-type]
        "live job removed": lambda: encode_state(Deleted(JID, T0, event.offset), job),
        "no job for a live one": lambda: encode_state(event, None),
        "another version": lambda: encode_state(state_cases()["completed"][0], job),
        "job not a job": lambda: encode_job(event),  # type: ignore[arg-type]
    }


def error_of(action: Callable[[], object]) -> str:
    try:
        action()
    except CodecError as error:
        return str(error)
    return "no error"


def golden_now() -> dict[str, Any]:
    """The golden file's content, as the codec makes it now."""
    records = golden_records()
    rejections = {}
    for name, (decoder, _, data) in records.items():
        rejections[name] = {label: outcome(decoder, mutated)
                            for label, mutated in mutations(name, data)}  # fmt: skip
    return {
        "records": {name: data.hex() for name, (_, _, data) in records.items()},
        "rejections": rejections,
        "not_records": {
            f"{decoder}/{label}": outcome(decoder, data)  # type: ignore[arg-type]
            for label, data in NOT_RECORDS.items()
            for decoder in DECODERS
        },
        "encode_errors": {label: error_of(action) for label, action in encode_errors().items()},
    }


# -------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


@pytest.fixture(scope="module")
def now() -> dict[str, Any]:
    return golden_now()


def test_every_record_is_written_byte_for_byte_as_before(golden, now):
    assert now["records"].keys() == golden["records"].keys()
    for name, data in golden["records"].items():
        assert now["records"][name] == data, name


@pytest.mark.parametrize("name", sorted(golden_records()))
def test_every_golden_record_decodes_to_its_value(name, golden):
    decoder, expected, _ = golden_records()[name]
    assert DECODERS[decoder](bytes.fromhex(golden["records"][name])) == expected


def test_every_command_and_event_type_has_a_golden_record():
    from eventq.core import CommandType, EventType

    cases = golden_records().values()
    commands = {v.command.type for d, v, _ in cases if d == "command"}
    events = {v[0].type for d, v, _ in cases if d == "state"}
    assert commands == set(CommandType) and events == set(EventType)


def test_malformed_records_are_rejected_with_the_same_messages(golden, now):
    assert now["rejections"].keys() == golden["rejections"].keys()
    for name, expected in golden["rejections"].items():
        assert now["rejections"][name] == expected, name


def test_what_is_no_record_is_rejected_with_the_same_messages(golden, now):
    assert now["not_records"] == golden["not_records"]


def test_what_cannot_be_encoded_is_refused_with_the_same_messages(golden, now):
    assert now["encode_errors"] == golden["encode_errors"]
    assert "no error" not in golden["encode_errors"].values()


if __name__ == "__main__":
    import eventq

    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    if Path(eventq.__file__).resolve().parents[1] != GOLDEN.resolve().parents[2]:
        sys.exit(f"{eventq.__file__} is another checkout's eventq: run with PYTHONPATH=.")
    GOLDEN.write_text(json.dumps(golden_now(), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN}")
