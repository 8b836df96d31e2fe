"""Work that runs beside the rest of the suite (tests/conftest.py): a test module marked
``beside`` defines ``start_beside(directory) -> Beside``, which starts its work in a
process of its own when collection ends; its tests move to the end of the run, where each
waits for the outcome it needs. Run alone, a test starts that work itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


BESIDE_KEY = pytest.StashKey[dict]()  # module name -> its Beside


def started(request: pytest.FixtureRequest, directory: Path) -> Beside:
    """What tests/conftest.py started for this test's module, or a start of it now (the
    test runs alone)."""
    module = request.module
    by_module = request.config.stash.get(BESIDE_KEY, {})
    if module.__name__ in by_module:
        return by_module[module.__name__]
    beside = module.start_beside(directory)
    request.config.stash.setdefault(BESIDE_KEY, {})[module.__name__] = beside
    return beside
