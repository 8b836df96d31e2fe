"""A progress bar on stderr: one line updated in place, with counts and a rate.

On a terminal the line is redrawn in place (carriage return, clear to end of line) at
most every ``interval`` seconds, and ends with a newline when the phase is done. When
stderr is not a terminal (a log file, CI), the in-place redraws are left out and only a
line every ``plain_interval`` seconds and the final line of each phase are written, so
logs stay readable. ``enabled=False`` writes nothing.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

from eventq.console.terminal import is_terminal

BAR_WIDTH = 24


def human_rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def render(
    label: str,
    done: int,
    total: int | None,
    unit: str,
    elapsed: float,
    extra: str = "",
    fraction: float | None = None,
) -> str:
    """One progress line, e.g.
    ``reading   [##########--------------]  45%  450,000/1,000,000 records
    120,004 records/s  ETA 4s``. ``fraction`` (0..1) drives the bar when the count has
    no known total (e.g. bytes of a file read while records are counted).
    """
    rate = human_rate(done, elapsed)
    if fraction is None and total:
        fraction = done / total
    parts = [f"{label:<10}"]
    if fraction is not None:
        fraction = min(max(fraction, 0.0), 1.0)
        filled = int(fraction * BAR_WIDTH)
        parts.append("[" + "#" * filled + "-" * (BAR_WIDTH - filled) + "]")
        parts.append(f"{fraction * 100:3.0f}%")
    parts.append(f"{done:,}/{total:,} {unit}" if total else f"{done:,} {unit}")
    parts.append(f"{rate:,.0f} {unit}/s")
    if fraction is not None and 0 < fraction < 1:
        parts.append(f"ETA {format_duration(elapsed * (1 - fraction) / fraction)}")
    else:
        parts.append(f"{elapsed:.1f}s")
    if extra:
        parts.append(extra)
    return "  ".join(parts)


class Progress:
    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        enabled: bool = True,
        interval: float = 0.1,
        plain_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self.enabled = enabled
        self.interval = interval
        self.plain_interval = plain_interval
        self._clock = clock
        self._label = ""
        self._total: int | None = None
        self._unit = ""
        self._began = 0.0
        self._last = 0.0
        self._drawn = False

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    @property
    def tty(self) -> bool:
        return is_terminal(self.stream)

    def start(self, label: str, total: int | None = None, unit: str = "records") -> None:
        self._label, self._total, self._unit = label, total, unit
        self._began = self._last = self._clock()
        self._drawn = False

    def elapsed(self) -> float:
        return self._clock() - self._began

    def update(
        self, done: int, extra: str = "", total: int | None = None, fraction: float | None = None
    ) -> None:
        """Redraw if enough time has passed since the last redraw."""
        if not self.enabled:
            return
        if total is not None:
            self._total = total
        now = self._clock()
        wait = self.interval if self.tty else self.plain_interval
        if now - self._last < wait:
            return
        self._last = now
        self._write(
            render(self._label, done, self._total, self._unit, now - self._began, extra, fraction)
        )

    def finish(
        self, done: int, extra: str = "", total: int | None = None, fraction: float | None = None
    ) -> float:
        """The final line of the phase; returns the phase's duration in seconds."""
        if total is not None:
            self._total = total
        elapsed = self.elapsed()
        if self.enabled:
            self._write(
                render(self._label, done, self._total, self._unit, elapsed, extra, fraction)
            )
            if self._drawn:  # end the in-place line
                self.stream.write("\n")
                self.stream.flush()
                self._drawn = False
        return elapsed

    def message(self, text: str) -> None:
        """A line of its own (e.g. a corrupt record), without breaking the bar."""
        stream = self.stream
        if self._drawn and self.tty:
            stream.write("\r\x1b[K")
            self._drawn = False
        stream.write(text + "\n")
        stream.flush()

    def _write(self, line: str) -> None:
        stream = self.stream
        if self.tty:
            stream.write("\r" + line + "\x1b[K")
            self._drawn = True
        else:
            stream.write(line + "\n")
        stream.flush()


class Reporter:
    """A ``(done, total)`` callback (eventq.kafka.logreader) drawing on a Progress, and
    ``finish`` for the phase's last line."""

    def __init__(self, progress: Progress, label: str, unit: str = "records") -> None:
        self._progress = progress
        self._done = 0
        progress.start(label, unit=unit)

    def __call__(self, done: int, total: int) -> None:
        self._done = done
        self._progress.update(done, total=total)

    def finish(self, extra: str = "") -> float:
        """The phase's final line; its duration in seconds."""
        return self._progress.finish(self._done, extra)

