"""`eventq up` (what `make run` runs): starts Kafka, the topics and the server; Ctrl-C
stops the server and the broker it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from eventq.run.localkafka import broker
from tools.ports import consecutive_free_ports
from tools.servers import free_port, raw_exchange
from tools.up_run import serve_pids

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(480)]


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
            # The dashboard's line comes a moment after the gateway's: wait for both, or
            # a Ctrl-C on a loaded machine could stop the server before it printed it.
            text = "".join(output)
            if "serving the workq protocol" in text and "eventq dashboard on" in text:
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


def reply_to_inspect(port: int) -> bytes:
    try:
        return raw_exchange(port, b"inspect queues 0 1\r\n", timeout_s=5.0)
    except OSError:
        return b""


# An add that comes during a rebalance waits for it, then up to the write deadline (5 s)
# for its apply: a loaded CI machine took over 10 s (a restarted process that served
# its partition fetched nothing for 5 s), which is slow, not silence.
ADD_REPLY_TIMEOUT_S = 30.0


def add_a_job(port: int) -> bytes:
    try:
        return raw_exchange(port, f"add {uuid.uuid4()} q 1000 60000 1\r\nx\r\n".encode(),
                            timeout_s=ADD_REPLY_TIMEOUT_S)
    except OSError:
        return b""


def test_up_restarts_a_process_killed_with_kill_9_while_the_other_serves(tmp_path):
    first = consecutive_free_ports(2)
    kafka_port, controller_port = free_port(), free_port()
    flags = ["--data-dir", str(tmp_path), "--listen-port", str(first),
             "--kafka-port", str(kafka_port), "--controller-port", str(controller_port),
             "--kafka-heap-mb", "384", "--partitions", "2", "--http-port", "127.0.0.1:0",
             "--processes", "2", "--brokers", "1"]
    log_path = tmp_path / "up.log"
    with open(log_path, "wb") as log:  # a file: a pipe nobody reads would block the children
        process = subprocess.Popen([sys.executable, "-m", "eventq.cli", "up", *flags],
                                   stdout=log, stderr=subprocess.STDOUT)
    survivor, victim = first, first + 1

    def output() -> str:
        return log_path.read_text(errors="replace")

    try:
        deadline = time.monotonic() + 180
        while not all(reply_to_inspect(p).startswith(b"+OK") for p in (survivor, victim)):
            assert process.poll() is None, "eventq up exited early:\n" + output()
            assert time.monotonic() < deadline, "not serving on both ports:\n" + output()
            time.sleep(0.5)
        [killed] = serve_pids(process.pid, victim)
        os.kill(killed, signal.SIGKILL)
        killed_at = time.monotonic()
        survivor_adds = []
        while True:  # the other keeps serving while the killed one comes back
            survivor_adds.append(add_a_job(survivor))
            # Adds of jobs in the killed one's partitions get "-SERVER-ERROR ... retry".
            assert survivor_adds[-1][:1] in (b"+", b"-"), (survivor_adds, output())
            restarted = serve_pids(process.pid, victim)
            if restarted and restarted != [killed] and reply_to_inspect(victim).startswith(b"+OK"):
                break
            assert time.monotonic() - killed_at < 150, "not serving again:\n" + output()
            time.sleep(0.5)
        serving_again_s = time.monotonic() - killed_at
        added = sum(reply == b"+OK\r\n" for reply in survivor_adds)
        print(f"kill -9 of an eventq process: restarted and serving again after "
              f"{serving_again_s:.1f}s; the other added {added} of {len(survivor_adds)} jobs "
              "meanwhile")
        assert added > 0, survivor_adds
        assert all(reply_to_inspect(p).startswith(b"+OK") for p in (survivor, victim))
        text = output()
        assert (f"eventq: eventq process on port {victim} (pid {killed}) was killed by "
                "SIGKILL after ") in text, text
        assert "; restarting it in 1s, at " in text, text
        assert f"eventq process on port {victim} (pid {restarted[0]}) restarted" in text, text
        process.send_signal(signal.SIGINT)  # Ctrl-C
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = output()
    assert process.returncode == 0, text
    assert "Kafka stopped" in text
    assert serve_pids(process.pid, survivor) == serve_pids(process.pid, victim) == []
    config = broker.BrokerConfig(home=tmp_path / "kafka", port=kafka_port,
                                 controller_port=controller_port)
    assert broker.running_pid(config) is None
