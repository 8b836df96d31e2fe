"""Recurring jobs' pure core (docs/workflows.md, "Recurring jobs";
eventq/core/recurrence.py): slots, the slot's job id, and recur/unrecur/fire, with
property tests over random histories (repeats as a crash leaves them included): no
slot fires twice, the latest due slot is never skipped, a slot's job has the spec's id.
"""

from __future__ import annotations

import hashlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import CodecError, decode_recurrence, encode_recurrence
from eventq.core.batch import position
from eventq.core.commands import Add, Fire, Recur, Unrecur, command_key, recurrence_key
from eventq.core.machine import ALREADY_APPLIED, Ignored, Rejected
from eventq.core.recurrence import (
    FIRED_ALREADY,
    NO_SLOT_DUE,
    NO_SUCH_RECURRENCE,
    SLOT_NOT_DUE,
    Changed,
    Definition,
    Recurrence,
    apply,
    decide,
    due_fire,
    first_slot_at,
    latest_slot_at,
    recurrence_name_of,
    recurrence_table_key,
    slot_job_id,
)
from eventq.errors import NotFound
from eventq.limits import MAX_EVERY_MS, MIN_EVERY_MS

DAY = 86_400_000
JAN_1_2024 = 1_704_067_200_000  # 2024-01-01T00:00:00Z, slot 19723 of a day
T0 = 1_700_000_000_000


def recur(name: str = "nightly", every: int = DAY, **kw) -> Recur:
    return Recur(name, kw.pop("job_name", "etl"), kw.pop("ttr", 60_000), kw.pop("ttl", DAY),
                 every, kw.pop("payload", b"{}"), **kw)


# ------------------------------------------------------------------------- slots


def test_the_spec_test_vector():
    assert JAN_1_2024 == 19723 * DAY
    assert slot_job_id("nightly", DAY, 19723) == uuid.UUID("d2c902db-9ba1-4266-92d6-ba506aadfd75")


@given(st.from_regex(r"[A-Za-z0-9_.\-]{1,255}", fullmatch=True),
       st.integers(MIN_EVERY_MS, MAX_EVERY_MS), st.integers(0, 2**40))
def test_a_slots_id_is_the_specs_function(name, every, slot):
    d = bytearray(hashlib.sha256(b"recur:%s:%d:%d" % (name.encode(), every, slot)).digest())
    d[6] = (d[6] & 0x0F) | 0x40
    d[8] = (d[8] & 0x3F) | 0x80
    got = slot_job_id(name, every, slot)
    assert got.bytes == bytes(d[:16])
    assert got.version == 4 and got.variant == uuid.RFC_4122
    assert str(got) == str(uuid.UUID(str(got)))  # canonical: a job's key


def test_the_ids_hash_every_too_and_numbers_are_decimal_without_leading_zeros():
    assert slot_job_id("n", 1000, 5) != slot_job_id("n", 2000, 5)
    d = hashlib.sha256(b"recur:n:1000:5").digest()
    assert slot_job_id("n", 1000, 5).bytes[:6] == d[:6]


def test_slot_math():
    assert first_slot_at(1000, 5000) == 5 and first_slot_at(1000, 5001) == 6
    assert latest_slot_at(1000, 5999) == 5 and latest_slot_at(1000, 6000) == 6
    assert first_slot_at(DAY, JAN_1_2024 - 1) == 19723


def test_keys():
    assert recurrence_key("nightly") == b"recur:nightly"
    assert command_key(Fire("nightly", 3)) == command_key(Unrecur("nightly")) == b"recur:nightly"
    assert command_key(recur()) == b"recur:nightly"
    assert recurrence_name_of(recurrence_table_key("a.b")) == "a.b"
    assert recurrence_table_key("x").startswith(b"\x00")
    with pytest.raises(ValueError):
        recurrence_name_of(b"\x00eventq.reg:x")


# ----------------------------------------------------------------- validation


@pytest.mark.parametrize("kw", [
    {"every": 999}, {"every": MAX_EVERY_MS + 1}, {"ttr": 0}, {"ttl": 0}, {"priority": 2**31},
    {"max_attempts": 256}, {"tags": ("a", "a")}, {"tags": ("",)}, {"tags": ("a,b",)},
    {"tags": tuple(f"t{i}" for i in range(17))}, {"tags": ["a"]}, {"job_name": "a b"},
    {"backoff_ms": -1},
])
def test_recur_validates_its_fields(kw):
    with pytest.raises(ValueError):
        recur(**kw)


