"""eventq against a local broker that requires client certificates (mTLS) on top of
SASL_SSL: the one `eventq kafka start --sasl-ssl --mtls` starts (ssl.client.auth=required,
a client certificate signed by its CA printed with the other settings).

A client that does not present the certificate is refused in the TLS handshake, so each
kind of eventq's Kafka clients is shown to present it by working at all: librdkafka (the
command producer of its own, the admin clients, the preflight), aiokafka through faust
(the processor, faust's command producer, the changelog's producers), the restore and
log readers (a restart on an empty data dir, `eventq digest`), and Spark's connector
(its PEM keystore: `eventq spark enqueue --wait`, `eventq spark snapshot`). Without the
certificate settings serve is told what to set, at once.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid

import pytest
from secured_kafka import SecuredKafka, eventq, serve, topic_flags
from tls_files import make_tls_files

from eventq.client import Client
from eventq.listeners import EXIT_CANNOT_START

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

FEEDBACK_S = 15.0  # a refused certificate is said within the first probe, not after retries
CERT_VARIABLES = ("EVENTQ_KAFKA_SSL_CERTFILE", "EVENTQ_KAFKA_SSL_KEYFILE")


@pytest.fixture(scope="module")
def mtls_kafka(tmp_path_factory):
    kafka = SecuredKafka(tmp_path_factory.mktemp("mtls"), "--mtls")
    try:
        kafka.start()
        yield kafka
    finally:
        kafka.stop()


def test_kafka_start_mtls_requires_and_prints_the_client_certificate(mtls_kafka):
    security = mtls_kafka.home / "kafka" / "security"
    out = mtls_kafka.started
    assert "Kafka speaks SASL_SSL, SCRAM-SHA-512 as eventq, client certificate " in out, out
    assert f"export EVENTQ_KAFKA_SSL_CERTFILE={security / 'client.pem'}" in out, out
    assert f"export EVENTQ_KAFKA_SSL_KEYFILE={security / 'client.key'}" in out, out
    assert mtls_kafka.env["EVENTQ_KAFKA_SSL_CERTFILE"] == str(security / "client.pem")
    assert mtls_kafka.env["EVENTQ_KAFKA_SSL_KEYFILE"] == str(security / "client.key")
    properties = (mtls_kafka.home / "kafka" / "server.properties").read_text().splitlines()
    # The SASL_SSL listener's own: Kafka ignores the broker-wide one there (KIP-684).
    assert "listener.name.sasl_ssl.ssl.client.auth=required" in properties
    status = eventq("kafka", "status", *mtls_kafka.flags).stdout  # its client presents it
    assert "answering" in status and "NOT" not in status, status


def test_eventq_serves_restarts_and_reads_its_logs_with_a_client_certificate(mtls_kafka,
                                                                             tmp_path):
    process = serve(mtls_kafka, tmp_path / "server", f"mtls-{uuid.uuid4().hex[:8]}")
    process.settings["command-producer"] = "librdkafka"
    eventq("topics", "create", *topic_flags(process), env=mtls_kafka.env)
    process.start()
    try:
        with Client("127.0.0.1", process.port) as client:
            q = "mtls"
            ids = [client.add(q, b"job %d" % i) for i in range(20)]
            for _ in range(10):
                job = client.lease(q, wait_timeout_ms=5_000)
                client.complete(job.id, b"done " + job.payload)
            digest = client.digest()
    finally:
        assert process.stop() == 0, process.log_tail()
    out = eventq("digest", *topic_flags(process), env=mtls_kafka.env).stdout
    assert out.split()[0] == digest, out
    # The restore child (the settings in its environment), then faust's producer.
    shutil.rmtree(process.home / "state")
    process.settings["command-producer"] = "faust"
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


def refused_serve(kafka: SecuredKafka, home, env: dict[str, str]) -> str:
    """The log of a serve refused at its start, checked to be said at once."""
    process = serve(kafka, home, f"no-{uuid.uuid4().hex[:8]}")
    process.env = env
    began = time.monotonic()
    process.launch()
    code = process.process.wait(60)
    took_s = time.monotonic() - began
    log = process.log_tail()
    assert code == EXIT_CANNOT_START, log  # retrying would change nothing
    assert took_s < FEEDBACK_S, f"said after {took_s:.1f}s:\n{log}"
    return log


def test_without_the_client_certificate_serve_is_told_what_to_set(mtls_kafka, tmp_path):
    # The password right, no certificate: refused in the TLS handshake.
    env = {k: v for k, v in mtls_kafka.env.items() if k not in CERT_VARIABLES}
    log = refused_serve(mtls_kafka, tmp_path / "none", env)
    assert "Kafka refused eventq's client certificate at " + mtls_kafka.bootstrap in log, log
    assert "none was given" in log and "EVENTQ_KAFKA_SSL_CERTFILE" in log, log
    assert env["EVENTQ_KAFKA_SASL_PASSWORD"] not in log
    # A certificate of another CA: refused too, said as such.
    other = make_tls_files(tmp_path / "other")
    env = {**mtls_kafka.env, "EVENTQ_KAFKA_SSL_CERTFILE": other.pem("client"),
           "EVENTQ_KAFKA_SSL_KEYFILE": other.key("client")}
    log = refused_serve(mtls_kafka, tmp_path / "foreign", env)
    assert "Kafka refused eventq's client certificate at " + mtls_kafka.bootstrap in log, log
    assert "did not accept the client certificate" in log, log


@pytest.mark.spark
def test_spark_enqueues_and_snapshots_with_a_client_certificate(mtls_kafka, tmp_path):
    process = serve(mtls_kafka, tmp_path / "server", f"spk-{uuid.uuid4().hex[:8]}")
    eventq("topics", "create", *topic_flags(process), env=mtls_kafka.env)
    process.start()
    try:
        rows = tmp_path / "jobs.json"
        rows.write_text("".join(json.dumps({"n": i, "body": f"row {i}"}) + "\n"
                                for i in range(50)))
        name = "spark-mtls"
        out = eventq("spark", "enqueue", "--input", str(rows), "--format", "json",
                     "--name", name, "--key-columns", "n", "--payload-column", "body",
                     "--ttr-ms", "60000", "--ttl-ms", "600000", "--rejects",
                     str(tmp_path / "rejects"), "--wait", *topic_flags(process),
                     env=mtls_kafka.env).stdout
        assert "applied: all 50 rows are live" in out, out
        out = eventq("spark", "snapshot", "--output", str(tmp_path / "snapshot"),
                     "--output-format", "json", *topic_flags(process),
                     env=mtls_kafka.env).stdout
        jobs = [json.loads(line) for path in (tmp_path / "snapshot").rglob("*.json")
                for line in path.read_text().splitlines()]
        assert sum(1 for job in jobs if job.get("name") == name) == 50, out
    finally:
        assert process.stop() == 0, process.log_tail()
