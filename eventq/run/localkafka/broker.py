"""A local Apache Kafka (KRaft, broker+controller nodes) run from Maven jars: one node,
or a cluster of several on consecutive loopback ports (docs/architecture.md, "Several
brokers").

There is no Docker engine on our machines, so eventq runs Kafka straight from the jars
that `kafka/pom.xml` fetches into `kafka/lib/broker`. Everything the broker owns lives
in one directory: its config, its data (``log.dirs``), its log file and its pid file, so
``start``/``stop``/``status`` can be called any number of times from any process.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import secrets
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from eventq.kafka.security import (
    NO_SECURITY,
    SASL_SSL,
    KafkaAccess,
    KafkaRefused,
    KafkaSecurity,
    confluent_config,
    is_refusal,
    refusal,
)
from eventq.kafka.topics import min_insync_replicas
from eventq.limits import KAFKA_MESSAGE_BYTES
from eventq.settings import Settings, local_node_ports

PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_JARS_DIR = PROJECT_ROOT / "kafka" / "lib" / "broker"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 40
# A secured local broker (`eventq kafka start --sasl-ssl`): one SASL_SSL listener, its
# SCRAM user made when the storage is formatted, certificates from a CA of its own.
LOCAL_USER = "eventq"
LOCAL_MECHANISM = "SCRAM-SHA-512"
CERTIFICATE_DAYS = 3650
# With --mtls: the certificate (signed by the same CA) and key eventq's clients present.
CLIENT_CERT = "client.pem"
CLIENT_KEY = "client.key"


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
    # Extra server.properties entries, e.g. the fast-test tuning in tools/servers.py.
    overrides: dict[str, str] = field(default_factory=dict)
    node_id: int = 1
    # The controller quorum as "id@host:port,...": empty means this node alone. Every
    # node of a cluster is a voter (KRaft combined mode): losing one keeps a majority.
    quorum_voters: str = ""
    # Start it with a SASL_SSL listener (``secured``). Its CA, certificate and SCRAM
    # password are kept in ``security_dir`` (default home/security; one for all nodes of
    # a cluster), and a broker whose dir holds them stays secured at every later start.
    sasl_ssl: bool = False
    security_dir: Path | None = None
    # A secured node that also requires each client to present a certificate signed by
    # its CA (mTLS, ``requires_client_certs``). Kept like ``sasl_ssl``: once its
    # security dir holds the client certificate, every later start requires one.
    client_certs: bool = False

    def __post_init__(self) -> None:
        # The JVM runs in `home`: every path handed to it must be absolute.
        object.__setattr__(self, "home", Path(self.home).resolve())
        object.__setattr__(self, "security_dir",
                           Path(self.security_dir or self.home / "security").resolve())

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

    def security_file(self, name: str) -> Path:
        assert self.security_dir is not None  # set by __post_init__
        return self.security_dir / name


# --- a secured local broker -----------------------------------------------------------


def secured(config: BrokerConfig) -> bool:
    """Whether the node speaks SASL_SSL: asked to, or made so by an earlier start (its
    storage holds the SCRAM user then)."""
    return config.sasl_ssl or config.security_file("password").exists()


def requires_client_certs(config: BrokerConfig) -> bool:
    """Whether the node requires a client certificate: asked to, or made so by an
    earlier start (its security dir holds the client certificate then)."""
    return config.client_certs or config.security_file(CLIENT_CERT).exists()


def local_security(config: BrokerConfig) -> KafkaSecurity:
    """The settings a client of this local broker needs (none for a plain one)."""
    if not secured(config):
        return NO_SECURITY
    certificate = {}
    if requires_client_certs(config):
        certificate = {"ssl_certfile": str(config.security_file(CLIENT_CERT)),
                       "ssl_keyfile": str(config.security_file(CLIENT_KEY))}
    return KafkaSecurity(
        protocol=SASL_SSL, sasl_mechanism=LOCAL_MECHANISM, sasl_username=LOCAL_USER,
        sasl_password=config.security_file("password").read_text().strip(),
        ssl_cafile=str(config.security_file("ca.pem")), **certificate)


def local_access(config: BrokerConfig) -> KafkaAccess:
    return KafkaAccess(config.bootstrap, local_security(config))


def _openssl(config: BrokerConfig, *args: str) -> None:
    done = subprocess.run(["openssl", *args], cwd=config.security_dir, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise BrokerError(f"making the broker's certificates failed (openssl {args[0]}): "
                          f"{done.stderr.strip()[-1000:]}; is the openssl command installed?")


def _names(host: str) -> str:
    """The broker certificate's subjectAltName: its host, and the loopback names."""
    try:
        ipaddress.ip_address(host)
        own = f"IP:{host}"
    except ValueError:
        own = f"DNS:{host}"
    return ",".join(dict.fromkeys([own, "IP:127.0.0.1", "DNS:localhost"]))


