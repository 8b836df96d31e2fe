"""Helpers shared by tests (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import socket

from eventq.run.localkafka import broker

# Fast-test tuning of the throwaway broker: compaction and retention
# checks run often, and group joins do not wait for more members.
TEST_BROKER_TUNING = {
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "1000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "2",
    "log.segment.delete.delay.ms": "500",
}


def cpu_s(pid: int) -> float:
    """CPU time (user + system) a process has used so far, seconds."""
    import os
    from pathlib import Path

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of a process, MiB (the benchmarks report the server's)."""
    from pathlib import Path

    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free now and never handed out before by this process: the kernel may
    give a just-closed port again, and two of one test's ports were once the same
    (test_up: Kafka and the gateway on 38389)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def test_broker_config(home, **overrides) -> broker.BrokerConfig:
    """A broker on free loopback ports in ``home``, tuned for tests."""
    return broker.BrokerConfig(
        home=home,
        port=free_port(),
        controller_port=free_port(),
        heap_mb=512,
        overrides={**TEST_BROKER_TUNING, **overrides},
    )


test_broker_config.__test__ = False  # a helper, not a test


class ServerProcess:
    """A real `eventq serve` process against a real broker, on its own topics and ports."""

    def __init__(self, bootstrap: str, prefix: str, home, partitions: int = 4,
                 source=None, **settings):
        import os

        self.source = source  # another checkout's code to run (benchmarks: before/after)
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.home = home
        self.port = free_port()
        self.partitions = partitions
        self.settings = {
            "bootstrap": bootstrap,
            "commands-topic": f"{prefix}.commands",
            "jobs-topic": f"{prefix}.jobs",
            "app-id": f"{prefix}-app",
            "data-dir": str(home),
            "listen-port": str(self.port),
            "partitions": str(partitions),
            # Any free port: many servers run at once (code older than the flag: none).
            **({"http-port": "127.0.0.1:0"} if source is None else {}),
            **{k.replace("_", "-"): str(v) for k, v in settings.items()},
        }
        self.process = None
        self.log_path = home / f"server-{os.getpid()}.log"
        self.starts = 0
        # Sent before a readiness probe to a server with tokens (docs/security.md, "Fail
        # closed"), and the TLS context of the probe of a server that speaks TLS.
        self.ready_auth = b""
        self.ready_tls = None
        self.env: dict[str, str] = {}  # EVENTQ_* variables of its own (a secured Kafka's)

    @property
    def flags(self) -> list[str]:
        return [part for key, value in self.settings.items() for part in (f"--{key}", value)]

    def create_topics(self, replication_factor: int = 1) -> None:
        from eventq.kafka.topics import TopicNames, ensure_topics, eventq_topics

        names = TopicNames(self.settings["commands-topic"], self.settings["jobs-topic"],
                           self.settings.get("bulk-topic", ""))
        specs = eventq_topics(names, self.partitions, replication_factor)
        reports = ensure_topics(self.bootstrap, specs)
        assert all(r.ok for r in reports), [r.describe() for r in reports]

    def start(self, timeout_s: float = 90.0) -> "ServerProcess":
        import time

        self.launch()
        self.wait_ready(time.monotonic() + timeout_s)
        return self

    def wait_ready(self, deadline: float) -> None:
        """Until it serves (``ready``), or an AssertionError by ``deadline`` (monotonic)
        or as soon as the process exits."""
        import time

        while not self.ready():
            if self.process.poll() is not None:
                raise AssertionError(f"eventq serve exited:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"eventq serve not ready in time:\n{self.log_tail()}")
            time.sleep(0.2)

    def launch(self) -> None:
        """Start the process and return at once (``start`` waits until it serves)."""
        import subprocess
        import sys

        self.home.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n===== start {self.starts} =====\n".encode())
        log.flush()
        import os

        env = {**os.environ, **self.env}
        if self.source is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(self.source), *filter(None, [env.get("PYTHONPATH")])]
            )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "eventq.cli", "serve", *self.flags],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            cwd=self.source,
        )

    def http_url(self) -> str:
        """The dashboard's base URL of the running start, from its log line (the
        server listens on any free port)."""
        import re

        text = self.log_path.read_text(errors="replace")
        text = text[text.rfind(f"===== start {self.starts} ====="):]
        found = re.search(r"eventq dashboard on (https?://\S+/) ", text)
        assert found, f"no dashboard line in the log:\n{self.log_tail()}"
        return found.group(1)

    def ready(self) -> bool:
        """True once the server answers a request that needs recovered state."""
        try:
            reply = self.probe(b"inspect queues 0 1\r\n", timeout_s=2.0)
        except OSError:
            return False
        return reply.startswith(b"+OK")

    def probe(self, request: bytes, timeout_s: float = 5.0) -> bytes:
        """``request``'s first reply line on a new connection, after ``ready_auth``."""
        lines = 2 if self.ready_auth else 1
        reply = raw_exchange(self.port, self.ready_auth + request, timeout_s=timeout_s,
                             until=lambda data: data.count(b"\r\n") >= lines,
                             tls=self.ready_tls)
        return reply.split(b"\r\n", lines - 1)[-1] if self.ready_auth else reply

    def stop(self, timeout_s: float = 60.0) -> int | None:
        import signal
        import subprocess

        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            self.process.kill()
            return self.process.wait(10)

    def dump_stacks(self) -> None:
        """A server that hangs leaves its asyncio tasks (SIGUSR1: mode's `cry`) and every
        thread's stack (py-spy) in its log."""
        import shutil
        import signal
        import subprocess
        import sys
        import time
        from pathlib import Path

        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        with open(self.log_path, "ab") as log:
            log.write(b"\n===== hung: asyncio tasks, then py-spy dump =====\n")
            log.flush()
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(3)
            try:
                subprocess.run([py_spy, "dump", "--pid", str(self.process.pid)],
                               stdout=log, stderr=subprocess.STDOUT, timeout=30)
            except (OSError, subprocess.SubprocessError) as error:
                log.write(f"py-spy failed: {error}\n".encode())

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def started_with_tokens(kafka_bootstrap: str, name: str, directory, tokens_text: str,
                        admin: str) -> ServerProcess:
    """A started server whose tokens file (in ``directory``) holds ``tokens_text``; its
    readiness checks authenticate with ``admin`` (the tokens tests, tests/e2e)."""
    tokens_file = directory / "tokens"
    tokens_file.write_text(tokens_text)
    process = ServerProcess(kafka_bootstrap, name, directory / "server",
                            tokens_file=str(tokens_file))
    process.ready_auth = b"auth %s\r\n" % admin.encode()
    process.create_topics()
    process.start()
    return process


