"""The catch-up watch: a partition behind its target that applies nothing for the stall
time is read again from the record after the last one applied (streams/catch_up.py)."""

from streams.catch_up import CatchUpWatch


def test_a_moving_catch_up_is_left_alone():
    watch = CatchUpWatch(stall_s=10)
    for second in range(60):
        assert watch.stalled({0: second, 1: 2 * second}, float(second)) == {}


def test_a_stalled_partition_is_read_again_from_after_its_last_applied_record():
    watch = CatchUpWatch(stall_s=10)
    assert watch.stalled({0: 150, 1: 150}, 0.0) == {}
    assert watch.stalled({0: 150, 1: 151}, 9.9) == {}
    assert watch.stalled({0: 150, 1: 151}, 10.0) == {0: 151}
    # once more only after another whole stall, and never for one that moved since
    assert watch.stalled({0: 150, 1: 151}, 15.0) == {}
    assert watch.stalled({0: 150, 1: 151}, 19.95) == {1: 152}
    assert watch.stalled({0: 150, 1: 151}, 20.0) == {0: 151}


def test_nothing_applied_yet_reads_from_the_first_offset():
    assert CatchUpWatch(stall_s=1).stalled({3: -1}, 0.0) == {}
    watch = CatchUpWatch(stall_s=1)
    watch.stalled({3: -1}, 0.0)
    assert watch.stalled({3: -1}, 1.0) == {3: 0}


def test_a_partition_that_caught_up_is_forgotten():
    watch = CatchUpWatch(stall_s=1)
    watch.stalled({0: 5, 1: 5}, 0.0)
    assert watch.stalled({1: 5}, 0.5) == {}
    assert watch.stalled({0: 5, 1: 5}, 1.0) == {1: 6}  # 0 starts over: seen again now
