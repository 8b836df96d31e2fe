"""A program as a worker's handler (eventq/worker/program.py): the programs a worker
refuses, how a program's end decides the result, it reads the payload and sees the job,
and it is killed at its limit."""

from __future__ import annotations

import asyncio
import sys
import uuid

import pytest

from eventq.client.models import Job
from eventq.limits import MAX_PAYLOAD_BYTES
from eventq.worker.program import Finished, JobFailed, Program, program_problem, result_of
from eventq.worker.runtime import failure_of

JOB = Job(uuid.uuid4(), "q", 2_000, b"payload")


@pytest.mark.parametrize(("finished", "outcome"), [
    (Finished(0, b"out", 3, b""), b"out"),
    (Finished(2, b"", 0, b"bad input\n"), JobFailed(b"exit status 2: bad input\n")),
    (Finished(-9, b"", 0, b""), JobFailed(b"killed by signal 9: ")),
    (Finished(None, b"", 0, b"stuck", 1.5),
     JobFailed("killed: still running after its time limit of 1.5s; stderr: stuck")),
    (Finished(0, b"x" * 10, MAX_PAYLOAD_BYTES + 1, b""), JobFailed(
        f"its output was {MAX_PAYLOAD_BYTES + 1:,} bytes, over the result limit of "
        f"{MAX_PAYLOAD_BYTES:,} bytes: write large output elsewhere and print where")),
])
def test_how_a_program_ended_decides_the_result(finished, outcome):
    if isinstance(outcome, JobFailed):
        with pytest.raises(JobFailed) as caught:
            result_of(finished)
        assert caught.value.result == outcome.result
    else:
        assert result_of(finished) == outcome


def run(program: Program, job: Job = JOB):
    return asyncio.run(program(job))


def test_a_program_reads_the_payload_and_sees_the_job():
    echo = Program((sys.executable, "-c", "import os, sys; print(sys.stdin.read(), "
                    "os.environ['EVENTQ_QUEUE'], os.environ['EVENTQ_JOB_ID'])"))
    assert run(echo) == f"payload q {JOB.id}\n".encode()


def test_a_program_is_killed_at_its_limit_with_its_children():
    stuck = Program(("sh", "-c", "sleep 30 & sleep 30"), limit_s=0.3)
    with pytest.raises(JobFailed, match="killed: still running after its time limit of 0.3s"):
        run(stuck)


def test_a_program_that_ignores_its_stdin_and_floods_stdout():
    flood = Program((sys.executable, "-c",
                     f"import sys; sys.stdout.write('x' * {MAX_PAYLOAD_BYTES * 3})"))
    big = Job(uuid.uuid4(), "q", 5_000, b"y" * MAX_PAYLOAD_BYTES)
    with pytest.raises(JobFailed, match="3,145,728 bytes, over the result limit"):
        run(flood, big)


def test_a_program_that_cannot_start_fails_its_job_in_one_line(tmp_path):
    """Gone (or no longer executable) after the worker started, it used to be a 20-line
    Python traceback as every job's result."""
    with pytest.raises(JobFailed) as caught:
        run(Program((str(tmp_path / "gone"), "-x")))
    assert caught.value.result == (
        f"cannot start {tmp_path / 'gone'}: No such file or directory".encode())
    assert failure_of(caught.value) == caught.value.result


def test_programs_a_worker_refuses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain").write_text("echo\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    assert "no program at ./nope" in program_problem("./nope")
    assert "not executable: chmod +x ./plain" in program_problem("./plain")
    assert "is a directory" in program_problem(str(tmp_path))
    assert "on PATH" in program_problem("no-such-program-27")
    assert program_problem("./run.sh") is None
    assert program_problem("cat") is None
