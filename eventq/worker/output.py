"""What a worker shows: a log line per job and, on a terminal, a status line redrawn in
place (plain lines, no escape codes, when stderr is a file or a pipe).

``eventq worker`` sets this up for its process; ``Worker.run()`` sets it up too when the
program has configured no logging (the README's worker used to print nothing until
Ctrl-C), and takes it down again when it returns.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Iterator, TextIO

from eventq.console.terminal import is_terminal

LINE_FORMAT = "%(asctime)s %(levelname)s %(message)s"
# Loggers whose INFO lines a worker shows: a line per job, and the client's
# "connected again" after it could not connect.
SHOWN_AT_INFO = ("eventq.worker", "eventq.client")
CLEAR_LINE = "\r\x1b[K"  # back to the line's start and erase it (a terminal's status line)


def terminal_or_none(stream: TextIO = sys.stderr) -> TextIO | None:
    """``stream`` when it is a terminal (the status line is for people, not log files)."""
    return stream if is_terminal(stream) else None


class StatusAwareHandler(logging.StreamHandler):
    """Log lines on a terminal first clear the status line they would run into."""

    def emit(self, record: logging.LogRecord) -> None:
        if terminal_or_none(self.stream) is not None:
            self.stream.write(CLEAR_LINE)
        super().emit(record)


def line_handler(stream: TextIO) -> logging.Handler:
    handler = StatusAwareHandler(stream)
    handler.setFormatter(logging.Formatter(LINE_FORMAT))
    return handler


def configure_command_line(stream: TextIO, quiet: bool) -> None:
    """``eventq worker``: the process is the worker's, so its root logger is too."""
    logging.basicConfig(level=logging.WARNING, handlers=[line_handler(stream)])
    for name in SHOWN_AT_INFO:
        logging.getLogger(name).setLevel(logging.WARNING if quiet else logging.INFO)


def logging_configured() -> bool:
    """Whether the program decided where eventq's log lines go (a handler on eventq's
    loggers or the root logger). Without one, Python prints only warnings, bare."""
    return logging.getLogger("eventq.worker").hasHandlers()


@contextmanager
def default_output(stream: TextIO = sys.stderr) -> Iterator[bool]:
    """While a ``Worker.run()`` runs in a program that configured no logging: its lines
    go to ``stream`` as ``eventq worker``'s do. Yields whether it set them up (then the
    status line is the worker's to draw too). The program's own configuration, if any,
    is left alone."""
    if logging_configured():
        yield False
        return
    handler = line_handler(stream)
    parent = logging.getLogger("eventq")
    levels = {name: logging.getLogger(name).level for name in SHOWN_AT_INFO}
    parent.addHandler(handler)
    for name, level in levels.items():
        if level == logging.NOTSET:
            logging.getLogger(name).setLevel(logging.INFO)
    try:
        yield True
    finally:
        parent.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