def prepare_security(config: BrokerConfig) -> None:
    """Make what a secured node needs, once: a CA, the brokers' certificate signed by it
    (key and chain in one PEM file: Kafka's PEM keystore), and the SCRAM user's
    password; with ``client_certs`` a client certificate too (a secured node may be
    made mTLS at a later start: its storage does not change). The storage of a node
    formatted without the user cannot be secured."""
    if not config.security_file("password").exists():
        _prepare_ca_broker_and_password(config)
    if config.client_certs and not config.security_file(CLIENT_CERT).exists():
        _prepare_client_certificate(config)


def _prepare_ca_broker_and_password(config: BrokerConfig) -> None:
    if (config.data_dir / "meta.properties").exists():
        raise BrokerError(
            f"the Kafka in {config.home} was formatted without SASL (its SCRAM user is made "
            "at format time): stop it and remove that directory, or give another "
            "--data-dir, to start a secured one")
    directory = config.security_dir
    assert directory is not None
    directory.mkdir(parents=True, exist_ok=True)
    days = str(CERTIFICATE_DAYS)
    _openssl(config, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", days, "-subj", "/CN=eventq local Kafka CA")
    _openssl(config, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key",
             "-out", "broker.csr", "-subj", f"/CN={config.host}")
    # No extendedKeyUsage: with client certificates required the nodes present this
    # same certificate to each other (inter-broker SASL_SSL), so it must serve for
    # clientAuth as well as serverAuth, which a certificate without the extension does.
    (directory / "broker.ext").write_text(f"subjectAltName={_names(config.host)}\n")
    _openssl(config, "x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", days, "-out", "broker.pem", "-extfile", "broker.ext")
    keystore = directory / "broker-keystore.pem"
    keystore.write_text((directory / "broker.key").read_text()
                        + (directory / "broker.pem").read_text())
    keystore.chmod(0o600)
    password = directory / "password.new"
    password.write_text(secrets.token_urlsafe(24) + "\n")
    password.chmod(0o600)
    password.rename(directory / "password")  # last: its presence says all is there


def _prepare_client_certificate(config: BrokerConfig) -> None:
    """The key and certificate eventq's clients present to a node that requires one,
    signed by the nodes' CA (which is all the brokers check: the SASL user is who the
    client is)."""
    directory = config.security_dir
    assert directory is not None
    _openssl(config, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", CLIENT_KEY,
             "-out", "client.csr", "-subj", f"/CN={LOCAL_USER}")
    (directory / CLIENT_KEY).chmod(0o600)
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    _openssl(config, "x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey",
             "ca.key", "-CAcreateserial", "-days", str(CERTIFICATE_DAYS), "-out",
             "client.pem.new", "-extfile", "client.ext")
    # Last: its presence says the node requires client certificates from now on.
    (directory / "client.pem.new").rename(directory / CLIENT_CERT)


def _security_properties(config: BrokerConfig) -> dict[str, str]:
    security = local_security(config)
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{security.sasl_username}" password="{security.sasl_password}";')
    return {
        "listeners": (f"SASL_SSL://{config.host}:{config.port},"
                      f"CONTROLLER://{config.host}:{config.controller_port}"),
        "advertised.listeners": f"SASL_SSL://{config.host}:{config.port}",
        # The nodes talk to each other as the SCRAM user too; the controllers' quorum
        # stays on loopback PLAINTEXT.
        "inter.broker.listener.name": "SASL_SSL",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": LOCAL_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": LOCAL_MECHANISM,
        f"listener.name.sasl_ssl.{LOCAL_MECHANISM.lower()}.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(config.security_file("broker-keystore.pem")),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(config.security_file("ca.pem")),
        "ssl.client.auth": _client_auth(config),
        # Kafka ignores the broker-wide ssl.client.auth on SASL_SSL listeners (KIP-684):
        # only the listener's own setting makes it require client certificates.
        "listener.name.sasl_ssl.ssl.client.auth": _client_auth(config),
    }


def _client_auth(config: BrokerConfig) -> str:
    """With --mtls a client without a certificate signed by the CA is refused in the
    TLS handshake, whatever its SASL password."""
    return "required" if requires_client_certs(config) else "none"


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


def cluster_size(config: BrokerConfig) -> int:
    return len(config.quorum_voters.split(",")) if config.quorum_voters else 1


def server_properties(config: BrokerConfig) -> dict[str, str]:
    """The broker's configuration: KRaft, loopback only, small and quick. In a cluster
    Kafka's own topics are replicated like eventq's (3 copies, 2 in sync to write)."""
    nodes = cluster_size(config)
    replicas = str(min(nodes, 3))
    min_isr = str(min_insync_replicas(min(nodes, 3)))
    props = {
        "process.roles": "broker,controller",
        "node.id": str(config.node_id),
        # A static quorum: format without --standalone (see StorageTool below).
        "controller.quorum.voters": (
            config.quorum_voters or f"{config.node_id}@{config.host}:{config.controller_port}"
        ),
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
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": "8",
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
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
    if secured(config):
        props.update(_security_properties(config))
    if nodes > 1:
        # A dead node's partitions get new leaders once the controller fences it:
        # after 9 s without heartbeats by default (writes to them wait meanwhile;
        # a chaos test saw adds stall 12.4 s). A local cluster fences sooner.
        props["broker.session.timeout.ms"] = "4000"
        props["broker.heartbeat.interval.ms"] = "1000"
    props.update(config.overrides)
    return props


def cluster_configs(
    first: BrokerConfig, brokers: int, ports: list[tuple[int, int]] | None = None
) -> list[BrokerConfig]:
    """``brokers`` nodes, each in its own directory under ``first.home``, on the
    (port, controller port) pairs ``ports``: by default consecutive pairs from
    ``first``'s (9092/9093, 9094/9095, ...). One node is ``first`` itself (the
    single-broker layout stays as it was)."""
    if brokers == 1:
        return [first]
    if ports is None:
        ports = local_node_ports(first.port, first.controller_port, brokers)
    voters = ",".join(f"{i + 1}@{first.host}:{c}" for i, (_, c) in enumerate(ports))
    return [
        replace(first, home=first.home / f"node-{i + 1}", port=p, controller_port=c,
                node_id=i + 1, quorum_voters=voters)
        for i, (p, c) in enumerate(ports)
    ]


def local_home(settings: Settings) -> Path:
    """Where the local Kafka lives: its node, or the directories of its nodes."""
    return settings.data_dir / "kafka"


def local_nodes(settings: Settings) -> list[BrokerConfig]:
    """The local Kafka's nodes as ``settings`` describe them (``eventq kafka start``):
    one node in ``<data dir>/kafka``, or a cluster of nodes below it."""
    first = BrokerConfig(
        home=local_home(settings),
        host=settings.kafka_host,
        port=settings.kafka_port,
        controller_port=settings.controller_port,
        heap_mb=settings.kafka_heap_mb,
    )
    return cluster_configs(first, settings.brokers)


def cluster_bootstrap(configs: list[BrokerConfig]) -> str:
    return ",".join(config.bootstrap for config in configs)


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
    config.properties_file.chmod(0o600)  # a secured node's holds its SCRAM password
    config.log4j_file.write_text(LOG4J_PROPERTIES.format(log_file=config.log_file))


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
    from confluent_kafka.admin import AdminClient

    refusals: list = []

    def note(error) -> None:  # librdkafka's error_cb
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
    _write_config(config)
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
