"""Where a local Kafka node lives and how it listens (BrokerConfig), and the nodes of a
local cluster: consecutive loopback port pairs, every node a KRaft voter
(docs/architecture.md, "Several brokers").

Everything a node owns lives in one directory: its config, its data (``log.dirs``), its
log file and its pid file, so ``start``/``stop``/``status`` (eventq/run/localkafka/broker.py)
can be called any number of times from any process.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from eventq.settings import Settings, local_node_ports

PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_JARS_DIR = PROJECT_ROOT / "kafka" / "lib" / "broker"


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


def cluster_size(config: BrokerConfig) -> int:
    return len(config.quorum_voters.split(",")) if config.quorum_voters else 1


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
