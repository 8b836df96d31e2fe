"""Whether output goes to a person: a terminal gets redrawn lines and colours, a file
or a pipe plain lines (docs/architecture.md, "Feedback to users"). One check for the
log, the progress bar and the worker's status line."""

from __future__ import annotations

from typing import IO


def is_terminal(stream: IO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
