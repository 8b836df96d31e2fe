"""TLS and mTLS on a live server (docs/security.md, "TLS"): clients that trust its CA
talk to it; a client with the wrong CA, a plain one, and under mTLS one without a
certificate, with one from another CA or with an expired one are refused, each with a
log line that says why; two processes with TLS, mTLS and tokens still forward to each
other."""

from __future__ import annotations

import os
import re
import socket
import ssl
import time

import pytest

from eventq.client import Client, ConnectionLost, tls_context
from tools.tls_files import make_tls_files

pytestmark = [pytest.mark.kafka]

ADMIN = "adm-Tls7"
APP = "app-Tls7"  # producer,worker,reader: a client, forwarded for by the peers


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def start(kafka_bootstrap, home, files, prefix: str, **settings):
    from tools.servers import ServerProcess

    process = ServerProcess(kafka_bootstrap, prefix, home, tls_cert=files.pem("server"),
                            tls_key=files.key("server"), **settings)
    process.ready_tls = tls_context(files.pem("ca"), files.pem("client"), files.key("client"))
    return process


@pytest.fixture(scope="module")
def tls_server(kafka_bootstrap, tmp_path_factory, files):
    process = start(kafka_bootstrap, tmp_path_factory.mktemp("tls-server"), files,
                    f"m{os.getpid()}-tls")
    process.create_topics()
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


@pytest.fixture(scope="module")
def mtls_server(kafka_bootstrap, tmp_path_factory, files):
    process = start(kafka_bootstrap, tmp_path_factory.mktemp("mtls-server"), files,
                    f"m{os.getpid()}-mtls", tls_client_ca=files.pem("ca"))
    process.create_topics()
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


def refusals(process, since: int) -> list[str]:
    text = process.log_path.read_text(errors="replace")[since:]
    return re.findall(r"refused a TLS connection: (.*)", text)


def until_refused(process, since: int) -> str:
    deadline = time.monotonic() + 10
    while not (found := refusals(process, since)):
        assert time.monotonic() < deadline, process.log_tail()
        time.sleep(0.1)
    return found[-1]


def log_size(process) -> int:
    return len(process.log_path.read_text(errors="replace"))


def roundtrip(client: Client) -> None:
    q = f"tls-{time.monotonic_ns()}"
    job_id = client.add(q, b"over tls")
    job = client.lease(q, wait_timeout_ms=5_000)
    assert job.id == job_id and job.payload == b"over tls"
    client.complete(job.id, b"ok")
    assert client.result(job_id).data == b"ok"


def test_a_client_that_trusts_the_ca_is_served(tls_server, files):
    with Client("127.0.0.1", tls_server.port, tls=tls_context(files.pem("ca"))) as client:
        roundtrip(client)


def test_a_client_with_the_wrong_ca_is_refused_and_the_server_says_why(tls_server, files):
    since = log_size(tls_server)
    with pytest.raises(ssl.SSLCertVerificationError):
        with Client("127.0.0.1", tls_server.port, connect_timeout_s=2,
                    tls=tls_context(files.pem("other-ca"))) as client:
            client.inspect_queues(0, 1)
    assert "unknown ca" in until_refused(tls_server, since)


def test_a_plain_client_gets_nothing(tls_server):
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=20) as sock:
        sock.sendall(b"inspect server\r\n")
        assert sock.recv(100) == b""  # closed, nothing answered


def test_mtls_serves_a_client_with_a_certificate_from_its_ca(mtls_server, files):
    tls = tls_context(files.pem("ca"), files.pem("client"), files.key("client"))
    with Client("127.0.0.1", mtls_server.port, tls=tls) as client:
        roundtrip(client)


@pytest.mark.parametrize(("certificate", "said"), [
    (None, "certificate"),  # none at all
    ("stranger", "certificate verify failed"),  # from another CA
    ("expired", "certificate has expired"),
])
def test_mtls_refuses_a_client_without_a_good_certificate(mtls_server, files, certificate, said):
    since = log_size(mtls_server)
    tls = tls_context(files.pem("ca"), *(() if certificate is None else
                                         (files.pem(certificate), files.key(certificate))))
    # Refused in the handshake, or (TLS 1.3: the client's side of it ends first) on the
    # first read: the connection is then lost.
    with pytest.raises((ssl.SSLError, ConnectionError, ConnectionLost)):
        with Client("127.0.0.1", mtls_server.port, connect_timeout_s=2, timeout_s=5,
                    tls=tls) as client:
            client.inspect_queues(0, 1)
    assert said in until_refused(mtls_server, since)


