"""How an eventq server writes its log: colours only on a terminal (docs/architecture.md,
"Feedback to users").

faust's worker logs through mode's colour formatter, which decides on colours by
whether *stdout* is a terminal (mode/utils/logging.py binds ``sys.stdout`` when it is
imported) while its handler writes to *stderr*: ``make run 2> file`` from a terminal
wrote ``\\e[0m`` into the file after every line. Here the formatter asks the stream the
handler writes to.
"""

from __future__ import annotations

import logging
from typing import IO

from eventq.console.terminal import is_terminal

# mode's own line layout, so that a log reads the same on a terminal and in a file.
LOG_FORMAT = "[%(asctime)s] [%(process)s] [%(levelname)s] %(message)s %(extra)s"
COLOR_LOG_FORMAT = "[%(asctime)s] [%(process)s] [%(levelname)s] %(log_color)s%(message)s %(extra)s"


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


RETRIED_PRODUCE_ERROR = "Got error produce response on topic-partition"


class RoutineRetries(logging.Filter):
    """aiokafka logs each retried produce error at WARNING (aiokafka/producer/sender.py).
    One of them is routine for eventq's changelog: a partition's next transaction sends
    its first records right after the last one's commit, while the broker may still be
    writing that commit's markers; the broker's check that the partition is in the new
    transaction then answers CONCURRENT_TRANSACTIONS, which Kafka turns into a retriable
    NOT_ENOUGH_REPLICAS for clients of aiokafka's protocol version (ReplicaManager: "the
    error is very common during the transaction commit phase"). The retry succeeds; one
    that keeps failing is reported by eventq itself (the changelog lost, at WARNING).
    Seen by the soak under load (bench/soak.py): such lines are INFO here
    (docs/architecture.md, "Logging")."""

    def __init__(self, changelog_topic: str) -> None:
        super().__init__()
        self._changelog_topic = changelog_topic

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and self._routine(record):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True

    def _routine(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (not str(record.msg).startswith(RETRIED_PRODUCE_ERROR)
                or not isinstance(args, tuple) or len(args) != 2):
            return False
        partition, error = args
        name = getattr(error, "__name__", type(error).__name__)
        return (getattr(partition, "topic", None) == self._changelog_topic
                and name == "NotEnoughReplicasError")


def demote_routine_retries(changelog_topic: str) -> None:
    logging.getLogger("aiokafka.producer.sender").addFilter(RoutineRetries(changelog_topic))
