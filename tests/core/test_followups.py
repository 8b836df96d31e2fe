"""What a step asks beyond its job's record (eventq/core/followups.py): the depends of a
new dependent, the notices of an ending (``Notify`` + ``notify``), a depend's
registration (``Register`` + ``register``), and the inputs a notice writes or drops."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings

from eventq.core import (
    Accepted,
    Add,
    Complete,
    Delete,
    Depend,
    Expire,
    Fail,
    Import,
    Input,
    Registration,
    StartAttempt,
    State,
    TimeoutAttempt,
    Upstream,
    UpstreamOutcome,
    apply,
    decode_input,
    decode_registration,
    input_key,
    registration_key,
)
from eventq.core.followups import (
    FollowUp,
    Notify,
    Register,
    command_key,
    notify,
    register,
)
from eventq.core.partitioner import job_key
from eventq.core.step import step
from support.core_strategies import histories

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
U1 = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
U2 = uuid.UUID("c9bf9e57-1685-4c89-bafb-ff5af830be8a")
D1, D2, D3 = (uuid.UUID(int=n) for n in (101, 102, 103))
T0 = 1_700_000_000_000
TTL = 60_000
OK, FAILED, DELETED, EVICTED, RETRIED = (
    UpstreamOutcome.COMPLETED, UpstreamOutcome.FAILED, UpstreamOutcome.DELETED,
    UpstreamOutcome.EVICTED, UpstreamOutcome.RETRIED,
)  # fmt: skip


class Partition:
    """One job's commands applied with ``step`` at increasing positions."""

    def __init__(self, job=None, offset: int = 100) -> None:
        self.job, self.offset = job, offset

    def __call__(self, command, at_ms: int = T0):
        self.offset += 1
        result = step(self.job, command, at_ms, self.offset)
        self.job = result.job
        return result


def plain(job_id=JID, max_fails=0, max_attempts=0) -> Partition:
    p = Partition()
    p(Add(job_id, "q", 1000, TTL, b"p", 0, max_attempts, max_fails))
    return p


def waiting(after=(U1, U2)) -> Partition:
    p = Partition()
    p(Add(JID, "q", 1000, TTL, b"p", after=after))
    return p


# ----------------------------------------------------------- depends of an add


def test_an_add_with_after_asks_each_upstream_for_a_registration():
    result = Partition()(Add(JID, "q", 1000, TTL, b"p", after=(U2, U1)), T0)
    assert result.follow_ups == (
        FollowUp(Depend(U2, JID, 101, T0 + TTL)), FollowUp(Depend(U1, JID, 101, T0 + TTL)),
    )  # fmt: skip
    assert [f.key for f in result.follow_ups] == [job_key(U2), job_key(U1)]
    assert result.side == () and result.then is None


def test_a_dependent_without_ttl_registers_without_deadline():
    result = Partition()(Add(JID, "q", 1000, 0, b"p", after=(U1,)))
    assert result.follow_ups == (FollowUp(Depend(U1, JID, 101, None)),)


def test_a_follow_ups_key_is_its_jobs_kafka_key():
    assert command_key(Depend(U1, JID, 0, None)) == job_key(U1)
    assert command_key(Upstream(JID, 0, U1, DELETED, 0, T0)) == job_key(JID)


def test_a_duplicate_add_asks_nothing():
    p = waiting()
    assert p(Add(JID, "q", 1000, TTL, b"p", after=(U1,))).follow_ups == ()


@given(histories())
@settings(max_examples=60, deadline=None)
def test_jobs_without_upstreams_ask_only_to_tell_their_registrations(steps):
    """Whatever plain jobs do, a step asks for nothing but the scan of an ending."""
    jobs: dict = {}
    for command, at, offset, _, after in steps:
        result = step(jobs.get(command.job_id), command, at, offset)
        assert result.job == after
        assert result.follow_ups == () and result.side == ()
        assert result.then is None or isinstance(result.then, Notify)
        jobs[command.job_id] = after


# ------------------------------------------------------------------- endings


def ends(result) -> Notify:
    assert isinstance(result.then, Notify), result
    return result.then


def test_a_complete_tells_the_registrations_completed_with_its_result():
    p = plain()
    result = p(Complete(JID, b"done"), T0 + 5)
    assert ends(result) == Notify(JID, OK, p.offset, T0 + 5, b"done", name="q")
    assert ends(result).prefix == b"\x00eventq.reg:" + job_key(JID) + b":"


def test_a_final_fail_tells_failed_and_a_fail_with_fails_left_nothing():
    p = plain(max_fails=2)
    assert p(Fail(JID, b"again")).then is None
    result = p(Fail(JID, b"bad"), T0 + 1)
    assert ends(result) == Notify(JID, FAILED, p.offset, T0 + 1, b"bad", name="q")


