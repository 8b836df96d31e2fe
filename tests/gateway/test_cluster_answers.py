"""Leasing from several processes (eventq/gateway/cluster_answers.py): the heads a peek
replies with, choosing where to lease, and the asking side of a claim another process
offers (confirm before handing it on, eventq/state/offers.py)."""

from __future__ import annotations

import asyncio
import random
import uuid
from types import SimpleNamespace

import pytest

from eventq.errors import ServerError
from eventq.gateway.cluster_answers import (
    ClusterAnswers,
    UnconfirmedClaim,
    choose_lease,
    heads_of,
)
from eventq.protocol import replies
from eventq.protocol import requests as rq


def test_peek_replies_parse_back() -> None:
    heads = {"a": 5, "b.c": 2**200}
    assert heads_of(replies.heads_reply(heads)) == heads
    assert heads_of(replies.heads_reply({})) == {}


def test_a_lease_goes_where_the_names_best_job_is_here_on_a_tie() -> None:
    random.seed(1)
    assert choose_lease({None: {}, "b:1": {}}) is None
    assert choose_lease({None: {"q": 7}, "b:1": {"q": 3}}) == ("q", "b:1")
    assert choose_lease({None: {"q": 3}, "b:1": {"q": 3}}) == ("q", None)
    assert choose_lease({"c:1": {"q": 2}, "b:1": {"q": 3}}) == ("q", "c:1")
    names = {choose_lease({None: {"a": 9}, "b:1": {"b": 1}})[0] for _ in range(50)}
    assert names == {"a", "b"}  # a uniformly random name among those ready anywhere


# --- the asking side of a claim offered by another process (eventq/state/offers.py) ----------

JOB = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c8")
CLAIM_AT = 7 << 16
HANDOVER = replies.peer_lease_reply(JOB, "q", 1000, 1, 0, CLAIM_AT, b"payload")


class Owner:
    """Another process as the asker sees it: it answers ``confirm`` with ``answer``
    (bytes, or an exception to raise), after ``delay_s``."""

    def __init__(self, answer, delay_s: float = 0.0) -> None:
        self.answer, self.delay_s = answer, delay_s
        self.asked: list[object] = []

    async def ask(self, address, request):
        self.asked.append(request)
        await asyncio.sleep(self.delay_s)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def asker(owner: Owner) -> tuple[ClusterAnswers, list]:
    given_back: list = []
    leasing = SimpleNamespace(give_back=given_back.append)
    engine = SimpleNamespace(index=None)
    answers = ClusterAnswers(cluster=owner, engine=engine, stats=None, leasing=leasing,
                             local=None, clock_ms=lambda: 0)
    return answers, given_back


def test_a_confirmed_claim_is_handed_to_the_client():
    owner = Owner(b"+OK\r\n")
    answers, given_back = asker(owner)
    handover = asyncio.run(answers._take_offer("b:1", HANDOVER))
    assert handover.reply == replies.lease_reply(JOB, "q", 1000, b"payload")
    assert owner.asked == [rq.Confirm(JOB, CLAIM_AT)] and given_back == []


def test_a_withdrawn_claim_is_not_handed_on_and_the_lease_goes_on():
    answers, given_back = asker(Owner(b"-NOT-FOUND\r\n"))
    assert asyncio.run(answers._take_offer("b:1", HANDOVER)) is None
    assert given_back == []  # the owner gave it back already


def test_a_confirm_without_an_answer_ends_the_lease_with_an_error():
    """The claim may be ours with nobody to hand it to: neither "no job" nor another."""
    answers, _ = asker(Owner(ServerError("did not answer")))
    with pytest.raises(UnconfirmedClaim, match="lease again"):
        asyncio.run(answers._take_offer("b:1", HANDOVER))


def test_a_confirm_no_longer_wanted_gives_the_job_back_if_it_lands():
    answers, given_back = asker(Owner(b"+OK\r\n", delay_s=0.05))

    async def main() -> None:
        taking = asyncio.ensure_future(answers._take_offer("b:1", HANDOVER))
        await asyncio.sleep(0.01)
        taking.cancel()  # another job came first
        with pytest.raises(asyncio.CancelledError):
            await taking
        await asyncio.sleep(0.1)  # the confirm lands

    asyncio.run(main())
    assert [release.claim for release in given_back] == [CLAIM_AT]
