"""`eventq worker`'s command line (eventq/worker/cli.py): what it refuses, and the
worker it builds."""

from __future__ import annotations

import argparse

import pytest

from eventq.worker.cli import UsageError, build_worker, register
from eventq.worker.program import Program


def parse_worker_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["worker", *argv])


@pytest.mark.parametrize(("argv", "message"), [
    ((), "give --queue NAME and the program"),
    (("--queue", "q"), "give --queue NAME and the program"),
    (("--server", "nohost", "--queue", "q", "--", "true"), "--server must be HOST:PORT"),
    (("--app", "nocolon"), "must be MODULE:ATTRIBUTE"),
    (("--app", "no_such_module_here:w"), "cannot load"),
    (("--app", "eventq.worker:Worker", "--queue", "q"), "either --app or --queue"),
    (("--app", "eventq.limits:MAX_LINE_BYTES"), "is not a Worker but 'int'"),
    (("--app", "eventq.worker:Worker", "--inputs"),
     r"--inputs is for a program: .* inputs=True"),
])
def test_the_command_line_says_what_is_wrong(argv, message):
    with pytest.raises(UsageError, match=message):
        build_worker(parse_worker_args(*argv))


def test_the_command_line_builds_a_program_worker():
    worker = build_worker(parse_worker_args("--server", "10.0.0.1:7000", "--queue", "a",
                                            "--queue", "b", "--concurrency", "3",
                                            "--timeout-ms", "2500", "--", "cat", "-x"))
    assert (worker.host, worker.port, worker.concurrency) == ("10.0.0.1", 7000, 3)
    assert set(worker.handlers) == {"a", "b"}
    assert worker.handlers["a"].fn == Program(("cat", "-x"), 2.5)
    assert not worker.handlers["a"].inputs


def test_the_command_line_hands_a_program_its_inputs():
    worker = build_worker(parse_worker_args("--queue", "report", "--inputs", "--", "cat"))
    assert worker.handlers["report"].inputs
    assert worker.handlers["report"].fn == Program(("cat",), None, inputs=True)


def test_the_help_says_how_a_program_finds_its_inputs():
    commands = argparse.ArgumentParser().add_subparsers()
    register(commands)
    text = " ".join(commands.choices["worker"].format_help().split())
    assert "EVENTQ_INPUTS names a fresh directory" in text
    assert "NNN-<upstream-id>" in text and ".failed" in text and "--inputs" in text
