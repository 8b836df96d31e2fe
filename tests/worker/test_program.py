"""A program as a worker's handler (eventq/worker/program.py): the programs a worker
refuses, how a program's end decides the result, it reads the payload and sees the job,
it is killed at its limit, and its inputs are files in $EVENTQ_INPUTS for as long as it
runs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

import pytest

from eventq.client.models import Job, Result
from eventq.limits import MAX_AFTER_IDS, MAX_PAYLOAD_BYTES
from eventq.worker.job import InputsNotDeclared, WorkerJob
from eventq.worker.program import (
    Finished,
    JobFailed,
    Program,
    input_files,
    inputs_directory,
    program_problem,
    result_of,
)
from eventq.worker.runtime import failure_of

JOB = Job(uuid.uuid4(), "q", 2_000, b"payload")
A = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
B = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c4")


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


# --- inputs ------------------------------------------------------------------------


def test_inputs_are_files_named_by_position_and_upstream():
    assert input_files([Result(A, True, b"sales\n"), Result(B, False, b"no data")]) == [
        ("001-16fd2706-8baf-433b-82eb-8c7fada847da", b"sales\n"),
        ("002-6ba7b810-9dad-41d1-80b4-00c04fd430c4.failed", b"no data"),
    ]
    assert input_files([]) == []


def test_input_files_sort_in_after_order_up_to_the_most_upstreams():
    """What `ls` and a shell's `*` list is the -after order, even past 9 and 99."""
    ids = sorted((uuid.uuid4() for _ in range(MAX_AFTER_IDS)), reverse=True)
    names = [name for name, _ in input_files([Result(i, True, b"") for i in ids])]
    assert names == sorted(names)
    assert [name[:4] for name in names[8:10] + names[98:]] == ["009-", "010-", "099-", "100-"]
    assert [uuid.UUID(name[4:]) for name in names] == ids


def test_more_inputs_than_a_job_may_have_upstreams_are_refused():
    with pytest.raises(ValueError, match="101 inputs: a job has at most 100 upstreams"):
        input_files([Result(uuid.uuid4(), True, b"")] * (MAX_AFTER_IDS + 1))


def test_the_inputs_directory_holds_the_results_exactly_and_goes_whatever_happens():
    binary = bytes(range(256))
    with inputs_directory([Result(A, True, binary), Result(B, False, b"")]) as directory:
        assert sorted(os.listdir(directory)) == [
            f"001-{A}", f"002-{B}.failed"]
        with open(os.path.join(directory, f"001-{A}"), "rb") as file:
            assert file.read() == binary
        assert os.stat(directory).st_mode & 0o777 == 0o700  # results may be private
    assert not os.path.exists(directory)
    with pytest.raises(KeyError):
        with inputs_directory([]) as directory:
            assert os.listdir(directory) == []
            raise KeyError("the program failed")
    assert not os.path.exists(directory)


# The program reports what it saw: where its inputs were, their names and content.
SEES_INPUTS = (sys.executable, "-c", """
import json, os
where = os.environ.get('EVENTQ_INPUTS')
names = sorted(os.listdir(where)) if where else None
content = ''.join(open(os.path.join(where, n)).read() for n in names) if where else None
print(json.dumps({'where': where, 'names': names, 'content': content}))
""")


def test_a_program_with_inputs_reads_them_in_its_directory_which_then_goes():
    job = WorkerJob.of(JOB, (Result(A, True, b"one,"), Result(B, True, b"two")))
    seen = json.loads(run(Program(SEES_INPUTS, inputs=True), job))
    assert seen["names"] == [f"001-{A}", f"002-{B}"] and seen["content"] == "one,two"
    assert not os.path.exists(seen["where"])


def test_a_job_without_upstreams_gets_an_empty_inputs_directory():
    seen = json.loads(run(Program(SEES_INPUTS, inputs=True), WorkerJob.of(JOB, ())))
    assert seen["names"] == [] and not os.path.exists(seen["where"])


def test_a_program_without_inputs_gets_no_inputs_variable(monkeypatch):
    """Not even one the worker inherited (a worker run by a program that had inputs)."""
    monkeypatch.setenv("EVENTQ_INPUTS", "/somewhere/else")
    assert json.loads(run(Program(SEES_INPUTS), WorkerJob.of(JOB, None)))["where"] is None


def test_a_program_killed_at_its_limit_leaves_no_inputs_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where mkdtemp makes it
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    stuck = Program(("sh", "-c", 'test -d "$EVENTQ_INPUTS" && '
                     'test "$(dirname "$EVENTQ_INPUTS")" = "$TMPDIR" && exec sleep 30'), 0.5,
                    inputs=True)
    with pytest.raises(JobFailed, match="killed: still running"):
        run(stuck, WorkerJob.of(JOB, (Result(A, True, b"x"),)))
    assert list(tmp_path.iterdir()) == []


def test_a_program_with_inputs_whose_worker_did_not_fetch_them_says_what_to_declare():
    with pytest.raises(InputsNotDeclared, match="inputs=True"):
        run(Program(SEES_INPUTS, inputs=True), WorkerJob.of(JOB, None))
    with pytest.raises(InputsNotDeclared, match="inputs=True"):
        run(Program(SEES_INPUTS, inputs=True), JOB)  # a plain Job: none either


# --- eventq: failure groups (docs/workflows.md, "Failure groups and retry") ------


@pytest.mark.parametrize(("stderr", "tail", "group"), [
    (b"bad input\neventq-group: bad-input\n", b"bad input", "bad-input"),
    (b"eventq-group: deploy-7", b"", "deploy-7"),
    (b"x\neventq-group: a.B_c-9 \r\n", b"x", "a.B_c-9"),
    (b"eventq-group: not one!\n", b"eventq-group: not one!\n", None),  # not a group
    (b"eventq-group: g\nmore\n", b"eventq-group: g\nmore\n", None),  # not the last line
    (b"said eventq-group: g\n", b"said eventq-group: g\n", None),  # not a line of its own
    (b"plain\n", b"plain\n", None),
])
def test_a_failed_program_names_its_group_by_its_last_stderr_line(stderr, tail, group):
    with pytest.raises(JobFailed) as caught:
        result_of(Finished(3, b"", 0, stderr))
    assert caught.value.result == b"exit status 3: " + tail
    assert caught.value.group == group


def test_a_handler_fails_into_a_group_with_job_failed():
    failed = JobFailed("refused", group="bad-credentials")
    assert (failed.result, failed.group, failure_of(failed)) == (
        b"refused", "bad-credentials", b"refused")
    assert JobFailed(b"x").group is None
    with pytest.raises(Exception, match="Invalid Group"):
        JobFailed("x", group="no spaces")


def test_a_real_program_fails_into_its_group():
    failing = Program((sys.executable, "-c", "import sys; sys.stderr.write("
                       "'no such user\\neventq-group: unknown-user\\n'); sys.exit(4)"))
    with pytest.raises(JobFailed) as caught:
        run(failing)
    assert caught.value.group == "unknown-user"
    assert caught.value.result == b"exit status 4: no such user"
