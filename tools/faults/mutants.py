"""The bugs the campaign once found, put back one at a time: its detection power
(docs/reliability.md, "Detection power").

Each mutant undoes the heart of one fix (docs/reliability.md, "What the campaign
found") with the smallest edit that brings the bug back on today's code, not by checking
out the old commit: the campaign that measures is today's, and so is everything around
the bug. A mutant whose text is no longer in the code fails loudly (``MutantStale``):
its fix moved, and the mutant must follow it (tests/tools/faults/test_mutants.py checks
every one against the tree)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class MutantStale(Exception):
    """The code a mutant changes is not (exactly once) where it says."""


@dataclass(frozen=True)
class Mutant:
    name: str  # the campaign seed that found the bug
    fixed_by: str  # the commit of the fix
    what: str  # the bug, in plain words
    path: str  # the file changed, from the repository's root
    old: str  # text found exactly once in it
    new: str  # what it becomes

    def __post_init__(self) -> None:
        if not self.name or self.old == self.new or not self.old:
            raise ValueError(f"mutant {self.name!r}: a name and a change are needed")


MUTANTS = (
    Mutant("1011", "0865610",
           "changelog records written for a partition with no open transaction",
           "streams/faust/transactions.py",
           "if log_ is None or not log_.open:", "if log_ is None:"),
    Mutant("1012", "efba725",
           "a partition given up while one of its records is applied resumes after it",
           "streams/processor.py",
           "            if next_.get(partition) == offset:\n"
           "                # Unless the partition was given up",
           "            if True:\n"
           "                # Unless the partition was given up"),
    Mutant("3143", "2811b3b",
           "a claim made for another process's lease is taken without its confirm",
           "eventq/gateway/cluster_answers.py",
           "        handover = handover_from(reply)\n",
           "        handover = handover_from(reply)\n        return handover\n"),
    Mutant("3524", "2e62f8b",
           "a table rebuilt from a changelog end short of the last commit",
           "streams/faust/table_recovery.py",
           "                 if ends.get(p, (0, 0))[1] < end}",
           "                 if False}"),
    Mutant("4005", "a369055",
           "a partition taken again on its own is never admitted into by the bulk lane",
           "streams/faust/ownership.py",
           "            self._store.active = self._store.active | {partition}\n"
           "            self.admit_served()\n",
           "            self._store.active = self._store.active | {partition}\n"),
    Mutant("4116", "f47e6a6",
           "a table a standby copy brought up to date is trusted when its partition is taken",
           "streams/faust/table_recovery.py",
           "        if db.get(FAUST_OFFSET_KEY) != db.get(EVENTQ_OFFSET_KEY):\n",
           "        if False:\n"),
)
BY_NAME = {m.name: m for m in MUTANTS}


def apply(mutant: Mutant, root: Path) -> None:
    """Change ``root``'s copy of the code as ``mutant`` says."""
    path = root / mutant.path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MutantStale(f"mutant {mutant.name}: {mutant.path} is gone") from None
    found = text.count(mutant.old)
    if found != 1:
        raise MutantStale(f"mutant {mutant.name}: its text is in {mutant.path} {found} times, "
                          f"not once; follow its fix ({mutant.fixed_by}) to where it is now")
    path.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")


__all__ = ["BY_NAME", "MUTANTS", "Mutant", "MutantStale", "apply"]
