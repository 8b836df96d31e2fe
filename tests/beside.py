"""Work that runs beside the rest of the suite (tests/conftest.py): a test module marked
``beside`` defines ``start_beside(directory) -> Beside``, which starts its work in a
process of its own, and ``BESIDE_ORDER``; its tests move to the end of the run, where
each waits for the outcome it needs. The modules' works run one after another, from when
collection ends, in a thread of the test process (``Chain``): two of them at once
starved each other and the suite (the soak's event loop fell 2-5 s behind its timers,
CI 2026-11-27). A test run alone finds its own work alone in the chain."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from eventq import die_with_parent

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Beside:
    process: subprocess.Popen
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

    def __init__(self, starts: list[tuple[str, Callable[[], Beside]]]) -> None:
        self._starts = starts
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
            if isinstance(work, Beside):
                work.process.wait()

    def started(self, name: str) -> Beside:
        """``name``'s work once it has started (after the works before it ended)."""
        with self._changed:
            self._changed.wait_for(lambda: name in self._started)
            work = self._started[name]
        if isinstance(work, BaseException):
            raise AssertionError(f"the work beside the suite did not start: {work!r}")
        return work


CHAIN_KEY = pytest.StashKey[Chain]()


def started(request: pytest.FixtureRequest) -> Beside:
    """This test module's work, as tests/conftest.py's chain started it (the chain has
    every module with a ``beside`` test collected, whatever else runs)."""
    return request.config.stash[CHAIN_KEY].started(request.module.__name__)
