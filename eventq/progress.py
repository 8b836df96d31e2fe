"""A one-line progress bar on stderr for long operations (replay, import, export)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 30


class Progress:
    def __init__(self, label: str, stream: TextIO | None = None, unit: str = "records") -> None:
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.began = time.monotonic()
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_line = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self._tty and now - self._last_line < 5.0 and done < total:
            return  # in logs, a line every few seconds is enough
        self._last_line = now
        rate = done / max(now - self.began, 1e-6)
        if total:
            filled = int(BAR_WIDTH * min(done, total) / total)
            bar = "#" * filled + "-" * (BAR_WIDTH - filled)
            text = f"{self.label} [{bar}] {done:,}/{total:,} {self.unit} {rate:,.0f}/s"
        else:
            text = f"{self.label} {done:,} {self.unit} {rate:,.0f}/s"
        self.stream.write(("\r" + text) if self._tty else text + "\n")
        self.stream.flush()

    def finish(self, summary: str = "") -> float:
        elapsed = time.monotonic() - self.began
        if self._tty:
            self.stream.write("\n")
        if summary:
            self.stream.write(f"{summary} in {elapsed:.1f}s\n")
        self.stream.flush()
        return elapsed
