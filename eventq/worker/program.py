"""An external program as a handler (the enq model: workers in any language).

The job's payload goes to the program's stdin; exit status 0 completes the job with
its stdout as the result; any other status fails it with the tail of its stderr, in the
failure group named by a last stderr line ``eventq-group: <group>`` if it writes one
(eventq: docs/workflows.md, "Failure groups and retry"; the line is left out of the
result). A
program still running at its time limit is killed (its whole process group) and the job
fails saying so. Output is read as it comes and never held beyond the result limit.

Its environment is the worker's plus ``EVENTQ_JOB_ID``, ``EVENTQ_QUEUE`` and
``EVENTQ_TTR_MS``. A program declared with inputs (``add_program(..., inputs=True)``,
``eventq worker --inputs``) also gets ``EVENTQ_INPUTS``: the path of a fresh directory
(mode 0700) with one file per input of the job (docs/workflows.md, "Inputs"), named
``NNN-<upstream-id>`` (NNN its 1-based position in -after order in 3 digits, so ``ls``
and ``*`` list them in that order; the id lowercase with hyphens), holding the
upstream's result byte for byte; the name ends in ``.failed`` for an upstream that
failed. A job without upstreams gets an
empty directory. It is removed when the program ends, however it ends. Files are a
form every language reads, results may be binary, and a program reads only what it
needs::

    cat "$EVENTQ_INPUTS"/*        # the upstreams' results, concatenated in -after order
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from eventq.client.models import Job, Result
from eventq.limits import MAX_AFTER_IDS, MAX_PAYLOAD_BYTES
from eventq.protocol.values import parse_group
from eventq.worker.job import WorkerJob

log = logging.getLogger("eventq.worker")

STDERR_TAIL_BYTES = 2_000  # of a failed program's stderr, kept as the job's result
READ_BYTES = 64 * 1024
INPUTS_VARIABLE = "EVENTQ_INPUTS"
INPUTS_DIR_PREFIX = "eventq-inputs-"
# An inputs file's position, zero-padded so that names sort in -after order: a job has
# at most MAX_AFTER_IDS upstreams (docs/workflows.md, "Values and checks").
INPUT_POSITION_DIGITS = len(str(MAX_AFTER_IDS))
FAILED_INPUT_SUFFIX = ".failed"


class JobFailed(Exception):
    """The handler's way to fail a job with exactly ``result`` as the failure result;
    eventq: ``group``, the failure group it is in if this fail is final
    (docs/workflows.md, "Failure groups and retry": ``retry-group`` retries a group
    at once; None: ``failed``)::

        raise JobFailed("the upstream API refused the key", group="bad-credentials")
    """

    def __init__(self, result: bytes | str, group: str | None = None) -> None:
        self.result = result.encode() if isinstance(result, str) else result
        self.group = None if group is None else parse_group(group)
        super().__init__(self.result[:200].decode("utf-8", errors="replace"))


@dataclass(frozen=True)
class Finished:
    """How a program ended: its exit status (None: killed at the time limit), its
    stdout (at most the result limit; ``stdout_bytes`` counts all of it) and the tail
    of its stderr."""

    returncode: int | None
    stdout: bytes
    stdout_bytes: int
    stderr_tail: bytes
    limit_s: float | None = None


def result_of(finished: Finished, max_result_bytes: int = MAX_PAYLOAD_BYTES) -> bytes:
    """The job's result for a program that ended so, or ``JobFailed`` (pure)."""
    if finished.returncode is None:
        raise JobFailed(
            f"killed: still running after its time limit of {finished.limit_s:g}s"
            + _tail_note(finished.stderr_tail)
        )
    if finished.returncode != 0:
        status = (f"killed by signal {-finished.returncode}" if finished.returncode < 0
                  else f"exit status {finished.returncode}")
        tail, group = group_line(finished.stderr_tail)
        raise JobFailed(status.encode() + b": " + tail, group)
    if finished.stdout_bytes > max_result_bytes:
        raise JobFailed(
            f"its output was {finished.stdout_bytes:,} bytes, over the result limit of "
            f"{max_result_bytes:,} bytes: write large output elsewhere and print where"
        )
    return finished.stdout


# A failed program names its failure group by the last line of its stderr
# (docs/workflows.md, "Failure groups and retry"): ``eventq-group: <group>``. A line, not
# an exit status: any language writes one, a status has no room for a name, and a
# program's own statuses keep their meaning. The line is not part of the result.
GROUP_LINE = re.compile(rb"(?:\A|\n)eventq-group: ([A-Za-z0-9_.\-]{1,255})[ \t\r]*\n?\Z")


def group_line(stderr_tail: bytes) -> tuple[bytes, str | None]:
    """(the stderr tail without its group line, the group it names or None)."""
    match = GROUP_LINE.search(stderr_tail)
    if match is None:
        return stderr_tail, None
    return stderr_tail[: match.start()], match.group(1).decode("ascii")


def program_problem(program: str) -> str | None:
    """Why ``program`` cannot be run (missing, a directory, not executable), or None.
    Checked when a worker starts, so a typo is one clear error instead of every job
    failing (docs/architecture.md, "Feedback to users"). A name without a slash is looked
    up on PATH, as exec does."""
    if "/" not in program:
        if shutil.which(program) is None:
            return (f"no program {program!r} on PATH: give the program's path (e.g. "
                    f"./{program}) or install it")
        return None
    path = Path(program)
    if not path.exists():
        return f"no program at {program}: is the path right (relative to {Path.cwd()})?"
    if path.is_dir():
        return f"{program} is a directory, not a program"
    if not os.access(path, os.X_OK):
        return f"{program} is not executable: chmod +x {program}"
    return None


