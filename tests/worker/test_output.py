"""Where a Python worker's lines go (eventq/worker/output.py; docs/architecture.md,
"Feedback to users"): to the screen in a program without logging, to the program's own
logging where it has some."""

from __future__ import annotations

import io
import logging

from eventq.worker.output import default_output


def no_logging_configured(monkeypatch) -> None:
    """As in a plain script: no handler anywhere (pytest's own, added as each test's
    call begins, are set aside)."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    for name in ("eventq", "eventq.worker", "eventq.client"):
        monkeypatch.setattr(logging.getLogger(name), "handlers", [])
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)


def test_a_worker_in_a_program_without_logging_shows_its_lines(monkeypatch):
    no_logging_configured(monkeypatch)
    stream = io.StringIO()
    with default_output(stream) as ours:
        assert ours
        logging.getLogger("eventq.worker").info("job 1 outcome=completed")
        logging.getLogger("eventq.client").warning("cannot connect")
        logging.getLogger("eventq.other").info("not a worker's news")
    logging.getLogger("eventq.worker").info("after run(): not ours to show")
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 3)[2:] for line in lines] == [
        ["INFO", "job 1 outcome=completed"], ["WARNING", "cannot connect"]]
    assert "\x1b" not in stream.getvalue()  # not a terminal
    assert logging.getLogger("eventq.worker").level == logging.NOTSET
    assert not logging.getLogger("eventq").handlers


def test_a_worker_leaves_a_programs_own_logging_alone(monkeypatch):
    no_logging_configured(monkeypatch)
    mine = io.StringIO()
    logging.getLogger().addHandler(logging.StreamHandler(mine))
    stream = io.StringIO()
    with default_output(stream) as ours:
        assert not ours
        logging.getLogger("eventq.worker").warning("to the program's handler")
    assert stream.getvalue() == "" and "to the program's handler" in mine.getvalue()
