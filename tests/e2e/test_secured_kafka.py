"""eventq against a local broker with SASL_SSL that also requires client certificates
(docs/security.md, "A secured Kafka": every Kafka client of eventq takes the same TLS
and SASL settings, so eventq runs against a secured cluster).

The broker is the one `eventq kafka start --sasl-ssl --mtls` starts (its own CA and
certificates, a SCRAM-SHA-512 user, `listener.name.sasl_ssl.ssl.client.auth=required`),
whose only client listener is SASL_SSL: a client without the password or without the
certificate is refused, so each kind of eventq's Kafka clients is shown to take the
settings it prints by working at all: librdkafka (the admin clients: topics create,
the topic check), aiokafka through faust (the processor, faust's command producer, the
changelog's transactional producers), the restore and log
readers (a restart on an empty data dir, `eventq digest`), and Spark's connector (its PEM
keystore: `eventq spark enqueue --wait`, `eventq spark snapshot`). A wrong password, a
missing or foreign certificate and a plain client are told what to fix, at once. One
broker for all (one JVM and one Spark run less than a broker per kind of security).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from eventq.client import Client
from eventq.gateway.listeners import EXIT_CANNOT_START
from support.shared import shared
from tools.servers import ServerProcess, free_port
from tools.tls_files import make_tls_files

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]
# The Spark test takes the suite's session (tests/support/shared.py), so the module runs
# with the Spark tests, in their xdist group, and its broker starts once.
SHARED_FIXTURES = ("spark",)

PARTITIONS = 2
CERT_VARIABLES = ("EVENTQ_KAFKA_SSL_CERTFILE", "EVENTQ_KAFKA_SSL_KEYFILE")


def eventq(*args: str, env: dict[str, str] | None = None, timeout_s: float = 300,
           check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "eventq.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, env={**os.environ, **(env or {})})
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


class SecuredKafka:
    """`eventq kafka start --sasl-ssl --mtls` in a data dir of its own."""

    def __init__(self, home) -> None:
        self.home = home
        self.port = free_port()
        self.security_flags = ["--sasl-ssl", "--mtls"]
        self.flags = ["--data-dir", str(home), "--kafka-port", str(self.port),
                      "--controller-port", str(free_port()), "--kafka-heap-mb", "512"]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.env: dict[str, str] = {}
        self.started = ""

    def start(self) -> None:
        self.started = eventq("kafka", "start", *self.security_flags, *self.flags).stdout
        # The settings it printed, as a file too (set -a; . client.env; set +a).
        lines = self.client_env_file.read_text().splitlines()
        self.env = dict(line.split("=", 1) for line in lines)

    @property
    def client_env_file(self):
        return self.home / "kafka" / "security" / "client.env"

    def stop(self) -> None:
        eventq("kafka", "stop", *self.flags)


def serve(kafka: SecuredKafka, home, prefix: str, **env: str) -> ServerProcess:
    process = ServerProcess(kafka.bootstrap, prefix, home, partitions=PARTITIONS)
    process.env = {**kafka.env, **env}  # the password in the environment, not on argv
    return process


def topic_flags(process: ServerProcess) -> list[str]:
    return ["--bootstrap", process.bootstrap, "--partitions", str(PARTITIONS),
            *(f for key in ("commands-topic", "jobs-topic", "app-id")
              for f in (f"--{key}", process.settings[key]))]


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory):
    kafka = SecuredKafka(tmp_path_factory.mktemp("secured"))
    try:
        kafka.start()
        yield kafka
    finally:
        kafka.stop()


def test_kafka_start_prints_what_clients_need(secured_kafka):
    security = secured_kafka.home / "kafka" / "security"
    out = secured_kafka.started
    assert "Kafka speaks SASL_SSL, SCRAM-SHA-512 as eventq, client certificate " in out, out
    password = secured_kafka.env["EVENTQ_KAFKA_SASL_PASSWORD"]
    assert password not in out  # shown as the file that holds it
    for name in ("EVENTQ_KAFKA_SECURITY_PROTOCOL=SASL_SSL", "EVENTQ_KAFKA_SSL_CAFILE=",
                 "EVENTQ_KAFKA_SASL_PASSWORD=\"$(cat "):
        assert f"export {name}" in out, out
    assert f"export EVENTQ_KAFKA_SSL_CERTFILE={security / 'client.pem'}" in out, out
    assert f"export EVENTQ_KAFKA_SSL_KEYFILE={security / 'client.key'}" in out, out
    assert secured_kafka.env["EVENTQ_KAFKA_SSL_CERTFILE"] == str(security / "client.pem")
    assert secured_kafka.env["EVENTQ_KAFKA_SSL_KEYFILE"] == str(security / "client.key")
    properties = (secured_kafka.home / "kafka" / "server.properties").read_text().splitlines()
    # The SASL_SSL listener's own: Kafka ignores the broker-wide one there (KIP-684).
    assert "listener.name.sasl_ssl.ssl.client.auth=required" in properties
    assert any(line.startswith(f"listeners=SASL_SSL://127.0.0.1:{secured_kafka.port},")
               for line in properties), properties
    status = eventq("kafka", "status", *secured_kafka.flags).stdout  # its client presents it
    assert "answering" in status and "NOT" not in status, status


def test_eventq_serves_restarts_and_reads_its_logs(secured_kafka, tmp_path):
    process = serve(secured_kafka, tmp_path / "server", f"mtls-{uuid.uuid4().hex[:8]}")
    eventq("topics", "create", *topic_flags(process), env=secured_kafka.env)
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
    out = eventq("digest", *topic_flags(process), env=secured_kafka.env).stdout
    assert out.split()[0] == digest, out
    # The restore child (the settings in its environment).
    shutil.rmtree(process.home / "state")
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


def refused_serve(kafka: SecuredKafka, home, env: dict[str, str]) -> str:
    """The log of a serve refused at its start, checked to be said at once: at the first
    answer of Kafka's, not after waiting for Kafka as for one that does not answer, and
    then the exit (retrying would change nothing). How many seconds that took is the
    machine's start of Python and a TLS handshake, printed, not asserted."""
    process = serve(kafka, home, f"no-{uuid.uuid4().hex[:8]}")
    process.env = env
    began = time.monotonic()
    process.launch()
    code = process.process.wait(120)
    print(f"refused after {time.monotonic() - began:.1f}s")
    log = process.log_tail()
    assert code == EXIT_CANNOT_START, log
    assert "does not answer" not in log and "still waiting" not in log, log
    return log


