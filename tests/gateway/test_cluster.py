"""The pure parts of serving from several processes (eventq/gateway/cluster.py): merging
figures and pages, combining digests (choosing where to lease: test_cluster_answers.py)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.core import Job, State, state_digest
from eventq.core.digest import StateDigest
from eventq.errors import ServerError
from eventq.gateway.cluster import (
    DigestPart,
    check_covers,
    digest_part_of,
    merge_job_pages,
    merge_queues,
)
from eventq.protocol import replies
from eventq.protocol.reply_reader import parse_blocks


def test_queue_figures_add_up_by_name_in_bytewise_order() -> None:
    Q = replies.QueueView
    a = [Q("b", 1, 0), Q("a", 2, 3)]
    b = [Q("b", 4, 1), Q("C", 0, 0)]
    assert merge_queues([a, b]) == [Q("C", 0, 0), Q("a", 2, 3), Q("b", 5, 1)]


def view(n: int) -> replies.JobView:
    return replies.JobView(uuid.UUID(int=n), "q", 1000, 60000, b"p%d" % n, 0, 0, 0, 0, 0,
                           0, 1_700_000_000_000)


@given(st.lists(st.integers(0, 10_000), unique=True, max_size=40), st.integers(0, 2),
       st.integers(0, 45), st.integers(1, 100))
def test_pages_of_several_processes_merge_as_one_list(keys, _, offset, limit) -> None:
    """However the jobs are spread, the merged page is the page of the whole list."""
    spread = [[], [], []]
    for key in keys:
        spread[key % 3].append(key)
    parts = [parse_blocks(replies.ordered_job_blocks([(k, view(k)) for k in sorted(part)]))
             for part in spread]
    merged = merge_job_pages(parts, offset, limit)
    expected = sorted(keys)[offset:offset + limit]
    assert merged == parse_blocks(replies.job_blocks([view(k) for k in expected]))


def job(n: int) -> Job:
    return Job(id=uuid.UUID(int=(4 << 76) | n), name="q", ttr_ms=1000, ttl_ms=60000,
               payload=b"x", priority=0, max_attempts=0, max_fails=0, attempts=0, fails=0,
               state=State.NEW, created_ms=1_700_000_000_000, scheduled_ms=None,
               expires_ms=1_700_000_060_000, lease_deadline_ms=None, result=None,
               result_ok=None,
               version=n)


def test_digest_parts_combine_to_the_digest_of_all_jobs() -> None:
    jobs = [job(n) for n in range(10)]
    parts = [StateDigest(jobs[:3]), StateDigest(jobs[3:]), StateDigest()]
    replies_ = [replies.digest_part_reply(p.sum, p.count, [i]) for i, p in enumerate(parts)]
    decoded = [digest_part_of(r) for r in replies_]
    check_covers(decoded, 3)
    combined = StateDigest.combined((d.sum, d.count) for d in decoded)
    assert combined.hexdigest() == state_digest(jobs)


def test_a_digest_missing_or_doubling_a_partition_says_retry() -> None:
    part = lambda *ps: DigestPart(0, 0, frozenset(ps))  # noqa: E731
    with pytest.raises(ServerError, match="retry"):
        check_covers([part(0), part(2)], 3)
    with pytest.raises(ServerError, match="retry"):
        check_covers([part(0, 1), part(1, 2)], 3)
