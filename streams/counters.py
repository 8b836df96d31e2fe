"""What the processor counts (streams/processor.py, streams/apply.py): the records of the
command log it handled and what became of their commands. Logged when the server stops
(eventq/run/serve.py) and served as metrics (docs/architecture.md, "Metrics and the
dashboard")."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Counters:
    skipped: int = 0  # records not applied: applied already, out of order, or not held
    records: int = 0  # records of the command log handled
    batches: int = 0  # of which held more than one command
    applied: int = 0
    rejected: int = 0
    ignored: int = 0
    undecodable: int = 0
    unappliable: int = 0  # decoded, but applying it failed: rejected, never retried
    evicted: int = 0
    slices: int = 0  # slice records admitted from the bulk lane and applied
    readmitted: int = 0  # slice records skipped: a second copy of an admitted range
    follow_ups: int = 0  # commands handed on for other partitions (workflows)
    # [eventq] workflows (docs/architecture.md, "Workflows"): ``upstream`` notices applied
    # to their dependent (accepted; a duplicate or stale one is ``ignored``), and
    # ``depend`` commands that stored a registration (a repeat stores none).
    notices: int = 0
    registrations: int = 0
    # [eventq] recurring jobs (docs/workflows.md, "Recurring jobs"): slots fired (each
    # once: a repeated or stale fire is ``ignored``), their adds handed on as follow-ups.
    fired: int = 0
