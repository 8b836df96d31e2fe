"""A local single-node Apache Kafka (KRaft, broker+controller) run from Maven jars.

There is no Docker engine on our machines, so eventq runs Kafka straight from the jars
that `kafka/pom.xml` fetches into `kafka/lib/broker`. Everything the broker owns lives
in one directory: its config, its data (``log.dirs``), its log file and its pid file, so
``start``/``stop``/``status`` can be called any number of times from any process.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from eventq.limits import KAFKA_MESSAGE_BYTES

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_JARS_DIR = PROJECT_ROOT / "kafka" / "lib" / "broker"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 40


class BrokerError(RuntimeError):
    """The broker could not be started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class BrokerConfig:
    """Where a local broker lives and how it listens."""

    home: Path  # the broker's own directory (config, data, log, pid)
    host: str = "127.0.0.1"
    port: int = 9092
    controller_port: int = 9093
    heap_mb: int = 768
    jars_dir: Path = DEFAULT_JARS_DIR
    # Extra server.properties entries, e.g. the fast-test tuning in tests/support.py.
    overrides: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The JVM runs in `home`: every path handed to it must be absolute.
        object.__setattr__(self, "home", Path(self.home).resolve())

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def properties_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def log4j_file(self) -> Path:
        return self.home / "log4j.properties"

    @property
    def log_file(self) -> Path:
        return self.home / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"


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


def server_properties(config: BrokerConfig) -> dict[str, str]:
    """The broker's configuration: KRaft single node, loopback only, small and quick."""
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        # A static quorum: format without --standalone (see StorageTool below).
        "controller.quorum.voters": f"1@{config.host}:{config.controller_port}",
        "listeners": (
            f"PLAINTEXT://{config.host}:{config.port},"
            f"CONTROLLER://{config.host}:{config.controller_port}"
        ),
        "advertised.listeners": f"PLAINTEXT://{config.host}:{config.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(config.data_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "8",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.retention.check.interval.ms": "60000",
        "socket.request.max.bytes": str(100 * 1024 * 1024),
        "message.max.bytes": str(KAFKA_MESSAGE_BYTES),  # eventq/limits.py
    }
    props.update(config.overrides)
    return props


LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log_file}
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.log.LogCleaner=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
"""


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


def _write_config(config: BrokerConfig) -> None:
    config.home.mkdir(parents=True, exist_ok=True)
    lines = [f"{key}={value}" for key, value in sorted(server_properties(config).items())]
    config.properties_file.write_text("\n".join(lines) + "\n")
    config.log4j_file.write_text(LOG4J_PROPERTIES.format(log_file=config.log_file))


def _format_storage(config: BrokerConfig) -> bool:
    """Format the KRaft storage once. StorageTool ends by calling exit: own JVM."""
    if (config.data_dir / "meta.properties").exists():
        return False
    command = _java_command(
        config,
        "kafka.tools.StorageTool",
        "format",
        "-t",
        new_cluster_id(),
        "-c",
        str(config.properties_file),
        "--ignore-formatted",
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


def broker_answers(bootstrap: str, timeout_s: float = 2.0) -> bool:
    """True once the broker answers a metadata request (not just accepts TCP)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout_s)
        return bool(metadata.brokers)
    except Exception:  # KafkaException while it is still starting
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
    began = time.monotonic()
    pid = running_pid(config)
    if pid is not None:
        return StartResult(pid, already_running=True, formatted=False, seconds=0.0)
    for port in (config.port, config.controller_port):
        if port_answers(config.host, port):
            raise BrokerError(
                f"port {config.host}:{port} is already in use by another process; "
                "choose other ports (--kafka-port/--controller-port)"
            )
    _write_config(config)
    formatted = _format_storage(config)
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
    deadline = began + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            config.pid_file.unlink(missing_ok=True)
            raise BrokerError(
                f"Kafka exited with status {process.returncode} while starting. "
                f"From {config.log_file}:\n{log_tail(config)}"
            )
        if port_answers(config.host, config.port, 0.2) and broker_answers(config.bootstrap):
            return StartResult(
                process.pid, False, formatted, seconds=time.monotonic() - began
            )
        time.sleep(0.1)
    _terminate(process.pid, STOP_TIMEOUT_S)
    config.pid_file.unlink(missing_ok=True)
    raise BrokerError(
        f"Kafka did not answer on {config.bootstrap} within {timeout_s:.0f}s. "
        f"From {config.log_file}:\n{log_tail(config)}"
    )


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
            if state == "Z":
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
    config.pid_file.unlink(missing_ok=True)
    return True


def status(config: BrokerConfig) -> BrokerStatus:
    pid = running_pid(config)
    answering = pid is not None and broker_answers(config.bootstrap, 1.0)
    return BrokerStatus(pid is not None, pid, config.bootstrap, answering)