def test_cluster_configs(home, brokers: int = 3) -> list[broker.BrokerConfig]:
    """``brokers`` KRaft nodes (all voters) on free loopback ports, tuned for tests."""
    ports = [(free_port(), free_port()) for _ in range(brokers)]
    return broker.cluster_configs(test_broker_config(home), brokers, ports)


test_cluster_configs.__test__ = False


class EventqCluster:
    """Several `eventq serve` processes of one app (one consumer group) on their own
    topics, replicated 3 times: what a scaled-out deployment runs (docs/architecture.md,
    "Scaling out")."""

    def __init__(self, bootstrap: str, prefix: str, home, processes: int = 3,
                 partitions: int = 6, replication_factor: int = 3, ready_auth: bytes = b"",
                 ready_tls=None, **settings) -> None:
        self.bootstrap = bootstrap
        # 1 on a single broker: losing an eventq process needs no Kafka replicas.
        self.replication_factor = replication_factor
        self.processes = [
            ServerProcess(bootstrap, prefix, home / f"process-{i + 1}", partitions=partitions,
                          **settings)
            for i in range(processes)
        ]
        for process in self.processes:  # with tokens / TLS (see ServerProcess)
            process.ready_auth = ready_auth
            process.ready_tls = ready_tls

    def __getitem__(self, index: int) -> ServerProcess:
        return self.processes[index]

    @property
    def settings(self) -> dict[str, str]:
        return self.processes[0].settings

    def start(self, timeout_s: float = 120.0) -> "EventqCluster":
        self.processes[0].create_topics(replication_factor=self.replication_factor)
        start_together(self.processes, timeout_s)  # a failed start leaves none running
        return self

    def live(self) -> list[ServerProcess]:
        return [p for p in self.processes if p.process is not None and p.process.poll() is None]

    def stop(self) -> list[int | None]:
        return [process.stop() for process in self.processes]


