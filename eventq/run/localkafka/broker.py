"""A local Apache Kafka (KRaft, broker+controller nodes) run from Maven jars: one node,
or a cluster of several on consecutive loopback ports (docs/architecture.md, "Several
brokers"). This module runs a node's JVM: start, stop, kill, status, launch; where a
node lives and its cluster are in config.py, what its JVM is given in properties.py, a
secured node's files in secured.py. Their names are re-exported here: ``from
eventq.run.localkafka import broker`` is all a user of the local Kafka imports.

There is no Docker engine on our machines, so eventq runs Kafka straight from the jars
that `kafka/pom.xml` fetches into `kafka/lib/broker`.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from eventq.kafka.security import (
    KafkaAccess,
    KafkaRefused,
    confluent_config,
    is_refusal,
    refusal,
)
from eventq.run.localkafka.config import (
    DEFAULT_JARS_DIR,
    PROJECT_ROOT,
    BrokerConfig,
    BrokerError,
    cluster_bootstrap,
    cluster_configs,
    cluster_size,
    local_home,
    local_nodes,
)
from eventq.run.localkafka.properties import server_properties, write_config
from eventq.run.localkafka.secured import (
    CLIENT_CERT,
    CLIENT_KEY,
    LOCAL_MECHANISM,
    LOCAL_USER,
    local_access,
    local_security,
    prepare_security,
    requires_client_certs,
    secured,
)

__all__ = [
    # config.py
    "DEFAULT_JARS_DIR", "PROJECT_ROOT", "BrokerConfig", "BrokerError", "cluster_bootstrap",
    "cluster_configs", "cluster_size", "local_home", "local_nodes",
    # properties.py
    "server_properties",
    # secured.py
    "CLIENT_CERT", "CLIENT_KEY", "LOCAL_MECHANISM", "LOCAL_USER", "local_access",
    "local_security", "prepare_security", "requires_client_certs", "secured",
    # this module
    "START_TIMEOUT_S", "STOP_TIMEOUT_S", "LOG_TAIL_LINES", "BrokerStatus", "StartResult",
    "java_binary", "new_cluster_id", "running_pid", "port_answers", "broker_answers",
    "log_tail", "start", "start_cluster", "launch", "stop_process", "stop", "kill", "status",
]

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap: str
    answering: bool


@dataclass(frozen=True)
class StartResult:
    pid: int
    already_running: bool
    formatted: bool
    seconds: float


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return "java"


def _classpath(config: BrokerConfig) -> str:
    if not any(config.jars_dir.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"Kafka jars not found in {config.jars_dir}; run `make deps` "
            "(mvn -f kafka/pom.xml dependency:copy-dependencies) first"
        )
    return str(config.jars_dir / "*")


def _java_command(config: BrokerConfig, main_class: str, *args: str) -> list[str]:
    return [
        java_binary(),
        f"-Xms{config.heap_mb // 2}m",
        f"-Xmx{config.heap_mb}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j.configuration=file:{config.log4j_file}",
        f"-Dkafka.logs.dir={config.home}",
        "-cp",
        _classpath(config),
        main_class,
        *args,
    ]


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding.

    Like Kafka's ``Uuid.randomUuid`` it never starts with ``-`` (CLI parsers take that
    for a flag).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _format_storage(config: BrokerConfig, cluster_id: str | None = None) -> bool:
    """Format the KRaft storage once (every node of a cluster with the same cluster
    id). StorageTool ends by calling exit: own JVM."""
    if (config.data_dir / "meta.properties").exists():
        return False
    security = local_security(config)
    scram = ["--add-scram", f"{LOCAL_MECHANISM}=[name={security.sasl_username},"
                            f"password={security.sasl_password}]"] if security.sasl else []
    command = _java_command(
        config,
        "kafka.tools.StorageTool",
        "format",
        "-t",
        cluster_id or new_cluster_id(),
        "-c",
        str(config.properties_file),
        "--ignore-formatted",
        *scram,
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise BrokerError(
            "formatting Kafka storage failed:\n" + (done.stderr or done.stdout)[-2000:]
        )
    return True


def _read_pid(config: BrokerConfig) -> int | None:
    try:
        return int(config.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _is_our_broker(pid: int, config: BrokerConfig) -> bool:
    """True if pid is alive and is a kafka.Kafka JVM started with our config file."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    if state == "Z":  # exited, waiting to be reaped
        return False
    return b"kafka.Kafka" in cmdline and str(config.properties_file).encode() in cmdline


