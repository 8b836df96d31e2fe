"""``python -m eventq.run.die_with_parent PARENT_PID PROGRAM ARGS...``: become PROGRAM (exec:
same pid) set to get SIGTERM when PARENT_PID ends, however it ends (Linux's
PR_SET_PDEATHSIG survives exec).

`eventq up` starts its `eventq serve` children through it: a supervisor killed with
``kill -9`` would otherwise leave them serving on their ports and holding their data
dirs, with nothing left to stop or restart them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def command(parent_pid: int, program: list[str]) -> list[str]:
    """The command that runs ``program`` so that it ends with ``parent_pid``."""
    return [sys.executable, "-m", "eventq.run.die_with_parent", str(parent_pid), *program]


def main(argv: list[str]) -> int:
    parent_pid, program = int(argv[0]), argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        print(f"eventq: cannot ask to end with the parent process: "
              f"{os.strerror(ctypes.get_errno())}", file=sys.stderr)
    if os.getppid() != parent_pid:  # it ended before we asked: no signal would come
        return 1
    os.execv(program[0], program)  # returns only by raising


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
