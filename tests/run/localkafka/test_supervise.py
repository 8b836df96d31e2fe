"""`eventq kafka start --brokers 3` leaves a supervisor that restarts a node killed with
kill -9; `eventq kafka stop` stops the supervisor, then the nodes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventq.run.localkafka import broker
from eventq.run.localkafka.supervise import supervisor_log_file, supervisor_pid
from eventq.settings import Settings
from tools.ports import consecutive_free_ports

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(420)]

NODE_BACK_TIMEOUT_S = 120.0  # the restart itself is ~1 s; a JVM starts slowly on 2 busy cores


def eventq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eventq.cli", *args],
                          capture_output=True, text=True, timeout=240)


def wait_until(condition, timeout_s: float, what: str) -> float:
    """Seconds until ``condition()`` held; an AssertionError saying ``what`` after
    ``timeout_s``."""
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < timeout_s, f"{what}: not within {timeout_s:.0f}s"
        time.sleep(0.2)
    return time.monotonic() - began


def process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def test_a_node_killed_with_kill_9_is_restarted_and_stop_stops_it_all(tmp_path):
    first_port = consecutive_free_ports(6)
    flags = ["--data-dir", str(tmp_path), "--brokers", "3", "--kafka-port", str(first_port),
             "--controller-port", str(first_port + 1), "--kafka-heap-mb", "384"]
    settings = Settings(data_dir=tmp_path, brokers=3, kafka_port=first_port,
                        controller_port=first_port + 1)
    nodes = broker.local_nodes(settings)
    try:
        started = eventq("kafka", "start", *flags)
        assert started.returncode == 0, started.stdout + started.stderr
        supervisor = supervisor_pid(settings)
        assert supervisor is not None, started.stdout
        assert f"Kafka supervisor started (pid {supervisor})" in started.stdout
        assert supervisor_log_file(settings).parent == tmp_path / "kafka"
        pids = [broker.running_pid(config) for config in nodes]
        assert None not in pids

        again = eventq("kafka", "start", *flags)  # idempotent: starts nothing twice
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.count("already running") == 4, again.stdout
        assert f"Kafka supervisor already running (pid {supervisor})" in again.stdout
        assert [broker.running_pid(config) for config in nodes] == pids
        status = eventq("kafka", "status", *flags)
        assert status.returncode == 0, status.stdout
        assert f"Kafka supervisor is running (pid {supervisor})" in status.stdout

        victim = nodes[1]
        os.kill(pids[1], signal.SIGKILL)
        restarted_s = wait_until(
            lambda: broker.running_pid(victim) not in (None, pids[1]),
            NODE_BACK_TIMEOUT_S, "the killed node's JVM started again")
        answers_s = restarted_s + wait_until(
            lambda: broker.broker_answers(victim.bootstrap, 1.0),
            NODE_BACK_TIMEOUT_S, "the restarted node answers")
        print(f"kill -9 of a node: JVM started again after {restarted_s:.1f}s, "
              f"answering after {answers_s:.1f}s")
        log = supervisor_log_file(settings).read_text()
        assert f"Kafka node 2 on {victim.bootstrap} (pid {pids[1]}) is gone" in log, log
        assert "restarting it in 1s" in log and "restarted" in log, log
        assert [broker.running_pid(config) for config in (nodes[0], nodes[2])] == [
            pids[0], pids[2]]
    finally:
        stopped = eventq("kafka", "stop", *flags)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    lines = stopped.stdout.splitlines()
    assert lines[0] == f"Kafka supervisor (pid {supervisor}) stopped", stopped.stdout
    assert sum("stopped" in line for line in lines[1:]) == 3, stopped.stdout
    assert process_gone(supervisor)
    assert supervisor_pid(settings) is None
    assert all(broker.running_pid(config) is None for config in nodes)
    status = eventq("kafka", "status", *flags)
    assert status.returncode == 3 and "Kafka supervisor is not running" in status.stdout
