"""Claims made for another process's lease, until that process confirms them.

A lease at one process may take a job another process owns
(eventq/gateway/cluster_answers.py): the owner claims it (start-attempt) and sends the
handover over a peer connection. If the asking process cannot take it (stopped with
SIGSTOP, its ask timed out, its connection gone), the claimed attempt would be spent on
nobody when its TTR passes, or worse, handed to a client long after the job was leased
again. So a claim for a peer is only *offered* until the asker confirms it
(``confirm <id> <claim>``) before it hands the job to its client:

- confirmed: the lease is the asker's, as any lease;
- not confirmed in time (``confirm_window_ms``, always well within the TTR), or its TTR
  passes first (the owner was stopped itself): the owner gives the claim back with
  release-attempt, so no attempt is counted, and a later confirm is refused.

Both are decided here, by the owner alone, so exactly one of them happens. An owner
that loses the job's partition in a rebalance gives its offers there back at once (the
new owner never heard of them); one that dies or is stopped forgets them, and its
successor times the attempt out (docs/fencing.md, "A claim made for another process:
offered, then confirmed").

Pure bookkeeping: no clock, no I/O; the gateway arms the window's timer and the deadline
timer (streams/timers.py) asks at a TTR.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Container

from eventq.core import ReleaseAttempt

CONFIRM_WINDOW_MAX_MS = 5_000  # a healthy peer confirms in about a round trip (~1 ms)
CONFIRM_WINDOW_SHARE_OF_TTR = 0.5  # and never later than half the TTR


def confirm_window_ms(ttr_ms: int) -> int:
    """How long an offer waits for its confirm: short enough that the give-back is
    applied long before the TTR would time the attempt out."""
    return int(min(CONFIRM_WINDOW_MAX_MS, ttr_ms * CONFIRM_WINDOW_SHARE_OF_TTR))


class Offers:
    """Open offers by job: at most one per job (a job has one claim at a time)."""

    def __init__(self) -> None:
        self._open: dict[uuid.UUID, ReleaseAttempt] = {}

    def __len__(self) -> int:
        return len(self._open)

    def open(self, release: ReleaseAttempt) -> None:
        """The claim ``release`` gives back is offered to a peer."""
        self._open[release.job_id] = release

    def confirm(self, job_id: uuid.UUID, claim: int) -> bool:
        """The peer takes the claim: True if it was still offered (then it is its)."""
        return self._take(job_id, lambda release: release.claim == claim) is not None

    def withdraw(self, job_id: uuid.UUID, claim: int | None) -> ReleaseAttempt | None:
        """The claim is given back (or about to be): its release if it was offered."""
        return self._take(job_id, lambda release: release.claim == claim)

    def withdraw_attempt(self, job_id: uuid.UUID, attempt: int) -> ReleaseAttempt | None:
        """At the TTR of ``attempt``: its release if that attempt is still only offered
        (to be written instead of the time-out, so the attempt is not counted)."""
        return self._take(job_id, lambda release: release.attempt == attempt)

    def withdraw_partitions(
        self, partitions: Container[int], partition_of: Callable[[uuid.UUID], int]
    ) -> list[ReleaseAttempt]:
        """``partitions`` left this process: their offers' releases (the new owner
        never heard of them; given back now, they are applied before any TTR)."""
        lost = [job_id for job_id in self._open if partition_of(job_id) in partitions]
        return [self._open.pop(job_id) for job_id in lost]

    def _take(self, job_id: uuid.UUID,
              matches: Callable[[ReleaseAttempt], bool]) -> ReleaseAttempt | None:
        release = self._open.get(job_id)
        if release is None or not matches(release):
            return None
        del self._open[job_id]
        return release
