"""`eventq up` (what `make run` runs): starts Kafka, the topics and the server; Ctrl-C
stops the server and the broker it started."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from eventq.kafka import broker
from support import free_port, raw_exchange

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(240)]


def test_up_serves_and_ctrl_c_stops_everything_it_started(tmp_path):
    port, kafka_port, controller_port = free_port(), free_port(), free_port()
    flags = ["--data-dir", str(tmp_path), "--listen-port", str(port),
             "--kafka-port", str(kafka_port), "--controller-port", str(controller_port),
             "--kafka-heap-mb", "384", "--partitions", "2", "--http-port", "127.0.0.1:0"]
    process = subprocess.Popen(
        [sys.executable, "-m", "eventq.cli", "up", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output = []
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, "eventq up exited early:\n" + "".join(output)
            output.append(line)
            if "serving the workq protocol" in line:
                break
        else:
            raise AssertionError("not serving:\n" + "".join(output))
        assert any("Kafka started" in line for line in output)
        assert any("eventq.commands: created" in line for line in output)
        job = "6ba7b810-9dad-41d1-80b4-00c04fd430c4"
        deadline = time.monotonic() + 60
        while (reply := raw_exchange(port, f"add {job} q 1000 60000 1\r\nx\r\n".encode())) != b"+OK\r\n":
            assert time.monotonic() < deadline, reply
            time.sleep(0.5)
        # `eventq client` talks to it (stdin lines get \r\n).
        typed = subprocess.run(
            [sys.executable, "-m", "eventq.cli", "client", "--listen-port", str(port)],
            input=f"inspect job {job}\n", capture_output=True, text=True, timeout=30,
        )
        assert "payload x" in typed.stdout and "state 0" in typed.stdout
        process.send_signal(signal.SIGINT)  # Ctrl-C
        rest, _ = process.communicate(timeout=90)
        output.append(rest)
    finally:
        if process.poll() is None:
            process.kill()
    text = "".join(output)
    assert process.returncode == 0, text
    assert "Kafka stopped" in text
    assert "eventq dashboard on http://127.0.0.1:" in text  # what `make run` shows
    config = broker.BrokerConfig(home=tmp_path / "kafka", port=kafka_port,
                                 controller_port=controller_port)
    assert broker.running_pid(config) is None
