"""Many deadlines on one timer: each falls ``delay_s`` after it was set, for a future
that may be answered long before.

The engine gives every command it submits a deadline (streams/engine.py), almost always
answered in milliseconds. An ``asyncio.timeout`` per submit armed and cancelled a timer
of the event loop each time (a handle, a heap push, and the loop's heap growing with
cancelled handles). All these deadlines have the same delay, so they fall due in the
order they were set: a deque holds them, and one ``loop.call_at`` stands for the earliest
one, armed again when it has fired. Deadlines whose future is answered are simply passed
over (dropped from the front as new ones come), so a second of submits costs about one
timer, not one each.

An entry is due exactly when an ``asyncio.timeout`` of the same delay set at the same
moment would expire: its timer is never armed later than its time, and due means
``when <= loop.time()`` within the clock's resolution, as the loop itself decides.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Callable

# asyncio runs a timer this early (its loop's ``_clock_resolution``): so does this one.
CLOCK_RESOLUTION_S = time.get_clock_info("monotonic").resolution


class Deadlines:
    __slots__ = ("delay_s", "_entries", "_timer", "_loop", "_firing")

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        # (when, future, on_due) in the order set, so in order of ``when``.
        self._entries: deque[tuple[float, asyncio.Future, Callable[[], None]]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._firing = False

    def add(self, future: asyncio.Future, on_due: Callable[[], None]) -> None:
        """Call ``on_due`` ``delay_s`` from now, unless ``future`` is done by then."""
        loop = future.get_loop()
        entries = self._entries
        while entries and entries[0][1].done():  # answered: nothing will be due
            entries.popleft()
        if self._loop is not loop:  # a loop that has ended: its timer never fires, and
            self._forget_timer()  # its futures are never answered
            entries.clear()
            self._loop = loop
        entries.append((loop.time() + self.delay_s, future, on_due))
        if self._timer is None and not self._firing:
            self._timer = loop.call_at(entries[0][0], self._fire)

    def _forget_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time() + CLOCK_RESOLUTION_S
        entries = self._entries
        # An ``on_due`` may set another deadline: it falls after every one due now, and
        # the timer is armed below, once, for whichever is first then.
        self._firing = True
        try:
            while entries:
                when, future, on_due = entries[0]
                if not future.done() and when > now:
                    break
                entries.popleft()
                if not future.done():
                    on_due()
        finally:
            self._firing = False
            if entries:
                self._timer = loop.call_at(entries[0][0], self._fire)