def test_attempts_used_up_tell_failed_with_an_empty_result():
    p = plain(max_attempts=1)
    p(StartAttempt(JID, 1))
    result = p(TimeoutAttempt(JID, 1), T0 + 5_000)
    assert ends(result) == Notify(JID, FAILED, p.offset, T0 + 5_000, b"", name="q")


@pytest.mark.parametrize("finish", [None, Complete(JID, b"r"), Fail(JID, b"f")])
def test_a_delete_tells_deleted_only_an_unfinished_job_and_drops_every_registration(finish):
    p = plain()
    if finish is not None:
        p(finish)
    result = p(Delete(JID), T0 + 2)
    outcome = DELETED if finish is None else None
    assert ends(result) == Notify(JID, outcome, p.offset, T0 + 2, removed=True, name="q")
    assert result.removes


@pytest.mark.parametrize("finish", [None, Complete(JID, b"r")])
def test_a_ttl_tells_evicted_only_an_unfinished_job(finish):
    p = plain()
    if finish is not None:
        p(finish)
    result = p(Expire(JID), T0 + TTL)
    outcome = EVICTED if finish is None else None
    assert ends(result) == Notify(JID, outcome, p.offset, T0 + TTL, removed=True, name="q")


def test_a_dependent_failed_by_its_upstream_tells_its_own_dependents_failed():
    p = waiting()
    result = p(Upstream(JID, 101, U2, EVICTED, 9, T0 - 1), T0 + 3)
    assert result.job.state is State.FAILED
    assert ends(result) == Notify(
        JID, FAILED, p.offset, T0 + 3, b"upstream c9bf9e57-1685-4c89-bafb-ff5af830be8a evicted",
        name="q",
    )  # fmt: skip


def test_a_released_dependent_tells_nobody():
    p = waiting(after=(U1,))
    result = p(Upstream(JID, 101, U1, OK, 9, T0 - 1, b"r"))
    assert result.job.state is State.NEW and result.then is None


def test_an_imported_finished_job_tells_its_waiting_registrations():
    done = apply(None, Add(JID, "q", 1000, TTL, b""), T0, 1)[1]
    done = apply(done, Complete(JID, b"r"), T0, 2)[1]
    result = Partition()(Import.from_job(done), T0 + 1)
    assert ends(result) == Notify(JID, OK, 101, T0 + 1, b"r", name="q")


def test_an_ignored_or_rejected_command_asks_nothing():
    p = plain()
    p(Complete(JID, b"r"))
    for command in (Complete(JID, b"again"), StartAttempt(JID, 1), Expire(JID)):
        result = p(command, T0 + 1)
        assert not isinstance(result.outcome, Accepted)
        assert (result.follow_ups, result.side, result.then) == ((), (), None)


# --------------------------------------------------------------------- notify

REGS = [Registration(D1, 7, None), Registration(D2, 8, T0 + 10), Registration(D3, 9, T0)]


def test_notify_tells_each_live_registration_in_order_and_drops_the_expired():
    effects = notify(Notify(U1, OK, 55, T0 + 5, b"r"), REGS)
    assert [f.command for f in effects.follow_ups] == [
        Upstream(D1, 7, U1, OK, 55, T0 + 5, b"r"), Upstream(D2, 8, U1, OK, 55, T0 + 5, b"r"),
    ]  # fmt: skip
    assert [f.key for f in effects.follow_ups] == [job_key(D1), job_key(D2)]
    assert effects.side == ((registration_key(U1, D3), None),)
    assert not effects.removes  # the upstream's version covers every earlier depend


def test_a_removed_upstream_drops_every_registration():
    effects = notify(Notify(U1, DELETED, 55, T0, removed=True), REGS)
    assert [f.command.outcome for f in effects.follow_ups] == [DELETED, DELETED]
    assert {key for key, value in effects.side} == {registration_key(U1, d) for d in (D1, D2, D3)}
    assert all(value is None for _, value in effects.side)


def test_a_finished_upstream_removed_tells_nobody():
    effects = notify(Notify(U1, None, 55, T0, removed=True), REGS)
    assert effects.follow_ups == () and len(effects.side) == 3


def test_an_expire_of_an_absent_upstream_sweeps_the_expired_registrations():
    result = Partition()(Expire(U1), T0 + 9)
    assert result.then == Notify(U1, None, 101, T0 + 9, absent=True)
    effects = notify(result.then, REGS)
    assert effects.follow_ups == () and effects.side == ((registration_key(U1, D3), None),)
    assert effects.removes  # the watermark moves, as for a tombstone
    assert not notify(result.then, REGS[:1]).removes


# ------------------------------------------------------------------- register


def test_a_depend_on_an_absent_or_unfinished_upstream_registers_without_a_notice():
    depend = Depend(U1, JID, 5, T0 + TTL)
    for p in (Partition(), plain(U1)):
        result = p(depend, T0 + 1)
        assert result.then == Register(depend, T0 + 1)
        assert result.then.key == registration_key(U1, JID)


