"""Who uses a data dir's state, and whether its last user stopped cleanly.

The server writes its pid into ``<state>/RUNNING`` while it runs and removes the file
when it stops cleanly. RocksDB is written before faust's changelog record is sent, so a
marker left by a dead process means the local tables may hold changes that never
reached `eventq.jobs`: they are discarded and rebuilt from the log.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

RUNNING_MARKER = "RUNNING"


class StateDirInUse(RuntimeError):
    pass


def running_pid(state_dir: Path) -> int | None:
    """The pid of a live process that holds the marker, if any."""
    try:
        pid = int((state_dir / RUNNING_MARKER).read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid


def refuse_if_in_use(state_dir: Path) -> None:
    pid = running_pid(state_dir)
    if pid is not None:
        raise StateDirInUse(f"an eventq server (pid {pid}) is using {state_dir}; stop it first")


def claim(state_dir: Path) -> bool:
    """Mark the state dir as ours. Returns True if the last user did not stop cleanly
    (its local tables were then discarded)."""
    refuse_if_in_use(state_dir)
    marker = state_dir / RUNNING_MARKER
    crashed = marker.exists()
    if crashed:
        discard_tables(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{os.getpid()}\neventq is running; if this survives, it did not stop cleanly\n")
    return crashed


def release(state_dir: Path) -> None:
    (state_dir / RUNNING_MARKER).unlink(missing_ok=True)


def discard_tables(state_dir: Path) -> None:
    if not state_dir.exists():
        return
    for child in state_dir.iterdir():
        if child.name != RUNNING_MARKER:
            shutil.rmtree(child) if child.is_dir() else child.unlink()