def input_files(inputs: Sequence[Result]) -> list[tuple[str, bytes]]:
    """(file name, content) for each input, in order: ``NNN-<upstream-id>`` with NNN
    its 1-based position in 3 digits, ``.failed`` appended for a failed upstream, the
    content its result exactly (pure)."""
    if len(inputs) > MAX_AFTER_IDS:
        raise ValueError(f"{len(inputs)} inputs: a job has at most {MAX_AFTER_IDS} "
                         f"upstreams (-after)")
    return [(f"{position:0{INPUT_POSITION_DIGITS}d}-{entry.id}"
             f"{'' if entry.ok else FAILED_INPUT_SUFFIX}", entry.data)
            for position, entry in enumerate(inputs, start=1)]


@contextlib.contextmanager
def inputs_directory(inputs: Sequence[Result]) -> Iterator[str]:
    """A fresh private directory holding ``input_files(inputs)``, removed on leaving,
    however that happens. Written in the event loop: at most 100 results of 1 MiB, the
    size of the reply they were just read from."""
    directory = tempfile.mkdtemp(prefix=INPUTS_DIR_PREFIX)
    try:
        for name, content in input_files(inputs):
            Path(directory, name).write_bytes(content)
        yield directory
    finally:
        try:
            shutil.rmtree(directory)
        except OSError as error:  # the program made part of it unremovable
            log.warning("could not remove the inputs directory %s: %s", directory, error)


def _tail_note(tail: bytes) -> str:
    return "; stderr: " + tail.decode("utf-8", errors="replace") if tail else ""


async def _read_capped(stream: asyncio.StreamReader, keep_bytes: int) -> tuple[bytes, int]:
    """The first ``keep_bytes`` of a stream and its total length (the rest is read and
    dropped, so the program never blocks on a full pipe)."""
    kept = bytearray()
    total = 0
    while chunk := await stream.read(READ_BYTES):
        total += len(chunk)
        if len(kept) < keep_bytes:
            kept += chunk[: keep_bytes - len(kept)]
    return bytes(kept), total


async def _read_tail(stream: asyncio.StreamReader, tail_bytes: int) -> bytes:
    tail = b""
    while chunk := await stream.read(READ_BYTES):
        tail = (tail + chunk)[-tail_bytes:]
    return tail


async def _feed(stdin: asyncio.StreamWriter, payload: bytes) -> None:
    try:
        stdin.write(payload)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # a program need not read its stdin
    finally:
        stdin.close()


def job_environment(job: Job) -> dict[str, str]:
    """The worker's environment and the job's, without an ``EVENTQ_INPUTS`` the worker
    itself inherited (a program gets one only when it asked for its inputs)."""
    env = dict(os.environ, EVENTQ_JOB_ID=str(job.id), EVENTQ_QUEUE=job.name,
               EVENTQ_TTR_MS=str(job.ttr_ms))
    env.pop(INPUTS_VARIABLE, None)
    return env


@dataclass(frozen=True)
class Program:
    """Run ``argv`` for each job (``eventq worker --queue q -- argv...``). ``limit_s``:
    kill it after this long (None: the job's TTR). ``inputs``: hand it the job's inputs
    in ``$EVENTQ_INPUTS`` (its handler must fetch them: ``add_program(..., inputs=True)``
    does both)."""

    argv: tuple[str, ...]
    limit_s: float | None = None
    inputs: bool = False

    async def __call__(self, job: Job) -> bytes:
        limit_s = self.limit_s if self.limit_s is not None else job.ttr_ms / 1000
        return result_of(await self.run(job, limit_s))

    async def run(self, job: Job, limit_s: float) -> Finished:
        env = job_environment(job)
        if not self.inputs:
            return await self._run(job.payload, env, limit_s)
        handed = job if isinstance(job, WorkerJob) else WorkerJob.of(job, None)
        # handed.inputs raises InputsNotDeclared, saying what to do, if none were fetched.
        with inputs_directory(handed.inputs) as directory:
            return await self._run(job.payload, {**env, INPUTS_VARIABLE: directory}, limit_s)

    async def _run(self, payload: bytes, env: dict[str, str], limit_s: float) -> Finished:
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
            )
        except OSError as error:  # gone or no longer executable: a line, not a traceback
            raise JobFailed(f"cannot start {self.argv[0]}: {error.strerror or error}") from None
        assert process.stdin and process.stdout and process.stderr  # all three PIPE
        feeding = asyncio.ensure_future(_feed(process.stdin, payload))
        stdout = asyncio.ensure_future(_read_capped(process.stdout, MAX_PAYLOAD_BYTES + 1))
        stderr = asyncio.ensure_future(_read_tail(process.stderr, STDERR_TAIL_BYTES))
        returncode: int | None
        try:
            async with asyncio.timeout(limit_s):
                returncode = await process.wait()
        except TimeoutError:
            returncode = None
        except BaseException:  # the worker is stopping: the program goes with it
            _kill_group(process)
            raise
        finally:
            # Whatever the program started goes too: a job's processes never outlive it
            # (and none holds the output pipes open after it exited).
            _kill_group(process)
            if process.returncode is None:
                await process.wait()
        await feeding
        (out, out_bytes), err = await asyncio.gather(stdout, stderr)
        return Finished(returncode, out, out_bytes, err, limit_s)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the program and anything it started (it leads its own session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
