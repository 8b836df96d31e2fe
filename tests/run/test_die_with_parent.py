"""`eventq up`'s children end with it, even when it is killed with kill -9
(eventq/run/die_with_parent.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# A parent that starts `sleep` through die_with_parent, prints the child's pid and waits.
PARENT = """
import os, subprocess, time
from eventq.run import die_with_parent
child = subprocess.Popen(die_with_parent.command(os.getpid(), ["/bin/sleep", "60"]))
print(child.pid, flush=True)
time.sleep(60)
"""
CHILD_GONE_TIMEOUT_S = 10.0


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] == "Z"
    except (OSError, IndexError):
        return True


def test_the_child_is_the_program_itself_and_ends_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + CHILD_GONE_TIMEOUT_S
        # Exec keeps the pid: the pid Popen gave is the program's.
        while Path(f"/proc/{child}/cmdline").read_bytes() != b"/bin/sleep\x0060\x00":
            assert time.monotonic() < deadline, "the program never ran"
            time.sleep(0.05)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        while not gone(child):
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdout.close()
        parent.wait()


def test_a_parent_gone_before_the_child_asked_means_the_program_never_runs() -> None:
    not_my_parent = os.getpid() + 1_000_000  # no such process: as if the parent had ended
    done = subprocess.run(
        [sys.executable, "-m", "eventq.run.die_with_parent", str(not_my_parent), "/bin/echo", "ran"],
        capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and "ran" not in done.stdout
