"""A claim made for another process's lease is only offered until that process confirms
it; unconfirmed, it is given back, never counted (eventq/state/offers.py; docs/fencing.md, "A
claim made for another process: offered, then confirmed").

The end-to-end case (a requester stopped with SIGSTOP while its claim is written) is
tests/e2e/test_cross_process_claim.py; here each part on its own: the bookkeeping, the
owner's gateway (offer, confirm, the window) and the deadline timer at a TTR."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq import core
from eventq.core import AttemptStarted, State
from eventq.core.machine import Accepted
from eventq.gateway.dispatch import Gateway
from eventq.gateway.handlers import LocalAnswers
from eventq.gateway.leasing import Leasing
from eventq.protocol import replies
from eventq.protocol import requests as rq
from eventq.state.indexes import JobIndex
from eventq.state.offers import CONFIRM_WINDOW_MAX_MS, Offers, confirm_window_ms
from eventq.state.waiters import Applied, Waiters
from streams.timers import DeadlineTimer
from support.jobs import NOW, job

JOB = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c8")
CLAIM_AT = 7 << 16
PARTITION = 3


def release(attempt: int = 1, claim: int = CLAIM_AT, job_id: uuid.UUID = JOB):
    return core.ReleaseAttempt(job_id, attempt, State.NEW, claim)


# --- the bookkeeping ----------------------------------------------------------------


def test_a_confirmed_offer_is_the_peers_and_cannot_be_withdrawn():
    offers = Offers()
    offers.open(release())
    assert offers.confirm(JOB, CLAIM_AT)
    assert offers.withdraw(JOB, CLAIM_AT) is None
    assert offers.withdraw_attempt(JOB, 1) is None
    assert not offers.confirm(JOB, CLAIM_AT)  # once
    assert len(offers) == 0


def test_a_withdrawn_offer_cannot_be_confirmed():
    offers = Offers()
    offers.open(release())
    assert offers.withdraw(JOB, CLAIM_AT) == release()
    assert not offers.confirm(JOB, CLAIM_AT)


def test_a_confirm_names_the_claim_not_just_the_job():
    """A late confirm of an earlier claim (withdrawn, the job claimed again for another
    lease at the same attempt number) does not take the new one."""
    offers = Offers()
    offers.open(release(claim=CLAIM_AT + (1 << 16)))
    assert not offers.confirm(JOB, CLAIM_AT)
    assert offers.confirm(JOB, CLAIM_AT + (1 << 16))


def test_at_a_ttr_only_the_offered_attempt_is_withdrawn():
    offers = Offers()
    offers.open(release(attempt=2))
    assert offers.withdraw_attempt(JOB, 1) is None
    assert offers.withdraw_attempt(JOB, 2) == release(attempt=2)


def test_offers_in_partitions_that_left_are_withdrawn_and_only_those():
    offers = Offers()
    other = uuid.uuid4()

    def place(job_id: uuid.UUID) -> int:
        return PARTITION if job_id == JOB else PARTITION + 1

    offers.open(release())
    offers.open(release(job_id=other))
    assert offers.withdraw_partitions({PARTITION, 9}, place) == [release()]
    assert not offers.confirm(JOB, CLAIM_AT)
    assert offers.confirm(other, CLAIM_AT)


@given(st.lists(st.sampled_from(["confirm", "withdraw", "ttr", "rebalance"]), min_size=1, max_size=6))
def test_exactly_one_ending_wins_whatever_the_order(endings):
    offers = Offers()
    offers.open(release())
    won = []
    for ending in endings:
        if ending == "confirm":
            won += [ending] if offers.confirm(JOB, CLAIM_AT) else []
        elif ending == "withdraw":
            won += [ending] if offers.withdraw(JOB, CLAIM_AT) else []
        elif ending == "ttr":
            won += [ending] if offers.withdraw_attempt(JOB, 1) else []
        else:
            won += [ending] if offers.withdraw_partitions({PARTITION}, lambda _: PARTITION) else []
    assert won == [endings[0]]


@given(st.integers(min_value=1, max_value=10**9))
def test_the_window_ends_well_before_the_ttr(ttr_ms):
    window = confirm_window_ms(ttr_ms)
    assert 0 <= window <= CONFIRM_WINDOW_MAX_MS
    assert window <= ttr_ms / 2


# --- the owner's gateway ------------------------------------------------------------


class ClaimingEngine:
    """The engine's surface a peer lease uses: claims are granted, give-backs kept."""

    def __init__(self, index: JobIndex) -> None:
        self.index = index
        self.waiters = Waiters()
        self.claimed: set[uuid.UUID] = set()
        self.offers = Offers()
        self.appended: list[object] = []

    async def wait_ready(self) -> None:
        return None

    async def submit(self, command, on_abandoned=None):
        entry = self.index.entry(command.job_id)
        event = AttemptStarted(command.job_id, NOW, 7, command.attempt, NOW + 1000)
        leased = job(job_id=command.job_id, state=State.LEASED, attempts=command.attempt,
                     version=CLAIM_AT, lease_deadline=NOW + 1000)
        assert entry is not None
        return Applied(Accepted(event), leased, CLAIM_AT)

    def append(self, command):
        self.appended.append(command)

        async def in_log() -> None:
            return None

        return in_log()


