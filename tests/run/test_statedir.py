"""Who owns a data dir's state, and what a crashed owner leaves behind."""

from __future__ import annotations

import subprocess
import sys

import pytest

from eventq.run import statedir
from eventq.run.replay import rebuild_from_state_log


@pytest.fixture
def live_pid():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield sleeper.pid
    sleeper.kill()
    sleeper.wait()


def test_a_live_server_keeps_others_out(tmp_path, live_pid):
    (tmp_path / statedir.RUNNING_MARKER).write_text(f"{live_pid}\n")
    assert statedir.running_pid(tmp_path) == live_pid
    with pytest.raises(statedir.StateDirInUse, match=str(live_pid)):
        statedir.claim(tmp_path)
    with pytest.raises(statedir.StateDirInUse):
        rebuild_from_state_log("127.0.0.1:1", "jobs", tmp_path)  # refused before any I/O


def test_a_dead_owner_means_a_crash_and_its_tables_are_discarded(tmp_path):
    tables = tmp_path / "v1" / "tables" / "jobs-0.db"
    tables.mkdir(parents=True)
    (tmp_path / statedir.RUNNING_MARKER).write_text("999999999\n")  # no such process
    assert statedir.running_pid(tmp_path) is None
    assert statedir.claim(tmp_path) is True
    assert not tables.exists()
    statedir.release(tmp_path)
    assert statedir.claim(tmp_path) is False  # a clean stop leaves nothing to discard


def test_cli_replay_refuses_a_data_dir_in_use(tmp_path, live_pid):
    state = tmp_path / "state"
    state.mkdir()
    (state / statedir.RUNNING_MARKER).write_text(f"{live_pid}\n")
    done = subprocess.run(
        [sys.executable, "-m", "eventq.cli", "replay", "--data-dir", str(tmp_path),
         "--bootstrap", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1
    assert f"pid {live_pid}" in done.stderr and "stop it first" in done.stderr
