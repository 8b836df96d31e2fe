"""What a worker has done so far, and the one-line status it shows on a terminal."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

RATE_WINDOW_S = 10.0  # the rate is over the jobs finished in the last 10 s


@dataclass
class Tally:
    done: int = 0
    failed: int = 0  # failed by the handler (the job may be retried by the server)
    lost: int = 0  # finished, but the lease was gone (timed out, deleted): not counted
    running: int = 0
    _finished_at: deque = field(default_factory=deque)  # monotonic times, last window

    def finished(self, outcome: str, at_s: float) -> None:
        if outcome == "completed":
            self.done += 1
        elif outcome == "failed":
            self.failed += 1
        else:
            self.lost += 1
        self._finished_at.append(at_s)

    def rate(self, now_s: float, started_s: float) -> float:
        """Jobs finished per second over the last ``RATE_WINDOW_S`` (or since start)."""
        while self._finished_at and self._finished_at[0] < now_s - RATE_WINDOW_S:
            self._finished_at.popleft()
        span = min(RATE_WINDOW_S, max(now_s - started_s, 1e-3))
        return len(self._finished_at) / span

    def line(self, now_s: float, started_s: float, stopping: bool = False) -> str:
        text = (f"{self.done} done, {self.failed} failed, {self.running} running, "
                f"{self.rate(now_s, started_s):.1f} jobs/s")
        if self.lost:
            text += f", {self.lost} lost"
        return text + (" (stopping: waiting for running jobs)" if stopping else "")