class Stats:
    released = 0


def owner_with_one_ready_job(ttr_ms: int = 1000):
    index = JobIndex()
    ready = job()
    index.put(ready, 0, NOW)
    engine = ClaimingEngine(index)
    leasing = Leasing(engine, Stats(), clock_ms=lambda: NOW)
    local = LocalAnswers(engine, leasing.stats, leasing, clock_ms=lambda: NOW)
    return Gateway(local, leasing), leasing, engine, ready


def test_a_peer_confirms_its_claim_once_and_then_nothing_is_given_back():
    gateway, leasing, engine, ready = owner_with_one_ready_job()

    async def main() -> list[bytes]:
        handover = await leasing.take_here(("q",), peer_form=True)
        claim = handover.release.claim
        answers = [await gateway.handle(rq.Confirm(ready.id, claim), peer=True)
                   for _ in range(2)]
        await asyncio.sleep(0.6)  # past the window (half the TTR of 1 s)
        return answers

    first, second = asyncio.run(main())
    assert first == replies.ok()
    assert second.startswith(b"-NOT-FOUND")
    assert engine.appended == []  # the confirmed claim stays the peer's


def test_an_offer_not_confirmed_in_its_window_is_given_back_and_refused_after():
    gateway, leasing, engine, ready = owner_with_one_ready_job()

    async def main() -> bytes:
        await leasing.take_here(("q",), peer_form=True)
        await asyncio.sleep(0.6)  # the window: half the TTR of 1 s
        return await gateway.handle(rq.Confirm(ready.id, CLAIM_AT), peer=True)

    late = asyncio.run(main())
    assert late.startswith(b"-NOT-FOUND")
    assert engine.appended == [core.ReleaseAttempt(ready.id, 1, State.NEW, CLAIM_AT)]
    assert leasing.stats.released == 1


def test_a_claim_for_this_processs_own_client_is_no_offer():
    _, leasing, engine, _ = owner_with_one_ready_job()

    async def main() -> None:
        await leasing.take_here(("q",))
        await asyncio.sleep(0.6)

    asyncio.run(main())
    assert len(engine.offers) == 0 and engine.appended == []


def test_a_client_cannot_confirm_an_offer():
    gateway, leasing, engine, ready = owner_with_one_ready_job()

    async def main() -> bytes:
        await leasing.take_here(("q",), peer_form=True)
        return await gateway.handle(rq.Confirm(ready.id, CLAIM_AT))

    assert asyncio.run(main()) == b"-CLIENT-ERROR Unknown command\r\n"
    assert len(engine.offers) == 1  # still the peer's to confirm


# --- the deadline timer at a TTR -----------------------------------------------------


@pytest.mark.parametrize("offered", [True, False], ids=["only-offered", "confirmed"])
def test_a_ttr_gives_back_an_attempt_only_offered_and_times_out_a_confirmed_one(offered):
    index = JobIndex()
    leased = job(state=State.LEASED, attempts=1, version=CLAIM_AT, lease_deadline=NOW - 1)
    index.put(leased, 0, NOW - 1000)
    offers = Offers()
    offers.open(release(job_id=leased.id))
    if not offered:
        assert offers.confirm(leased.id, CLAIM_AT)
    sent: list[object] = []

    async def send(command) -> None:
        sent.append(command)

    timer = DeadlineTimer(index, Waiters(), send, lambda: NOW,
                          unconfirmed=offers.withdraw_attempt)
    asyncio.run(timer._tick())
    expected = (release(job_id=leased.id) if offered
                else core.TimeoutAttempt(leased.id, 1))
    assert sent == [expected]
    assert len(offers) == 0
