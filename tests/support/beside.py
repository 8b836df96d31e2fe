"""Work that runs beside the rest of the suite (tests/conftest.py): a test module marked
``beside`` defines ``start_beside(directory) -> Beside``, which starts its work in a
process of its own, and ``BESIDE_ORDER``; its tests move to the end of the run, where
each waits for the outcome it needs. The modules' works run one after another, from when
collection ends, in a thread of the test process (``Chain``): two of them at once
starved each other and the suite (the soak's event loop fell 2-5 s behind its timers,
CI 2026-11-27). A test run alone finds its own work alone in the chain.

Under pytest-xdist (``make test`` runs two workers) the chain runs in the controller,
which lives until every worker is done, and posts what it started and how it ended on a
*board*, a directory every worker is told of (``BOARD_INPUT``); a worker's test reads
its work from there (``Watched`` stands for a process another pytest started)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from eventq.run import die_with_parent

REPO = Path(__file__).resolve().parents[2]


BOARD_INPUT = "eventq_beside_board"  # key of xdist's workerinput: the board's path
POLL_S = 0.5


class Watched:
    """A process another pytest process started (xdist's controller), as far as a test
    needs it: whether and how it ended, as the board says, and a way to kill it."""

    def __init__(self, pid: int, ended: Path) -> None:
        self.pid = pid
        self._ended = ended

    def poll(self) -> int | None:
        return int(self._ended.read_text()) if self._ended.exists() else None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (status := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(POLL_S)
        return status

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class Beside:
    process: subprocess.Popen | Watched
    directory: Path
    output: Path
    began: float

    def wait(self, timeout_s: float) -> int:
        """The process's exit status, or an AssertionError with its output's tail."""
        try:
            return self.process.wait(timeout=max(timeout_s, 60))
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("the work beside the suite did not end:\n"
                                 + self.output_tail()) from None

    def wait_a_little(self, seconds: float = 1.0) -> None:
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def output_tail(self, chars: int = 4000) -> str:
        return self.output.read_text(errors="replace")[-chars:]


def start(directory: Path, command: list[str], env: dict[str, str] | None = None) -> Beside:
    """``command`` (Python's arguments) in a process that ends with the suite however it
    ends, with ``env`` added to the environment, its output in ``directory``/beside.out."""
    directory.mkdir(parents=True, exist_ok=True)
    output = directory / "beside.out"
    env = {**os.environ, **(env or {})}
    # this checkout and tests/ (the tests' helpers) first
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), str(REPO / "tests"), *filter(None, [env.get("PYTHONPATH")])])
    with open(output, "w") as out:
        process = subprocess.Popen(
            die_with_parent.command(os.getpid(), [sys.executable, *command]),
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=env)
    return Beside(process, directory, output, time.monotonic())


class Chain:
    """Works started one after another, each once the one before it has ended."""

    def __init__(self, starts: list[tuple[str, Callable[[], Beside]]],
                 board: Path | None = None) -> None:
        self._starts = starts
        self._board = board
        self._started: dict[str, Beside | BaseException] = {}
        self._changed = threading.Condition()
        threading.Thread(target=self._run, name="beside", daemon=True).start()

    def _run(self) -> None:
        for name, start in self._starts:
            try:
                work: Beside | BaseException = start()
            except BaseException as error:  # told to its tests, and the next one starts
                work = error
            with self._changed:
                self._started[name] = work
                self._changed.notify_all()
            if self._board is not None:
                _post_start(self._board, name, work)
            if isinstance(work, Beside):
                status = work.process.wait()
                if self._board is not None:
                    _post(self._board / f"{name}.ended", str(status))

    def started(self, name: str) -> Beside:
        """``name``'s work once it has started (after the works before it ended)."""
        with self._changed:
            self._changed.wait_for(lambda: name in self._started)
            work = self._started[name]
        if isinstance(work, BaseException):
            raise AssertionError(f"the work beside the suite did not start: {work!r}")
        return work


def _post(path: Path, text: str) -> None:
    """``text`` in ``path``, whole or not at all for a reader polling for it."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


def _post_start(board: Path, name: str, work: Beside | BaseException) -> None:
    if isinstance(work, BaseException):
        _post(board / f"{name}.failed", repr(work))
        return
    _post(board / f"{name}.started", json.dumps({
        "pid": work.process.pid, "directory": str(work.directory),
        "output": str(work.output), "began": work.began}))


def posted(board: Path, name: str) -> Beside:
    """``name``'s work as the chain posted it on ``board``, once it has started."""
    while True:
        if (board / f"{name}.failed").exists():
            raise AssertionError("the work beside the suite did not start: "
                                 + (board / f"{name}.failed").read_text())
        if (board / f"{name}.started").exists():
            start = json.loads((board / f"{name}.started").read_text())
            return Beside(Watched(start["pid"], board / f"{name}.ended"),
                          Path(start["directory"]), Path(start["output"]), start["began"])
        time.sleep(POLL_S)


CHAIN_KEY = pytest.StashKey[Chain]()


def board_of(config: pytest.Config) -> Path | None:
    """The board of the chain this xdist worker's tests read, or None outside xdist."""
    path = getattr(config, "workerinput", {}).get(BOARD_INPUT)
    return Path(path) if path else None


def started(request: pytest.FixtureRequest) -> Beside:
    """This test module's work, as tests/conftest.py's chain started it (the chain has
    every module with a ``beside`` test collected, whatever else runs)."""
    board = board_of(request.config)
    if board is not None:
        return posted(board, request.module.__name__)
    return request.config.stash[CHAIN_KEY].started(request.module.__name__)
