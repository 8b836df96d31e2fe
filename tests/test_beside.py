"""The chain of works beside the suite as xdist's workers see it (tests/support/beside.py): what
the chain posts on its board is what a worker's test reads back, ends included."""

from __future__ import annotations

import subprocess

import pytest

from support.beside import Chain, Watched, posted, start


def test_a_work_posted_on_the_board_is_read_back_with_its_exit_status(tmp_path):
    board = tmp_path / "board"
    board.mkdir()
    Chain([("first", lambda: start(tmp_path / "first", ["-c", "print('hi'); exit(3)"])),
           ("second", lambda: start(tmp_path / "second", ["-c", "exit(0)"]))], board=board)

    first = posted(board, "first")
    assert first.wait(60) == 3
    assert first.output_tail() == "hi\n"
    assert first.directory == tmp_path / "first"
    assert posted(board, "second").wait(60) == 0  # it starts once the first has ended


def test_a_work_that_cannot_start_is_told_to_its_test(tmp_path):
    def broken():
        raise OSError("no such program")

    Chain([("broken", broken)], board=tmp_path)
    with pytest.raises(AssertionError, match="did not start: OSError..no such program"):
        posted(tmp_path, "broken")


def test_a_watched_process_that_has_not_ended_times_out_and_can_be_killed(tmp_path):
    process = subprocess.Popen(["sleep", "60"])
    watched = Watched(process.pid, tmp_path / "sleep.ended")
    assert watched.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        watched.wait(timeout=0.2)
    watched.kill()
    assert process.wait(10) == -9
    (tmp_path / "sleep.ended").write_text("-9")
    assert watched.wait(timeout=1) == -9
