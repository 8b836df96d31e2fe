"""One job's commands folded with the core, one outcome row per command (pure).

``eventq spark stats`` folds every job of the command log with it
(eventq/spark/rows.py ``fold_commands``) and the dashboard's job page one job's
history (eventq/observe/joblog.py): each command's outcome, and the wait and run
times by the rule of eventq/core/timing.py.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from eventq.core import timing
from eventq.core.commands import Command, CommandType
from eventq.core.events import EventType
from eventq.core.job import Job
from eventq.core.machine import Accepted, Ignored, Rejected, apply


def _kebab(enum_member: Enum) -> str:
    return enum_member.name.lower().replace("_", "-")


COMMAND_NAMES = {int(t): _kebab(t) for t in CommandType}
EVENT_NAMES = {int(t): _kebab(t) for t in EventType}


class JobFold:
    """The fold of one job's commands, with the times the stats need (the rule of
    eventq/core/timing.py, shared with the processor's live statistics)."""

    __slots__ = ("job", "queue", "since")

    def __init__(self) -> None:
        self.job: Job | None = None
        self.queue: str | None = None
        self.since = timing.NOTHING

    def step(self, command: Command, at_ms: int, offset: int) -> dict[str, Any]:
        row: dict[str, Any] = {
            "job_id": str(command.job_id), "command": COMMAND_NAMES.get(int(command.type)),
            "at_ms": at_ms,
        }  # fmt: skip
        before = self.job
        try:
            outcome, after = apply(before, command, at_ms, offset)
        except ValueError as error:  # a command the core cannot apply to this state
            row.update(queue=self.queue, outcome="invalid", detail=str(error))
            return row
        if isinstance(outcome, Rejected):
            row.update(outcome="rejected", detail=outcome.error.text or outcome.error.code)
        elif isinstance(outcome, Ignored):
            row.update(outcome="ignored", detail=outcome.reason)
        else:
            assert isinstance(outcome, Accepted)
            event = outcome.event
            row.update(outcome="accepted", event=EVENT_NAMES.get(int(event.type)))
            samples = timing.advance(self.since, event, before, after, at_ms)
            self.since = samples.since
            for column in ("wait_ms", "run_ms", "attempt"):
                value = getattr(samples, column)
                if value is not None:
                    row[column] = value
        self.job = after
        if after is not None:
            self.queue = after.name
        row["queue"] = self.queue
        return row
