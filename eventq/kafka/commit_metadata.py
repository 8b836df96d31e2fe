"""What a changelog transaction's commit tells the partition's next owner: how far the
changelog reached when the command log's offset was committed (docs/fencing.md,
"Taking a partition").

The offset a partition's transaction commits for the command log carries, in Kafka's
free-text offset metadata, the end of the changelog records that transaction committed.
Whoever takes the partition next reads both in one answer and does not recover its
table from a changelog that a broker says ends before that: such an answer comes from a
broker with a stale view (a leader cut off from the cluster still answers as leader,
with a last stable offset from before the commit it never saw; the fault campaign's
seed 3524), and a table recovered from it lacks committed records whose commands are
never applied again.
"""

from __future__ import annotations

CHANGELOG_END_PREFIX = "eventq changelog-end "


def commit_metadata(changelog_end: int | None) -> str:
    """The metadata of a commit whose changelog records end before ``changelog_end``
    (None: the partition's changelog has no record yet)."""
    if changelog_end is None:
        return ""
    if changelog_end < 0:
        raise ValueError(f"a changelog end is an offset, not {changelog_end}")
    return f"{CHANGELOG_END_PREFIX}{changelog_end}"


def changelog_end(metadata: str | None) -> int | None:
    """The changelog end a commit's metadata names; None for any other metadata (a
    commit by an older eventq, or by another tool): nothing is known then."""
    if not metadata or not metadata.startswith(CHANGELOG_END_PREFIX):
        return None
    digits = metadata[len(CHANGELOG_END_PREFIX):]
    return int(digits) if digits.isdigit() else None
