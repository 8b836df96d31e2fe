"""How an eventq server writes its log: colours only on a terminal (issue 27).

faust's worker logs through mode's colour formatter, which decides on colours by
whether *stdout* is a terminal (mode/utils/logging.py binds ``sys.stdout`` when it is
imported) while its handler writes to *stderr*: ``make run 2> file`` from a terminal
wrote ``\\e[0m`` into the file after every line. Here the formatter asks the stream the
handler writes to.
"""

from __future__ import annotations

from typing import IO

# mode's own line layout, so that a log reads the same on a terminal and in a file.
LOG_FORMAT = "[%(asctime)s] [%(process)s] [%(levelname)s] %(message)s %(extra)s"
COLOR_LOG_FORMAT = "[%(asctime)s] [%(process)s] [%(levelname)s] %(log_color)s%(message)s %(extra)s"


def is_terminal(stream: IO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def logging_config(level: int, stream: IO, root_level: int | None = None) -> dict:
    """A ``logging.config.dictConfig`` for faust's worker (its ``logging_config``):
    one handler on ``stream`` passing ``level`` and up, coloured only if ``stream`` is a
    terminal; the root logger starts at ``root_level`` (default ``level``)."""
    if is_terminal(stream):
        from mode.utils.logging import DEFAULT_COLORS

        formatter = {"()": "mode.utils.logging.ExtensionFormatter", "format": COLOR_LOG_FORMAT,
                     "log_colors": DEFAULT_COLORS, "stream": stream}
    else:
        formatter = {"()": "mode.utils.logging.DefaultFormatter", "format": LOG_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"eventq": formatter},
        "handlers": {"eventq": {"class": "logging.StreamHandler", "stream": stream,
                                "formatter": "eventq", "level": level}},
        "root": {"level": level if root_level is None else root_level,
                 "handlers": ["eventq"]},
    }