def running_pid(config: BrokerConfig) -> int | None:
    pid = _read_pid(config)
    if pid is not None and _is_our_broker(pid, config):
        return pid
    return None


def port_answers(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def broker_answers(bootstrap: KafkaAccess | str, timeout_s: float = 2.0) -> bool:
    """True once the broker answers a metadata request (not just accepts TCP). Raises
    KafkaRefused if it refuses the client's credentials or TLS (waiting would not help)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    refusals: list[KafkaError] = []

    def note(error: KafkaError) -> None:  # librdkafka's error_cb
        if is_refusal(error.code(), error.str()):
            refusals.append(error)

    admin = AdminClient(confluent_config(bootstrap, {"log_level": 0, "error_cb": note}))
    try:
        metadata = admin.list_topics(timeout=timeout_s)
        return bool(metadata.brokers)
    except Exception:  # KafkaException while it is still starting
        pass
    admin.poll(0)  # the errors reported meanwhile
    if refusals:
        raise refusal(bootstrap, refusals[0].code(), refusals[0].str())
    return False


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def log_tail(config: BrokerConfig, lines: int = LOG_TAIL_LINES) -> str:
    """The reason a broker failed: its last ERROR/FATAL lines, else the last lines of its
    log and of the JVM's own output (where a failure before logging starts ends up)."""
    text = _lines(config.log_file)
    errors = [line for line in text if " ERROR " in line or " FATAL " in line]
    if errors:
        return "\n".join(errors[-lines:])
    jvm = _lines(config.home / "broker.out")
    chosen = text[-lines // 2:] + ["-- JVM output --"] + jvm[-lines // 2:]
    return "\n".join(chosen) if text or jvm else "(the broker wrote no log)"


def start(config: BrokerConfig, timeout_s: float = START_TIMEOUT_S) -> StartResult:
    """Start the broker unless it already runs; return once it answers requests."""
    return start_cluster([config], timeout_s)[0]


def start_cluster(
    configs: list[BrokerConfig], timeout_s: float = START_TIMEOUT_S
) -> list[StartResult]:
    """Start every node that is not running (all at once: a node of a quorum answers
    only once a majority of voters runs); return once each answers requests."""
    began = time.monotonic()
    launched: dict[int, subprocess.Popen] = {}
    formatted: dict[int, bool] = {}  # whether its storage was formatted by this start
    results: list[StartResult | None] = []
    cluster_id = _cluster_id_of(configs)
    for index, config in enumerate(configs):
        pid = running_pid(config)
        if pid is not None:
            results.append(StartResult(pid, already_running=True, formatted=False, seconds=0.0))
            continue
        results.append(None)
        try:
            launched[index], formatted[index] = _launch(config, cluster_id)
        except BrokerError:
            for process in launched.values():
                _terminate(process.pid, STOP_TIMEOUT_S)
            raise
    deadline = began + timeout_s
    waiting = dict(launched)
    while waiting and time.monotonic() < deadline:
        for index, process in list(waiting.items()):
            config = configs[index]
            if process.poll() is not None:
                config.pid_file.unlink(missing_ok=True)
                for other in waiting.values():
                    _terminate(other.pid, STOP_TIMEOUT_S)
                raise BrokerError(
                    f"Kafka exited with status {process.returncode} while starting. "
                    f"From {config.log_file}:\n{log_tail(config)}"
                )
            if port_answers(config.host, config.port, 0.2) and _answers(config):
                results[index] = StartResult(
                    process.pid, False, formatted[index], seconds=time.monotonic() - began
                )
                del waiting[index]
        time.sleep(0.1)
    if waiting:
        for index, process in waiting.items():
            _terminate(process.pid, STOP_TIMEOUT_S)
            configs[index].pid_file.unlink(missing_ok=True)
        config = configs[next(iter(waiting))]
        raise BrokerError(
            f"Kafka did not answer on {config.bootstrap} within {timeout_s:.0f}s. "
            f"From {config.log_file}:\n{log_tail(config)}"
        )
    return results  # type: ignore[return-value]  # every slot filled: none is waiting


def _answers(config: BrokerConfig) -> bool:
    """Whether a starting node answers its own client; a refusal while it starts is a
    not yet (until the deadline, where its log says more)."""
    try:
        return broker_answers(local_access(config))
    except KafkaRefused:
        return False


def launch(config: BrokerConfig, cluster: list[BrokerConfig]) -> subprocess.Popen:
    """Start a node that is not running and return at once, without waiting for it to
    answer: a supervisor restarting a dead node keeps watching the others meanwhile, and
    sees a start that fails as the node dying again. Its data dir stays; a node whose
    data is gone is formatted with the id of ``cluster`` (all its nodes). Raises
    BrokerError (its ports in use, the jars missing, formatting failed)."""
    return _launch(config, _cluster_id_of(cluster))[0]


def stop_process(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM ``pid``, SIGKILL if it has not gone within ``timeout_s`` (the nodes'
    supervisor is stopped as a node is)."""
    return _terminate(pid, timeout_s)


def _cluster_id_of(configs: list[BrokerConfig]) -> str:
    """The id the cluster's formatted nodes carry (a node whose data was lost joins
    it again), or a new one."""
    for config in configs:
        try:
            text = (config.data_dir / "meta.properties").read_text()
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    return new_cluster_id()


def _launch(config: BrokerConfig, cluster_id: str) -> tuple[subprocess.Popen, bool]:
    """Start the node's JVM; (its process, whether its storage was formatted now)."""
    for port in (config.port, config.controller_port):
        if port_answers(config.host, port):
            raise BrokerError(
                f"port {config.host}:{port} is already in use by another process; "
                "choose other ports (--kafka-port/--controller-port)"
            )
    if config.sasl_ssl:
        prepare_security(config)
    write_config(config)
    formatted = _format_storage(config, cluster_id)
    with open(config.home / "broker.out", "ab") as out:
        process = subprocess.Popen(
            _java_command(config, "kafka.Kafka", str(config.properties_file)),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal must not kill it mid-write
            cwd=config.home,
        )
    config.pid_file.write_text(f"{process.pid}\n")
    return process, formatted


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            # Reap it if it is our child (tests start brokers in-process).
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        if not Path(f"/proc/{pid}").exists():
            return True
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
            # A JVM's main thread turns zombie before its other threads are gone, and
            # its sockets (the broker's listening ports) close only with the last one.
            if state == "Z" and len(os.listdir(f"/proc/{pid}/task")) <= 1:
                return True
        except (FileNotFoundError, IndexError):
            return True
        time.sleep(0.05)
    return False


def _terminate(pid: int, timeout_s: float) -> bool:
    """SIGTERM (a controlled shutdown flushes logs); SIGKILL if it will not go."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    if _wait_gone(pid, timeout_s):
        return True
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    return _wait_gone(pid, 10.0)


def stop(config: BrokerConfig, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the broker if it runs. Returns True if one was stopped."""
    pid = running_pid(config)
    if pid is None:
        config.pid_file.unlink(missing_ok=True)
        return False
    _terminate(pid, timeout_s)
    config.pid_file.unlink(missing_ok=True)
    return True


def kill(config: BrokerConfig) -> bool:
    """SIGKILL the broker (crash tests). Returns True if one was killed."""
    pid = running_pid(config)
    if pid is None:
        return False
    os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, 10.0)
    _wait_ports_closed(config, 10.0)
    config.pid_file.unlink(missing_ok=True)
    return True


def _wait_ports_closed(config: BrokerConfig, timeout_s: float) -> None:
    """Until neither of the killed broker's ports answers: a restart right after the
    kill checks them (_launch) and would take a closing socket for another process."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(
            port_answers(config.host, port, 0.2) for port in (config.port, config.controller_port)):
        time.sleep(0.05)


def status(config: BrokerConfig) -> BrokerStatus:
    pid = running_pid(config)
    answering = pid is not None and broker_answers(local_access(config), 1.0)
    return BrokerStatus(pid is not None, pid, config.bootstrap, answering)
