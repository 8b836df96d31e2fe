"""Running an eventq command as a user does and watching what it prints, when
(docs/architecture.md, "Feedback to users": within seconds). Importable because pytest
puts tests/ on sys.path."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

EVENTQ = [sys.executable, "-m", "eventq.cli"]


@dataclass
class Watched:
    """A process whose output (stdout and stderr, as text) is read as it comes, each
    line with the seconds since the start at which it arrived."""

    process: subprocess.Popen
    started: float
    lines: list[tuple[float, str]] = field(default_factory=list)

    @classmethod
    def start(cls, argv: list[str], **kwargs) -> "Watched":
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, text=True, **kwargs)
        watched = cls(process, time.monotonic())
        threading.Thread(target=watched._read, daemon=True).start()
        return watched

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append((time.monotonic() - self.started, line))

    @property
    def output(self) -> str:
        return "".join(line for _, line in list(self.lines))

    def wait_for(self, pattern: str, timeout_s: float) -> float:
        """Seconds from the start to the first line matching ``pattern``; fails after
        ``timeout_s`` or when the process ends without one."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for at, line in list(self.lines):
                if re.search(pattern, line):
                    return at
            if self.process.poll() is not None:
                time.sleep(0.2)  # the last lines
                if not any(re.search(pattern, line) for _, line in list(self.lines)):
                    break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} within {timeout_s}s; "
                             f"output:\n{self.output}")

    def interrupt(self, timeout_s: float = 30.0) -> int:
        """Ctrl-C, and its exit status. A process that does not end in time fails the
        test with where each of its threads was (py-spy) and what it printed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running {timeout_s:g}s after Ctrl-C; its threads:\n"
                f"{self.stacks()}\noutput:\n{self.output}") from None
        finally:
            self.kill()

    def stacks(self) -> str:
        """Every thread's stack, Python and native (py-spy dump)."""
        py_spy = Path(sys.executable).with_name("py-spy")
        try:
            return subprocess.run([str(py_spy), "dump", "--native", "--pid",
                                   str(self.process.pid)], capture_output=True, text=True,
                                  timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"(py-spy: {error})"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
