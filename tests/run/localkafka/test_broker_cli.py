"""`eventq kafka start|stop|status` are idempotent and say what they did."""

from __future__ import annotations

import subprocess
import sys

import pytest

from eventq.run.localkafka import broker
from tools.servers import free_port

pytestmark = pytest.mark.kafka


def eventq(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eventq.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )


def test_start_twice_stop_and_status(tmp_path, monkeypatch):
    # A relative data dir, like `make run`'s default `var` (the JVM runs elsewhere).
    monkeypatch.chdir(tmp_path)
    flags = [
        "--data-dir", "data",
        "--kafka-port", str(free_port()),
        "--controller-port", str(free_port()),
        "--kafka-heap-mb", "384",
    ]
    status = eventq("kafka", "status", *flags)
    assert status.returncode == 3 and "not running" in status.stdout

    first = eventq("kafka", "start", *flags)
    try:
        assert first.returncode == 0, first.stderr
        assert "Kafka started on" in first.stdout

        second = eventq("kafka", "start", *flags)
        assert second.returncode == 0
        assert "already running" in second.stdout
        pid = (tmp_path / "data" / "kafka" / "broker.pid").read_text().strip()
        assert f"pid {pid}" in second.stdout
        # Exactly one broker JVM uses this config.
        jvms = subprocess.run(
            ["pgrep", "-f", f"kafka.Kafka {tmp_path}/data/kafka/server.properties"],
            capture_output=True, text=True,
        ).stdout.split()
        assert jvms == [pid]

        status = eventq("kafka", "status", *flags)
        assert status.returncode == 0 and "running" in status.stdout
        assert "answering" in status.stdout
    finally:
        stopped = eventq("kafka", "stop", *flags)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    again = eventq("kafka", "stop", *flags)
    assert again.returncode == 0 and "was not running" in again.stdout
    status = eventq("kafka", "status", *flags)
    assert status.returncode == 3


def test_a_broker_that_cannot_start_reports_why(tmp_path):
    config = broker.BrokerConfig(
        home=tmp_path,
        port=free_port(),
        controller_port=free_port(),
        heap_mb=256,
        overrides={"log.dirs": "/proc/eventq-cannot-write-here"},
    )
    with pytest.raises(broker.BrokerError) as raised:
        broker.start(config, timeout_s=60)
    assert "eventq-cannot-write-here" in str(raised.value)
    assert broker.running_pid(config) is None


def test_a_port_in_use_is_reported_before_starting(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        config = broker.BrokerConfig(
            home=tmp_path, port=busy.getsockname()[1], controller_port=free_port()
        )
        with pytest.raises(broker.BrokerError, match="already in use"):
            broker.start(config)