def test_register_stores_a_new_registration_and_a_repeat_changes_nothing():
    pending = Register(Depend(U1, JID, 5, T0 + TTL), T0)
    effects = register(pending, None)
    assert effects.follow_ups == () and len(effects.side) == 1
    key, value = effects.side[0]
    assert key == pending.key and decode_registration(value) == Registration(JID, 5, T0 + TTL)
    assert register(pending, decode_registration(value)).side == ()


def test_a_later_job_of_the_dependents_id_replaces_its_registration_and_an_older_never():
    newer = Register(Depend(U1, JID, 9, T0 + TTL), T0)
    older = Register(Depend(U1, JID, 5, T0 + TTL), T0)
    assert register(newer, Registration(JID, 5, T0)).side[0][0] == newer.key
    assert register(older, Registration(JID, 9, T0)) == register(older, Registration(JID, 9, None))
    assert register(older, Registration(JID, 9, T0)).side == ()
    assert register(older, Registration(JID, 9, T0)).follow_ups == ()


def test_a_depend_whose_dependent_has_expired_registers_nothing():
    pending = Register(Depend(U1, JID, 5, T0), T0)
    assert register(pending, None).side == ()
    assert register(pending, Registration(JID, 5, T0)).side == ()  # left to the next ending


def test_a_finished_upstream_answers_a_depend_at_once_with_its_finishing_change():
    p = plain(U1)
    p(Complete(U1, b"r1"), T0 + 3)
    finish = p.offset
    depend = Depend(U1, JID, 5, T0 + TTL)
    result = p(depend, T0 + 9)
    assert result.job.version == finish  # a depend never changes the upstream
    notice = Upstream(JID, 5, U1, OK, finish, T0 + 9, b"r1")
    assert result.then == Register(depend, T0 + 9, notice)
    assert register(result.then, None).follow_ups == (FollowUp(notice),)
    assert register(result.then, Registration(JID, 5, T0 + TTL)).follow_ups == (FollowUp(notice),)


def test_a_finished_dependent_answers_with_when_it_finished_though_notices_moved_it_on():
    p = waiting()
    p(Upstream(JID, 101, U1, FAILED, 9, T0 - 1, b"bad"), T0 + 3)  # fails it
    finish = p.offset
    p(Upstream(JID, 101, U2, OK, 4, T0 - 2, b"ok"), T0 + 4)  # recorded only
    assert p.job.version > finish == p.job.finished_at
    result = p(Depend(JID, D1, 50, None), T0 + 9)
    assert result.then.notice == Upstream(
        D1, 50, JID, FAILED, finish, T0 + 3, b"upstream 16fd2706-8baf-433b-82eb-8c7fada847da failed"
    )  # fmt: skip


# ----------------------------------------------------------------------- inputs


def test_a_completed_or_failed_notice_hands_the_dependent_its_input():
    p = waiting()
    result = p(Upstream(JID, 101, U1, OK, 9, T0, b"r1"))
    (key, value), = result.side
    assert key == input_key(JID, U1) and decode_input(value) == Input(True, b"r1")
    result = p(Upstream(JID, 101, U2, FAILED, 9, T0, b"bad"))
    (key, value), = result.side
    assert key == input_key(JID, U2) and decode_input(value) == Input(False, b"bad")


def test_a_retried_upstream_drops_its_input_and_an_ending_without_result_writes_none():
    p = waiting()
    p(Upstream(JID, 101, U1, OK, 9, T0, b"r1"))
    assert p(Upstream(JID, 101, U1, RETRIED, 10, T0)).side == ((input_key(JID, U1), None),)
    assert p(Upstream(JID, 101, U1, RETRIED, 11, T0)).side == ()  # nothing left to drop
    assert p(Upstream(JID, 101, U2, DELETED, 3, T0)).side == ()


def test_a_stale_notice_writes_nothing():
    p = waiting()
    p(Upstream(JID, 101, U1, OK, 9, T0, b"r1"))
    result = p(Upstream(JID, 101, U1, OK, 9, T0, b"other"))
    assert result.side == () and result.then is None


@pytest.mark.parametrize("remove", [Delete(JID), Expire(JID)])
def test_a_removed_dependent_drops_its_inputs(remove):
    p = waiting(after=(U1, U2, uuid.UUID(int=3)))
    p(Upstream(JID, 101, U1, OK, 9, T0, b"r1"))
    p(Upstream(JID, 101, U2, FAILED, 9, T0, b"f"))  # fails it; its input is kept
    result = p(remove, T0 + TTL)
    assert set(result.side) == {(input_key(JID, U1), None), (input_key(JID, U2), None)}
    assert result.removes
