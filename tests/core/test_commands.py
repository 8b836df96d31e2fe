"""Commands and events validate their fields on construction."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from eventq.core import (
    COMMAND_CLASSES,
    EVENT_CLASSES,
    Add,
    Added,
    AttemptStarted,
    AttemptTimedOut,
    CommandType,
    Complete,
    Completed,
    Delete,
    EventType,
    Expire,
    Expired,
    Fail,
    Schedule,
    StartAttempt,
    State,
    TimeoutAttempt,
    apply,
)
from eventq.core.commands import QUEUE_COMMAND_CLASSES, RECURRENCE_COMMAND_CLASSES
from eventq.limits import MAX_PAYLOAD_BYTES, MAX_TIME_MS, MAX_TTL_MS, MIN_TIME_MS

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")


def test_command_type_numbers_match_workq():
    assert {t.name: int(t) for t in CommandType} == {
        "ADD": 1, "SCHEDULE": 2, "COMPLETE": 3, "FAIL": 4, "DELETE": 5, "EXPIRE": 6,
        "START_ATTEMPT": 7, "TIMEOUT_ATTEMPT": 8,
        "IMPORT": 64,  # eventq's extensions (FIRST_EXTENSION_TYPE), see test_import_command
        "RELEASE_ATTEMPT": 65,  # and test_core_release
        "TOUCH": 66, "PAUSE": 67, "RESUME": 68,  # and test_core_extensions
        "DEPEND": 69, "UPSTREAM": 70,  # docs/workflows.md, "Command types", and test_core_workflow
        "RETRY": 71,  # docs/workflows.md, "Command types", and test_core_retry
        "RECUR": 72, "UNRECUR": 73, "FIRE": 74,  # and test_core_recurrence
    }  # fmt: skip
    # A command names a job, (pause, resume) a queue, or a recurrence.
    apart = (COMMAND_CLASSES, QUEUE_COMMAND_CLASSES, RECURRENCE_COMMAND_CLASSES)
    assert set().union(*apart) == set(CommandType)
    assert sum(map(len, apart)) == len(CommandType)
    assert all(cls.type is t for t, cls in COMMAND_CLASSES.items())
    assert set(EVENT_CLASSES) == set(EventType)


def test_valid_commands_and_defaults():
    add = Add(JID, "q", 1, 0, b"")
    assert (add.priority, add.max_attempts, add.max_fails) == (0, 0, 0)
    Add(JID, "a" * 255, 86_400_000, MAX_TTL_MS, b"x" * MAX_PAYLOAD_BYTES, -(2**31), 255, 255)
    Schedule(JID, "q", 1, 1, MIN_TIME_MS, b"")
    Schedule(JID, "q", 1, MAX_TTL_MS, MAX_TIME_MS, b"", 2**31 - 1)
    Complete(JID, b"")
    Fail(JID, b"x" * MAX_PAYLOAD_BYTES)
    Delete(JID)
    Expire(JID)
    StartAttempt(JID, 1)
    StartAttempt(JID, 256)  # one past the cap: applying it exhausts the attempts
    TimeoutAttempt(JID, 255)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Add(str(JID), "q", 1, 0, b""),
        lambda: Add(JID, "", 1, 0, b""),
        lambda: Add(JID, "a/b", 1, 0, b""),
        lambda: Add(JID, "a" * 256, 1, 0, b""),
        lambda: Add(JID, "q", 0, 0, b""),
        lambda: Add(JID, "q", 86_400_001, 0, b""),
        lambda: Add(JID, "q", 1, -1, b""),
        lambda: Add(JID, "q", 1, MAX_TTL_MS + 1, b""),
        lambda: Add(JID, "q", 1, 0, "payload"),
        lambda: Add(JID, "q", 1, 0, bytearray(b"p")),
        lambda: Add(JID, "q", 1, 0, b"x" * (MAX_PAYLOAD_BYTES + 1)),
        lambda: Add(JID, "q", 1, 0, b"", priority=2**31),
        lambda: Add(JID, "q", 1, 0, b"", priority=-(2**31) - 1),
        lambda: Add(JID, "q", 1, 0, b"", max_attempts=256),
        lambda: Add(JID, "q", 1, 0, b"", max_attempts=-1),
        lambda: Add(JID, "q", 1, 0, b"", max_fails=256),
        lambda: Add(JID, "q", True, 0, b""),
        lambda: Schedule(JID, "q", 1, 0, 0, b""),  # schedule needs a TTL
        lambda: Schedule(JID, "q", 1, 1, MAX_TIME_MS + 1, b""),
        lambda: Schedule(JID, "q", 1, 1, MIN_TIME_MS - 1, b""),
        lambda: Schedule(JID, "q", 1, 1, 1.5, b""),
        lambda: Complete(JID, None),
        lambda: Complete(JID, b"x" * (MAX_PAYLOAD_BYTES + 1)),
        lambda: Fail(JID, "r"),
        lambda: Delete(None),
        lambda: Expire(JID.bytes),
        lambda: StartAttempt(JID, 0),
        lambda: StartAttempt(JID, 257),
        lambda: TimeoutAttempt(JID, 0),
        lambda: TimeoutAttempt(JID, 256),
    ],
)
def test_impossible_commands_are_refused(make):
    with pytest.raises(ValueError):
        make()


def test_commands_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Delete(JID).job_id = uuid.uuid4()  # type: ignore[misc]


def test_impossible_events_are_refused():
    _, job = apply(None, Add(JID, "q", 10, 100, b""), 1000, 5)
    Added(JID, 1000, 5, job)
    with pytest.raises(ValueError):
        Added(JID, 1000, 6, job)  # version must be the offset
    with pytest.raises(ValueError):
        Added(JID, 1001, 5, job)  # created must be at
    with pytest.raises(ValueError):
        Added(uuid.UUID(int=1), 1000, 5, job)
    with pytest.raises(ValueError):
        Added(JID, 1000, 5, dataclasses.replace(job, state=State.PENDING))
    with pytest.raises(ValueError):
        Added(JID, 1000, 5, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Completed(JID, 1000, -1, b"")
    with pytest.raises(ValueError):
        Completed(JID, MAX_TIME_MS + 1, 1, b"")
    with pytest.raises(ValueError):
        AttemptStarted(JID, 1000, 1, 0, 2000)
    with pytest.raises(ValueError):
        AttemptTimedOut(JID, 1000, 1, 1, 1)  # requeued must be a bool
    with pytest.raises(ValueError):
        Expired(JID, 1000, 1, None)  # type: ignore[arg-type]
