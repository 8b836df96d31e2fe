"""eventq against a local broker with SASL_SSL (spec/security.md: "eventq's Kafka
clients take the standard security settings (TLS and SASL) through settings, so eventq
runs against a secured cluster").

The broker is the one `eventq kafka start --sasl-ssl` starts (its own certificates, a
SCRAM-SHA-512 user), whose only client listener is SASL_SSL, so every Kafka client of
eventq must take the settings it prints: faust's (the processor), the command producer
(both kinds), the changelog's transactional producers, the restore and the log readers
(a restart on an empty data dir, `eventq digest`), the admin clients (topics create,
the topic check), and Spark's connector (`eventq spark enqueue --wait`, `eventq spark
snapshot`). A wrong password and a plain client are told what to fix, at once.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid

import pytest
from secured_kafka import SecuredKafka, eventq, serve, topic_flags

from eventq.client import Client
from eventq.listeners import EXIT_CANNOT_START

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

FEEDBACK_S = 15.0  # a refused login is said within the first probe, not after retries


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory):
    kafka = SecuredKafka(tmp_path_factory.mktemp("secured"))
    try:
        kafka.start()
        yield kafka
    finally:
        kafka.stop()


def test_kafka_start_sasl_ssl_prints_what_clients_need(secured_kafka):
    out = secured_kafka.started
    assert "Kafka speaks SASL_SSL, SCRAM-SHA-512 as eventq" in out, out
    password = secured_kafka.env["EVENTQ_KAFKA_SASL_PASSWORD"]
    assert password not in out  # shown as the file that holds it
    for name in ("EVENTQ_KAFKA_SECURITY_PROTOCOL=SASL_SSL", "EVENTQ_KAFKA_SSL_CAFILE=",
                 "EVENTQ_KAFKA_SASL_PASSWORD=\"$(cat "):
        assert f"export {name}" in out, out
    properties = (secured_kafka.home / "kafka" / "server.properties").read_text()
    assert f"listeners=SASL_SSL://127.0.0.1:{secured_kafka.port}," in properties
    status = eventq("kafka", "status", *secured_kafka.flags).stdout
    assert "answering" in status and "NOT" not in status, status


def test_eventq_serves_restarts_and_reads_its_logs_over_sasl_ssl(secured_kafka, tmp_path):
    process = serve(secured_kafka, tmp_path / "server", f"sec-{uuid.uuid4().hex[:8]}")
    process.settings["command-producer"] = "librdkafka"  # the command producer of its own
    eventq("topics", "create", *topic_flags(process), env=secured_kafka.env)
    process.start()
    try:
        with Client("127.0.0.1", process.port) as client:
            q = "secured"
            ids = [client.add(q, b"job %d" % i) for i in range(20)]
            for _ in range(10):
                job = client.lease(q, wait_timeout_ms=5_000)
                client.complete(job.id, b"done " + job.payload)
            digest = client.digest()
    finally:
        assert process.stop() == 0, process.log_tail()
    # The log readers: the state log's digest as the server had it.
    out = eventq("digest", *topic_flags(process), env=secured_kafka.env).stdout
    assert out.split()[0] == digest, out
    # A restart on an empty data dir restores its tables from the state log (the restore
    # child, handed the settings in its environment), then faust resumes the logs.
    shutil.rmtree(process.home / "state")
    process.settings["command-producer"] = "faust"  # faust's producer writes commands
    process.start()
    try:
        with Client("127.0.0.1", process.port) as client:
            assert client.digest() == digest
            assert client.result(ids[0]).data == b"done job 0"
            job = client.lease(q, wait_timeout_ms=5_000)
            client.complete(job.id, b"after the restart")
    finally:
        assert process.stop() == 0, process.log_tail()
    log = process.log_path.read_text(errors="replace")
    assert "restored" in log and "state records" in log, process.log_tail()
    assert secured_kafka.env["EVENTQ_KAFKA_SASL_PASSWORD"] not in log


def test_a_wrong_password_is_said_at_once_with_what_to_fix(secured_kafka, tmp_path):
    process = serve(secured_kafka, tmp_path / "server", f"bad-{uuid.uuid4().hex[:8]}",
                    EVENTQ_KAFKA_SASL_PASSWORD="not-the-password")
    began = time.monotonic()
    process.launch()
    code = process.process.wait(60)
    took_s = time.monotonic() - began
    log = process.log_tail()
    assert code == EXIT_CANNOT_START, log  # retrying would change nothing
    assert took_s < FEEDBACK_S, f"said after {took_s:.1f}s:\n{log}"
    assert "Kafka refused eventq's credentials at " + secured_kafka.bootstrap in log, log
    assert "EVENTQ_KAFKA_SASL_PASSWORD" in log and "not-the-password" not in log, log
    # A client that does not speak SASL_SSL is told which setting may be missing.
    done = eventq("topics", "create", "--bootstrap", secured_kafka.bootstrap, check=False)
    assert done.returncode == 1 and "--kafka-security-protocol PLAINTEXT" in done.stderr, done


@pytest.mark.spark
def test_spark_enqueues_and_snapshots_over_sasl_ssl(secured_kafka, tmp_path):
    process = serve(secured_kafka, tmp_path / "server", f"spk-{uuid.uuid4().hex[:8]}")
    eventq("topics", "create", *topic_flags(process), env=secured_kafka.env)
    process.start()
    try:
        rows = tmp_path / "jobs.json"
        rows.write_text("".join(json.dumps({"n": i, "body": f"row {i}"}) + "\n"
                                for i in range(50)))
        name = "spark-secured"
        out = eventq("spark", "enqueue", "--input", str(rows), "--format", "json",
                     "--name", name, "--key-columns", "n", "--payload-column", "body",
                     "--ttr-ms", "60000", "--ttl-ms", "600000", "--rejects",
                     str(tmp_path / "rejects"), "--wait", *topic_flags(process),
                     env=secured_kafka.env).stdout
        assert "applied: all 50 rows are live" in out, out
        with Client("127.0.0.1", process.port) as client:
            job = client.lease(name, wait_timeout_ms=5_000)
            assert job.payload.startswith(b"row ")
        out = eventq("spark", "snapshot", "--output", str(tmp_path / "snapshot"),
                     "--output-format", "json", *topic_flags(process),
                     env=secured_kafka.env).stdout
        jobs = [json.loads(line) for path in (tmp_path / "snapshot").rglob("*.json")
                for line in path.read_text().splitlines()]
        assert sum(1 for job in jobs if job.get("name") == name) == 50, out
    finally:
        assert process.stop() == 0, process.log_tail()
