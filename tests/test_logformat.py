"""An eventq server's log lines (eventq/logformat.py): plain text in a file (issue 27)."""

from __future__ import annotations

import io
import logging
import logging.config

from eventq.logformat import logging_config


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def lines_logged(stream) -> str:
    logging.config.dictConfig(logging_config(logging.INFO, stream))
    try:
        logging.getLogger("eventq.test").warning("a %s to look at", "thing")
        logging.getLogger("eventq.test").info("normal")
    finally:
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False,
                                   "root": {"level": logging.WARNING, "handlers": []}})
    return stream.getvalue()


def test_a_log_that_is_not_a_terminal_has_no_escape_codes() -> None:
    text = lines_logged(io.StringIO())
    assert "\x1b" not in text, repr(text)
    assert "[WARNING] a thing to look at" in text and "[INFO] normal" in text


def test_a_terminal_gets_colours() -> None:
    text = lines_logged(Terminal())
    assert "\x1b[" in text and "a thing to look at" in text