def test_names_and_slots_are_validated():
    with pytest.raises(ValueError):
        Recur("", "q", 1, 1, 1000, b"")
    with pytest.raises(ValueError):
        Unrecur("a:b")
    with pytest.raises(ValueError):
        Fire("n", -1)
    with pytest.raises(ValueError):
        Definition("n", "q", 1, 1, 1000, b"", 0, 0, 0, 0, (), "now")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Recurrence(Definition.of(recur(), T0), -1, None, 0)


# ----------------------------------------------------------------- transitions


def test_recur_starts_at_the_first_slot_at_or_after_its_time():
    outcome, record = apply(None, recur(every=1000), T0 + 1, position(1))
    assert isinstance(outcome, Changed)
    assert record.first_slot == T0 // 1000 + 1 and record.next_ms == T0 + 1000
    assert record.definition.created_ms == T0 + 1 and record.fired_ms is None
    _, exact = apply(None, recur(every=1000), T0, position(1))
    assert exact.next_ms == T0  # a time on a slot: that slot is the first


def test_fire_fires_the_latest_due_slot_and_gives_its_add():
    _, record = apply(None, recur(every=1000, priority=3, max_attempts=2, max_fails=1,
                                  backoff_ms=5), T0, position(1))
    outcome = decide(record, Fire("nightly", T0 // 1000), T0 + 2500, position(2))
    assert isinstance(outcome, Changed)
    latest = T0 // 1000 + 2  # two slots missed: only the latest fires
    assert outcome.fired == latest and outcome.record.fired_ms == latest * 1000
    assert outcome.add == Add(slot_job_id("nightly", 1000, latest), "etl", 60_000, DAY, b"{}",
                              3, 2, 1, 5)
    assert outcome.record.next_ms == (latest + 1) * 1000


def test_fire_is_ignored_unless_due_new_and_allowed():
    assert decide(None, Fire("n", 1), T0, 1) == Ignored(NO_SUCH_RECURRENCE)
    _, record = apply(None, recur(every=1000), T0 + 500, position(1))
    first = T0 // 1000 + 1
    # Due by the process's clock, not yet by the broker's.
    assert decide(record, Fire("nightly", first), T0 + 999, position(2)) == Ignored(SLOT_NOT_DUE)
    # A slot before the first allowed, while none allowed is due.
    assert decide(record, Fire("nightly", first - 1), T0 + 600, position(2)) == Ignored(NO_SLOT_DUE)
    _, fired = apply(record, Fire("nightly", first), T0 + 1000, position(2))
    assert fired.fired_ms == first * 1000
    for slot in (first, first - 1):  # repeated (a crash, a timer's retry), or older
        assert decide(fired, Fire("nightly", slot), T0 + 1900, position(3)) == Ignored(FIRED_ALREADY)
    assert decide(fired, Fire("nightly", first + 1), T0 + 2000, position(2)) == Ignored(ALREADY_APPLIED)


def test_a_stale_slot_fires_the_latest_due_one():
    _, record = apply(None, recur(every=1000), T0, position(1))
    outcome = decide(record, Fire("nightly", T0 // 1000 - 50), T0 + 3200, position(2))
    assert isinstance(outcome, Changed) and outcome.fired == T0 // 1000 + 3


def test_reissuing_never_fires_a_slot_twice():
    _, record = apply(None, recur(every=1000), T0, position(1))
    _, record = apply(record, Fire("nightly", T0 // 1000), T0 + 10, position(2))
    assert record.fired_ms == T0
    # The same every, at the fired slot's own time: the next slot.
    _, again = apply(record, recur(every=1000, payload=b"new"), T0 + 20, position(3))
    assert again.first_slot == T0 // 1000 + 1 and again.fired_ms == T0
    assert again.definition.payload == b"new" and again.definition.created_ms == T0 + 20
    # Another every: its first slot at or after the command and after the fired slot.
    _, other = apply(record, recur(every=7000), T0 + 20, position(3))
    assert other.next_ms == (T0 // 7000 + 1) * 7000 > T0
    # Much later: the first slot at or after the command's time.
    _, later = apply(record, recur(every=1000), T0 + 10_500, position(3))
    assert later.next_ms == T0 + 11_000


def test_unrecur():
    assert decide(None, Unrecur("n"), T0, 1) == Rejected(NotFound())
    _, record = apply(None, recur(), T0, position(1))
    outcome, after = apply(record, Unrecur("nightly"), T0, position(2))
    assert outcome == Changed(None) and after is None
    assert decide(record, Unrecur("nightly"), T0, position(1)) == Ignored(ALREADY_APPLIED)


def test_unrecur_then_recur_starts_afresh():
    _, record = apply(None, recur(every=1000), T0, position(1))
    _, record = apply(record, Fire("nightly", T0 // 1000), T0, position(2))
    _, gone = apply(record, Unrecur("nightly"), T0, position(3))
    _, fresh = apply(gone, recur(every=1000), T0, position(4))
    assert fresh.fired_ms is None and fresh.next_ms == T0  # its job exists: Duplicate job


def test_the_timers_fire():
    _, record = apply(None, recur(every=1000), T0 + 1, position(1))
    assert due_fire(record, T0 + 999) is None
    assert due_fire(record, T0 + 5400) == Fire("nightly", T0 // 1000 + 5)


def test_tags_reach_the_slots_add_once_add_has_them():
    _, record = apply(None, recur(tags=("a", "b")), T0, position(1))
    add = record.slot_add(5)
    if "tags" in Add.__dataclass_fields__:
        assert add.tags == ("a", "b")  # type: ignore[attr-defined]
    assert add.job_id == slot_job_id("nightly", DAY, 5)


# ------------------------------------------------------------------------ codec


def test_records_round_trip():
    _, record = apply(None, recur(tags=("x",), backoff_ms=3), T0, position(1))
    assert decode_recurrence(encode_recurrence(record)) == record
    _, fired = apply(record, Fire("nightly", T0 // DAY + 1), T0 + DAY, position(2))
    assert decode_recurrence(encode_recurrence(fired)) == fired
    with pytest.raises(CodecError):
        encode_recurrence(record.definition)  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        decode_recurrence(b"\x81\xa1v\x02")


# --------------------------------------------------------- histories (properties)

EVERIES = (1000, 3000, 7000)
NAMES = ("a", "b")


@st.composite
def histories(draw):
    """A log of recurrence commands with their broker times (non-decreasing, as the
    broker stamps one partition), timers' fires among them, sometimes repeated."""
    steps = draw(st.lists(st.tuples(
        st.sampled_from(["recur", "unrecur", "fire", "fire", "fire", "stale", "wait"]),
        st.sampled_from(NAMES), st.sampled_from(EVERIES), st.integers(0, 9000),
    ), min_size=1, max_size=60))
    return steps


def fold(steps, crash_points=()):
    """Apply a history as the processor does (positions, a watermark for an absent
    record); at each crash point, apply the last few commands again, as a re-read
    tail. Returns every fire (name, every, slot, at) and the timers' checks."""
    records: dict[str, Recurrence | None] = {}
    watermark = -1
    now = T0
    log: list[tuple[object, int, int]] = []  # (command, at, position)
    fired: list[tuple[str, int, int, int, int]] = []  # (name, every, slot, at, position)
    checks: list[tuple[str, int, int | None, int | None]] = []
    crashes = set(crash_points)

    def run(command, at, pos, again=False):
        nonlocal watermark
        record = records.get(command.name)
        if record is None and pos <= watermark:
            return
        outcome, after = apply(record, command, at, pos)
        if isinstance(outcome, Changed):
            assert not again, f"a re-read tail applied {command}"
            records[command.name] = after
            if after is None:
                watermark = pos
            if outcome.fired is not None:
                fired.append((command.name, after.every_ms, outcome.fired, at, pos))
                assert outcome.add.job_id == slot_job_id(command.name, after.every_ms,
                                                         outcome.fired)
        if isinstance(command, Fire) and record is not None and not again:
            latest = latest_slot_at(record.every_ms, at)
            due = command.slot * record.every_ms <= at
            fresh = record.fired_ms is None or command.slot * record.every_ms > record.fired_ms
            allowed = latest >= record.next_slot
            checks.append((command.name, at, record.next_slot,
                           latest if due and fresh and allowed else None))

    for n, (kind, name, every, wait) in enumerate(steps):
        now += wait
        pos = position(n + 1)
        record = records.get(name)
        if kind == "recur":
            command = recur(name, every)
        elif kind == "unrecur":
            command = Unrecur(name)
        elif kind == "fire":
            if record is None:
                command = Fire(name, latest_slot_at(every, now))
            else:  # the timer's: the latest slot due by its clock (a little ahead)
                command = due_fire(record, now + 300) or Fire(name, latest_slot_at(
                    record.every_ms, now))
        elif kind == "stale":  # a fire written before a crash, or by a stale owner
            command = Fire(name, max(0, latest_slot_at(every, now) - wait // 1000))
        else:
            continue
        log.append((command, now, pos))
        run(command, now, pos)
        if n in crashes:
            for command, at, pos in log[-3:]:
                run(command, at, pos, again=True)
    return records, fired, checks


@settings(max_examples=400, deadline=None)
@given(histories(), st.sets(st.integers(0, 59), max_size=5))
def test_no_slot_fires_twice_and_the_latest_due_one_is_never_skipped(steps, crashes):
    records, fired, checks = fold(steps, crashes)
    # Within one life of a recurrence (unrecur + recur starts afresh: then its add is a
    # Duplicate job), fired due times only grow: no slot twice.
    lives: dict[str, list[int]] = {}
    unrecurred: dict[str, list[int]] = {}
    for n, (kind, name, _, _) in enumerate(steps):
        if kind == "unrecur":
            unrecurred.setdefault(name, []).append(position(n + 1))
    for name, every, slot, at, pos in fired:
        life = sum(1 for p in unrecurred.get(name, []) if p < pos)
        due = slot * every
        seen = lives.setdefault(f"{name}/{life}", [])
        assert not seen or due > seen[-1], (name, seen, due)
        seen.append(due)
        assert due <= at  # never early, by the broker's clock
    # Every fire that names a due, new slot fires the latest slot due at its time.
    fired_at = {(name, at): slot for name, _, slot, at, _ in fired}
    for name, at, _, latest in checks:
        if latest is not None:
            assert fired_at.get((name, at)) == latest


@settings(max_examples=200, deadline=None)
@given(histories())
def test_a_re_read_tail_changes_nothing(steps):
    """The whole log applied again over the final records: every command is at or
    below its record's version, or (absent) below the watermark."""
    plain = fold(steps)
    everything = fold(steps, range(len(steps)))
    assert plain[0] == everything[0] and plain[1] == everything[1]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(EVERIES), st.lists(st.integers(0, 5000), min_size=1, max_size=40))
def test_a_timer_firing_whenever_it_wakes_fires_each_due_time_once(every, waits):
    """A timer that wakes late or early and sends its fire more than once: the slots
    fired are distinct and increasing, and each is the latest due when applied."""
    _, record = apply(None, recur("r", every), T0, position(0))
    now, pos, fired = T0, 1, []
    for wait in waits:
        now += wait
        for _ in range(2):  # sent again (a retry) right away
            command = due_fire(record, now)
            if command is None:
                continue
            pos += 1
            outcome, record = apply(record, command, now, position(pos))
            if isinstance(outcome, Changed):
                assert outcome.fired == now // every
                fired.append(outcome.fired)
    assert fired == sorted(set(fired))
    if now // every >= first_slot_at(every, T0):  # the latest due slot fired by the end
        assert record.fired_ms == now // every * every


# ------------------------------------------------------------------------- step


def test_step_recurrence_stores_the_record_and_gives_the_slots_add():
    from eventq.core.followups import FollowUp
    from eventq.core.step import step_recurrence

    made = step_recurrence(None, recur(every=1000), T0, position(1))
    assert isinstance(made.outcome, Changed) and not made.follow_ups
    assert decode_recurrence(made.value) == made.record
    fired = step_recurrence(made.record, Fire("nightly", T0 // 1000 + 1), T0 + 1000, position(2))
    add = made.record.slot_add(T0 // 1000 + 1)
    assert fired.follow_ups == (FollowUp(add),)
    assert fired.follow_ups[0].key == str(add.job_id).encode()
    gone = step_recurrence(fired.record, Unrecur("nightly"), T0, position(3))
    assert gone.removes and gone.record is None and gone.value is None
    ignored = step_recurrence(fired.record, Fire("nightly", 1), T0 + 1000, position(3))
    assert ignored.record == fired.record and ignored.value is None and not ignored.follow_ups
    # What cannot be applied is contained: a broker time the record cannot hold.
    broken = step_recurrence(None, recur(), -10**13, position(1))
    assert isinstance(broken.outcome, Rejected) and broken.outcome.error.code == "SERVER-ERROR"
