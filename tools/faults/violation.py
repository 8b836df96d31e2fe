"""One finding of the checker (checker.py, logrules.py): its kind, the job it is about
(None for the whole run), the indexes of the history's ops involved, and what it says."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Violation:
    kind: str
    job_id: str | None
    ops: tuple[int, ...]  # indexes of the ops involved
    message: str


__all__ = ["Violation"]