def test_the_dashboard_speaks_https_and_requires_client_certificates_too(mtls_server, files):
    """With --tls-client-ca the dashboard's port asks for a client certificate as the
    gateway does (one rule for everything the process serves)."""
    import urllib.error
    import urllib.request

    url = mtls_server.http_url() + "metrics"
    assert url.startswith("https://")
    tls = tls_context(files.pem("ca"), files.pem("client"), files.key("client"))
    with urllib.request.urlopen(url, context=tls, timeout=30) as response:
        assert response.status == 200 and b"eventq_serving" in response.read()
    since = log_size(mtls_server)
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        urllib.request.urlopen(url, context=tls_context(files.pem("ca")), timeout=30).read()
    assert "certificate" in until_refused(mtls_server, since)


def test_two_processes_with_mtls_and_tokens_still_forward(kafka_bootstrap, tmp_path, files):
    from tools.servers import check_forwarding, start_together

    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ADMIN} admin\n")
    prefix = f"m{os.getpid()}-tls2"
    processes = [start(kafka_bootstrap, tmp_path / f"p{i}", files, prefix,
                       tls_client_ca=files.pem("ca"), tokens_file=str(tokens))
                 for i in range(2)]
    for process in processes:
        process.ready_auth = b"auth %s\r\n" % ADMIN.encode()
    processes[0].create_topics()
    start_together(processes)
    tls = tls_context(files.pem("ca"), files.pem("client"), files.key("client"))
    check_forwarding(processes, lambda i: Client("127.0.0.1", processes[i].port, tls=tls,
                                                 token=ADMIN), "tls-two")
    logs = "".join(p.log_path.read_text(errors="replace") for p in processes)
    assert "refused a TLS connection" not in logs


FAILOVER_S = 90.0  # a bound on the survivors taking the killed process's partitions


def test_three_processes_with_tls_and_tokens_forward_and_fail_over(kafka_bootstrap, tmp_path,
                                                                    files):
    """Three processes with one tokens file and one CA (mTLS), clients over TLS
    with a non-admin token. Requests for jobs another process owns are forwarded over
    the TLS peer links (as admin, for the client); after kill -9 of one process the
    others serve its partitions, and every acknowledged job is read back through a
    survivor, those completed still completed."""
    from tools.servers import EventqCluster

    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ADMIN} admin\n{APP} producer,worker,reader\n")
    tls = tls_context(files.pem("ca"), files.pem("client"), files.key("client"))
    cluster = EventqCluster(
        kafka_bootstrap, f"m{os.getpid()}-tls3", tmp_path, replication_factor=1,
        ready_auth=b"auth %s\r\n" % ADMIN.encode(), ready_tls=tls,
        tls_cert=files.pem("server"), tls_key=files.key("server"),
        tls_client_ca=files.pem("ca"), tokens_file=str(tokens),
    ).start()

    def client(index: int) -> Client:
        return Client("127.0.0.1", cluster[index].port, tls=tls, token=APP)

    try:
        q = f"tls3-{time.monotonic_ns()}"
        with client(0) as first, client(1) as second:
            ids = [first.add(q, b"%d" % n) for n in range(24)]  # on all three's partitions
            completed = set()
            for _ in range(8):  # leased through the second, from every process
                job = second.lease(q, wait_timeout_ms=5_000)
                second.complete(job.id, b"ok")
                completed.add(job.id)
        cluster[2].kill()
        deadline = time.monotonic() + FAILOVER_S
        while not cluster[0].probe(b"inspect digest\r\n").startswith(b"+OK"):
            assert time.monotonic() < deadline, cluster[0].log_tail()
            time.sleep(0.2)
        with client(1) as survivor, client(0) as other:
            for job_id in ids:
                info = survivor.inspect_job(job_id)
                assert info.state == ("completed" if job_id in completed else "new"), info
            # The killed process's partitions take writes again, through either survivor.
            more = [survivor.add(q, b"after %d" % n) for n in range(12)]
            assert {other.inspect_job(job_id).id for job_id in more} == set(more)
    finally:
        codes = cluster.stop()
    assert codes[:2] == [0, 0], [p.log_tail() for p in cluster.processes]
    logs = "".join(p.log_path.read_text(errors="replace") for p in cluster.processes)
    assert sum(int(n) for n in re.findall(r"(\d+) requests forwarded", logs)) > 0, logs[-3000:]
    assert "refused a TLS connection" not in logs
    for token in (ADMIN, APP):
        assert token not in logs