def test_a_wrong_password_is_said_at_once_with_what_to_fix(secured_kafka, tmp_path):
    env = {**secured_kafka.env, "EVENTQ_KAFKA_SASL_PASSWORD": "not-the-password"}
    log = refused_serve(secured_kafka, tmp_path / "server", env)
    assert "Kafka refused eventq's credentials at " + secured_kafka.bootstrap in log, log
    assert "EVENTQ_KAFKA_SASL_PASSWORD" in log and "not-the-password" not in log, log
    # A client that does not speak SASL_SSL is told which setting may be missing.
    done = eventq("topics", "create", "--bootstrap", secured_kafka.bootstrap, check=False)
    assert done.returncode == 1 and "--kafka-security-protocol PLAINTEXT" in done.stderr, done


def test_without_the_client_certificate_serve_is_told_what_to_set(secured_kafka, tmp_path):
    # The password right, no certificate: refused in the TLS handshake.
    env = {k: v for k, v in secured_kafka.env.items() if k not in CERT_VARIABLES}
    log = refused_serve(secured_kafka, tmp_path / "none", env)
    assert "Kafka refused eventq's client certificate at " + secured_kafka.bootstrap in log, log
    assert "none was given" in log and "EVENTQ_KAFKA_SSL_CERTFILE" in log, log
    assert env["EVENTQ_KAFKA_SASL_PASSWORD"] not in log
    # A certificate of another CA: refused too, said as such.
    other = make_tls_files(tmp_path / "other")
    env = {**secured_kafka.env, "EVENTQ_KAFKA_SSL_CERTFILE": other.pem("client"),
           "EVENTQ_KAFKA_SSL_KEYFILE": other.key("client")}
    log = refused_serve(secured_kafka, tmp_path / "foreign", env)
    assert "Kafka refused eventq's client certificate at " + secured_kafka.bootstrap in log, log
    assert "did not accept the client certificate" in log, log


@pytest.mark.spark
def test_spark_enqueues_and_snapshots(secured_kafka, tmp_path, request, monkeypatch, capsys):
    """`eventq spark` as the CLI runs it, in this process on the suite's Spark session
    (``SHARED_FIXTURES``): the connector's security options go with each read and
    write, not with the session, so a JVM of its own for each command proved nothing
    more and cost two Spark starts."""
    from eventq.spark import cli as spark_cli

    shared(request.config, "spark").get()  # the active session the CLI takes
    for variable, value in secured_kafka.env.items():
        monkeypatch.setenv(variable, value)

    def spark_command(*args: str) -> str:
        capsys.readouterr()
        code = spark_cli.main(["spark", *args])
        out = capsys.readouterr().out
        assert code == 0, out
        return out

    process = serve(secured_kafka, tmp_path / "server", f"spk-{uuid.uuid4().hex[:8]}")
    eventq("topics", "create", *topic_flags(process), env=secured_kafka.env)
    process.start()
    try:
        rows = tmp_path / "jobs.json"
        rows.write_text("".join(json.dumps({"n": i, "body": f"row {i}"}) + "\n"
                                for i in range(50)))
        name = "spark-mtls"
        out = spark_command("enqueue", "--input", str(rows), "--format", "json",
                            "--name", name, "--key-columns", "n", "--payload-column", "body",
                            "--ttr-ms", "60000", "--ttl-ms", "600000", "--rejects",
                            str(tmp_path / "rejects"), "--wait", *topic_flags(process))
        assert "applied: all 50 rows are live" in out, out
        with Client("127.0.0.1", process.port) as client:
            job = client.lease(name, wait_timeout_ms=5_000)
            assert job.payload.startswith(b"row ")
        out = spark_command("snapshot", "--output", str(tmp_path / "snapshot"),
                            "--output-format", "json", *topic_flags(process))
        jobs = [json.loads(line) for path in (tmp_path / "snapshot").rglob("*.json")
                for line in path.read_text().splitlines()]
        assert sum(1 for job in jobs if job.get("name") == name) == 50, out
    finally:
        assert process.stop() == 0, process.log_tail()