def start_together(processes: list[ServerProcess], timeout_s: float = 120.0) -> None:
    """Launch ``processes`` (of one app, their topics made) and return once each serves
    and every partition is served by one of them: the last join's rebalance may still be
    moving partitions until then (a digest counts each exactly once). A start that
    fails stops them all."""
    import time

    try:
        for process in processes:
            process.launch()
        deadline = time.monotonic() + timeout_s
        for process in processes:
            process.wait_ready(deadline)
        while not (reply := processes[0].probe(b"inspect digest\r\n")).startswith(b"+OK"):
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- process {i + 1}:\n{p.log_tail(40)}"
                                  for i, p in enumerate(processes))
                raise AssertionError(f"partitions not all served in {timeout_s}s "
                                     f"(inspect digest: {reply[:200]!r})\n{tails}")
            time.sleep(0.2)
    except BaseException:
        for process in processes:
            process.stop()
        raise


def check_forwarding(processes: list[ServerProcess], client_of, label: str) -> None:
    """Two started processes of one app forward to each other: 16 adds through the
    first (``client_of(0)``), each job read through the second (``client_of(1)``), so
    some went to the other's partitions; then both stop cleanly, and their stop lines
    count requests forwarded."""
    import re
    import time

    try:
        q = f"{label}-{time.monotonic_ns()}"
        with client_of(0) as first, client_of(1) as second:
            ids = [first.add(q, b"%d" % n) for n in range(16)]
            assert {second.inspect_job(i).id for i in ids} == set(ids)
    finally:
        codes = [process.stop() for process in processes]
    assert codes == [0, 0], [p.log_tail() for p in processes]
    logs = "".join(p.log_path.read_text(errors="replace") for p in processes)
    assert sum(int(n) for n in re.findall(r"(\d+) requests forwarded", logs)) > 0, logs[-3000:]


def raw_exchange(port: int, request: bytes, timeout_s: float = 10.0, until=None,
                 tls=None) -> bytes:
    """Send raw bytes and read until the reply looks complete (or the peer closes).

    ``until(data) -> bool`` says when enough has arrived; by default one reply line.
    ``tls``: an ``ssl.SSLContext`` for a server that speaks TLS.
    """
    import socket
    import time

    done = until or (lambda data: data.endswith(b"\r\n"))
    plain = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    with plain if tls is None else tls.wrap_socket(plain, server_hostname="127.0.0.1") as sock:
        sock.sendall(request)
        data = b""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            data += chunk
            if done(data):
                break
        return data


def records_for_key(bootstrap: str, topic: str, key: bytes):
    """(partition, offset, timestamp, value) of every record of one key in a topic."""
    from eventq.kafka.logreader import read_topic

    return [(r.partition, r.offset, r.timestamp_ms, r.value)
            for r in read_topic(bootstrap, topic) if r.key == key]


def produce_state_records(bootstrap: str, topic: str, jobs, partitions: int) -> None:
    """Write ``jobs`` (an iterable of NEW ``Job``s) into a state log as the processor
    logs an added job: its key, its murmur2 partition, ``encode_state(Added, job)``.
    Tests and benchmarks make large state logs fast with it."""
    from confluent_kafka import Producer

    from eventq.core import Added, encode_state
    from eventq.core.partitioner import job_key, partition_for_key

    producer = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
        "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000,
        "acks": "all",
    })
    for job in jobs:
        key = job_key(job.id)
        value = encode_state(Added(job.id, job.created_ms, 0, job), job)
        while True:
            try:
                producer.produce(topic, key=key, value=value,
                                 partition=partition_for_key(key, partitions))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
