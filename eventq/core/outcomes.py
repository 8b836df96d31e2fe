"""What deciding a command gives (``machine.decide``): the command is ``Accepted`` with
the event it makes, ``Rejected`` with the protocol's error for its issuer, or
``Ignored`` for a reason (``ALREADY_APPLIED`` ...) with nobody to tell; and the types of
the functions the transition table (eventq/core/machine.py) is made of.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from eventq.core.events import EVENT_CLASSES, Event
from eventq.core.job import Job
from eventq.errors import EventqError

_EVENT_TYPES = tuple(EVENT_CLASSES.values())


@dataclass(frozen=True, slots=True)
class Accepted:
    """The command changes the job: ``event`` says how (fold it with ``evolve``)."""

    event: Event

    def __post_init__(self) -> None:
        if not isinstance(self.event, _EVENT_TYPES):
            raise ValueError(f"not an event: {self.event!r:.100}")


@dataclass(frozen=True, slots=True)
class Rejected:
    """The command is refused; ``error`` is the reply for whoever issued it."""

    error: EventqError

    def __post_init__(self) -> None:
        if not isinstance(self.error, EventqError):
            raise ValueError(f"not an EventqError: {self.error!r:.100}")


@dataclass(frozen=True, slots=True)
class Ignored:
    """No state change and nobody to tell (duplicate delivery, stale claim or timer)."""

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str):
            raise ValueError(f"reason must be a str, got {type(self.reason).__name__}")


Outcome: TypeAlias = Accepted | Rejected | Ignored

# Reasons of Ignored outcomes.
ALREADY_APPLIED = "already applied"  # offset <= job.version
NO_SUCH_JOB = "no such job"  # a timer or claim for a job that is gone
CLAIM_REFUSED = "claim refused"  # start-attempt on a job not ready at that attempt
STALE_ATTEMPT = "stale attempt"  # timeout-attempt for an attempt that is not current
OTHER_CLAIM = "other claim"  # a give-back of a claim that did not start this attempt
NOT_YET_DUE = "not yet due"  # a timer fired before the deadline (by the broker's clock)
EXPIRED_BEFORE_IMPORT = "expired before import"  # an import whose TTL passed at at_ms
REGISTERED = "registered"  # a depend: the upstream is unchanged (followups.py registers)
REGISTERED_FINISHED = "registered, upstream finished"  # ... and told at once of its end
STALE_NOTICE = "stale notice"  # an upstream notice for another creation, or not newer

# The command is Any: each handler takes the command type of its row of TRANSITIONS, a
# pairing the table makes and the type system cannot state.
Handler: TypeAlias = Callable[[Job | None, Any, int, int], Outcome]
# The event is Any: each evolution takes the event type of its key in EVOLUTIONS.
Evolution: TypeAlias = Callable[[Job, Any], Job | None]


def ignore(reason: str) -> Handler:
    """The handler that ignores a command for ``reason``, whatever it is."""
    outcome = Ignored(reason)

    def handler(job: Job | None, c: Any, at_ms: int, offset: int) -> Outcome:
        return outcome

    handler.__name__ = f"_ignore_{reason.replace(' ', '_')}"
    return handler
