"""An eventq server's log lines (eventq/run/logformat.py): plain text in a file
(docs/architecture.md, "Feedback to users")."""

from __future__ import annotations

import io
import logging
import logging.config

from eventq.run.logformat import logging_config


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


def test_a_retried_changelog_write_refused_during_a_commit_is_info_not_warning() -> None:
    """Kafka answers a transaction's first records with NOT_ENOUGH_REPLICAS while the
    previous commit's markers are written; aiokafka retries, and logged it at WARNING
    (the soak saw two under load). Other topics and errors stay WARNING."""
    from aiokafka.errors import NotEnoughReplicasError, RequestTimedOutError
    from aiokafka.structs import TopicPartition

    from eventq.run.logformat import RoutineRetries

    sender = logging.getLogger("aiokafka.producer.sender.test")
    routine = RoutineRetries("eventq.jobs")
    sender.addFilter(routine)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    sender.addHandler(handler)
    try:
        message = "Got error produce response on topic-partition %s, retrying. Error: %s"
        sender.warning(message, TopicPartition("eventq.jobs", 0), NotEnoughReplicasError)
        sender.warning(message, TopicPartition("eventq.commands", 0), NotEnoughReplicasError)
        sender.warning(message, TopicPartition("eventq.jobs", 1), RequestTimedOutError)
    finally:
        sender.removeFilter(routine)
        sender.removeHandler(handler)
    levels = [line.split(" ", 1)[0] for line in stream.getvalue().splitlines()]
    assert levels == ["INFO", "WARNING", "WARNING"]
