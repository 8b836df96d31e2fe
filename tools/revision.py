"""Another git revision of this repository checked out beside it, for benchmarks that
measure before and after in one run on the same machine (docs/benchmarks.md,
"Benchmarks")."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worktree(ref: str, into: Path) -> Path:
    """A detached worktree of ``ref`` under ``into``, sharing this checkout's Kafka
    jars; its path."""
    path = into / f"before-{ref}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref],
                   check=True, capture_output=True)
    jars = path / "kafka" / "lib"  # fetched by make deps, not in git: this checkout's
    if not jars.exists() and (ROOT / "kafka" / "lib").exists():
        jars.symlink_to(ROOT / "kafka" / "lib")
    return path


def remove_worktree(path: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                   capture_output=True)
