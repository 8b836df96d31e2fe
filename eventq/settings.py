"""The one settings object. Built once in the CLI from flags and ``EVENTQ_*`` variables
and passed down; nothing reads the environment anywhere else or at import time.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping, Sequence

from eventq.address import host_and_port
from eventq.kafka.security import SETTINGS as KAFKA_SECURITY_SETTINGS
from eventq.kafka.security import KafkaAccess, KafkaSecurity, settings_env
from eventq.kafka.topics import (
    ONE_WEEK_MS,
    TopicNames,
    TopicSpec,
    bulk_name_for,
    eventq_topics,
)
from eventq.limits import MAX_STATE_RECORD_BYTES

HTTP_OFF = "off"


def local_node_ports(port: int, controller_port: int, brokers: int) -> list[tuple[int, int]]:
    """The local Kafka's nodes listen on consecutive (port, controller port) pairs from
    the first node's: 9092/9093, 9094/9095, ..."""
    return [(port + 2 * i, controller_port + 2 * i) for i in range(brokers)]


APPLY_FETCH = "fetch"  # streams/faust/command_fetch.py
APPLY_AGENT = "agent"  # faust's agent (streams/faust/app.py)
APPLY_PATHS = (APPLY_FETCH, APPLY_AGENT)
# What writes the gateway's, the timers' and the follow-ups' commands to the command log
# (docs/architecture.md, "Batches"): faust's producer, or a librdkafka one of their own.
COMMAND_PRODUCERS = ("faust", "librdkafka")


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("var")
    bootstrap: str = ""  # empty: the local broker started by `eventq kafka start`
    kafka_host: str = "127.0.0.1"
    kafka_port: int = 9092
    controller_port: int = 9093
    kafka_heap_mb: int = 768
    brokers: int = 1  # nodes of the local Kafka cluster (`eventq kafka start --brokers 3`)
    # How every Kafka client of eventq authenticates and encrypts (docs/security.md;
    # eventq/kafka/security.py maps them to each client library's options).
    kafka_security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    kafka_sasl_mechanism: str = "SCRAM-SHA-512"  # or SCRAM-SHA-256, PLAIN
    kafka_sasl_username: str = ""
    kafka_sasl_password: str = field(default="", repr=False)  # never logged nor shown
    kafka_ssl_cafile: str = ""  # empty: the system's CAs
    kafka_ssl_certfile: str = ""  # this client's certificate (mTLS) and its key
    kafka_ssl_keyfile: str = ""
    listen_host: str = "127.0.0.1"
    listen_port: int = 9922
    # 4: fewer partitions carry more commands per record; 2 to 16 measured on 2 cores
    # (README, "Scaling out"). Topics that exist keep their count (server.with_existing_partitions).
    partitions: int = 4
    replication_factor: int = 0  # 0: as many copies as local brokers (at most 3), else 1
    commands_topic: str = "eventq.commands"
    jobs_topic: str = "eventq.jobs"
    bulk_topic: str = ""  # empty: the command log's name, "commands" -> "bulk"
    commands_retention_ms: int = ONE_WEEK_MS
    app_id: str = "eventq"
    write_timeout_ms: int = 5000  # a command not written and applied by then: -SERVER-ERROR
    max_state_record_bytes: int = MAX_STATE_RECORD_BYTES
    log_level: str = "INFO"  # INFO: normal events; WARNING: look at it
    command_producer: str = "faust"  # the cheaper on 2 cores (docs/architecture.md, "Batches")
    # Scaling out (docs/architecture.md, "Scaling out"): the address other eventq
    # processes reach this one's gateway at (default: listen host and port), warm copies
    # of each partition's table kept by other processes, and how soon a silent process
    # counts as dead.
    advertise: str = ""
    standby_replicas: int = 1
    session_timeout_ms: int = 6000
    processes: int = 1  # `eventq up`: gateways to start, on consecutive ports
    # Metrics and the dashboard (docs/architecture.md, "Metrics and the dashboard";
    # "off": neither, and no live statistics).
    http_port: str = "127.0.0.1:9980"
    http_actions: bool = False
    # How the processor reads the command log (docs/architecture.md, "Batches"):
    # whole fetches on the main loop, or faust's agent, a record at a time (the path
    # before; kept to compare and to fall back on).
    apply_path: str = APPLY_FETCH
    # Tokens and roles (docs/security.md): a file of `<token> <role>[,<role>...]
    # [<prefix>]` lines, read at start and on SIGHUP (empty: no tokens, every client
    # may do everything, as workq).
    tokens_file: str = ""
    # TLS on the gateway and the links between processes (docs/security.md): the
    # certificate and its key (both or neither); a client CA makes client certificates
    # required (mTLS).
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""

    def __post_init__(self) -> None:
        if not self.bulk_topic:
            object.__setattr__(self, "bulk_topic", bulk_name_for(self.commands_topic))
        # Resolved once: the broker JVM and faust run in other working directories.
        object.__setattr__(self, "data_dir", Path(self.data_dir).resolve())
        if not 1 <= self.partitions <= 1024:
            raise ValueError(f"partitions must be 1..1024, not {self.partitions}")
        for name in ("kafka_port", "controller_port", "listen_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise ValueError(f"{name} must be a TCP port, not {port}")
        if not 1 <= self.brokers <= 9:
            raise ValueError(f"brokers must be 1..9, not {self.brokers}")
        if not 1 <= self.processes <= 64:
            raise ValueError(f"processes must be 1..64, not {self.processes}")
        if not 0 <= self.standby_replicas <= 8:
            raise ValueError(f"standby_replicas must be 0..8, not {self.standby_replicas}")
        if not 3000 <= self.session_timeout_ms <= 300_000:
            raise ValueError("session_timeout_ms must be 3000..300000")
        if self.replication_factor == 0:
            copies = min(self.brokers, 3) if not self.bootstrap else 1
            object.__setattr__(self, "replication_factor", copies)
        if self.advertise:
            try:
                host_and_port(self.advertise)
            except ValueError:
                raise ValueError(f"advertise must be host:port, not {self.advertise!r}") from None
        if self.http_port != HTTP_OFF:
            try:
                self.http_address
            except ValueError:
                raise ValueError(
                    f"http_port must be host:port, a port or {HTTP_OFF!r}, not "
                    f"{self.http_port!r}") from None
        if self.apply_path not in APPLY_PATHS:
            raise ValueError(f"apply_path must be one of {', '.join(APPLY_PATHS)}, "
                             f"not {self.apply_path!r}")
        if self.command_producer not in COMMAND_PRODUCERS:
            raise ValueError(f"command_producer must be one of {', '.join(COMMAND_PRODUCERS)}, "
                             f"not {self.command_producer!r}")
        # Files resolved once, like data_dir: `eventq up` starts its processes elsewhere.
        for name in ("tokens_file", "tls_cert", "tls_key", "tls_client_ca",
                     "kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile"):
            if getattr(self, name):
                object.__setattr__(self, name, str(Path(getattr(self, name)).resolve()))
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together: give both, or neither")
        if self.tls_client_ca and not self.tls_cert:
            raise ValueError("tls_client_ca needs tls_cert and tls_key (the server's own)")
        security = self.kafka_security  # validates the group: an error says what to set
        object.__setattr__(self, "kafka_security_protocol", security.protocol)
        object.__setattr__(self, "kafka_sasl_mechanism", security.sasl_mechanism)
        if self.write_timeout_ms <= 0:
            raise ValueError("write_timeout_ms must be positive")
        if not 1 <= self.max_state_record_bytes <= MAX_STATE_RECORD_BYTES:
            raise ValueError(
                f"max_state_record_bytes must be 1..{MAX_STATE_RECORD_BYTES}, "
                f"not {self.max_state_record_bytes}"
            )

    @property
    def kafka_bootstrap(self) -> str:
        """The brokers' addresses: ``bootstrap``, or the local Kafka's nodes."""
        return self.bootstrap or ",".join(
            f"{self.kafka_host}:{port}" for port, _ in self.local_node_ports)

    @property
    def kafka_security(self) -> KafkaSecurity:
        return KafkaSecurity(**{attribute: getattr(self, name)
                                for name, attribute in KAFKA_SECURITY_SETTINGS.items()})

    @property
    def kafka(self) -> KafkaAccess:
        """What every Kafka client is made from: the servers and their security."""
        return KafkaAccess(self.kafka_bootstrap, self.kafka_security)

    @property
    def local_node_ports(self) -> list[tuple[int, int]]:
        """(port, controller port) of each node of the local Kafka (`eventq kafka
        start`; eventq/run/localkafka/broker.py makes its nodes of them)."""
        return local_node_ports(self.kafka_port, self.controller_port, self.brokers)

    @property
    def advertised_address(self) -> str:
        """host:port of this process's gateway for its peers."""
        return self.advertise or f"{self.listen_host}:{self.listen_port}"

    @property
    def http_address(self) -> tuple[str, int] | None:
        """(host, port) of the metrics and dashboard server, None when off. A bare port
        listens on the listen host."""
        if self.http_port == HTTP_OFF:
            return None
        address = self.http_port
        if address.isdigit():
            address = f"{self.listen_host}:{address}"
        return host_and_port(address, allow_port_zero=True)

    @property
    def uses_local_broker(self) -> bool:
        return not self.bootstrap

    @property
    def topic_names(self) -> TopicNames:
        return TopicNames(self.commands_topic, self.jobs_topic, self.bulk_topic)

    @property
    def topics(self) -> list[TopicSpec]:
        return eventq_topics(
            self.topic_names,
            self.partitions,
            self.replication_factor,
            self.commands_retention_ms,
        )

    @property
    def state_dir(self) -> Path:
        """Where the processor keeps its RocksDB tables."""
        return self.data_dir / "state"


HELP = {
    "data_dir": "directory for the local broker's data and the RocksDB state",
    "bootstrap": "Kafka bootstrap servers (default: the local broker)",
    "kafka_host": "address the local broker listens on",
    "kafka_port": "port of the local broker",
    "controller_port": "KRaft controller port of the local broker",
    "kafka_heap_mb": "JVM heap of the local broker, MiB",
    "brokers": (
        "nodes of the local Kafka (`eventq kafka start`): 3 runs a cluster on "
        "consecutive port pairs from --kafka-port/--controller-port"
    ),
    "kafka_security_protocol": (
        "how eventq's Kafka clients talk to the brokers: PLAINTEXT, SSL (TLS), "
        "SASL_PLAINTEXT or SASL_SSL (SASL over TLS)"
    ),
    "kafka_sasl_mechanism": "SASL mechanism: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN",
    "kafka_sasl_username": "SASL user (with a SASL_* protocol)",
    "kafka_sasl_password": (
        "SASL password; prefer the variable to the flag, which `ps` shows (never logged)"
    ),
    "kafka_ssl_cafile": (
        "PEM CA file the brokers' certificates are checked against (default: the "
        "system's CAs)"
    ),
    "kafka_ssl_certfile": "PEM client certificate, for brokers that require one (mTLS)",
    "kafka_ssl_keyfile": "PEM private key of --kafka-ssl-certfile",
    "listen_host": "address eventq serves the workq protocol on",
    "listen_port": "port eventq serves the workq protocol on",
    "partitions": "partitions of eventq's topics (fixed at creation)",
    "replication_factor": (
        "replication factor of eventq's topics (0: one per local broker, at most 3; "
        "1 with --bootstrap)"
    ),
    "commands_topic": "name of the command log topic",
    "jobs_topic": "name of the compacted state log topic",
    "bulk_topic": (
        "name of the staging topic bulk producers write to (default: the command log's "
        "name with 'commands' replaced by 'bulk': eventq.bulk)"
    ),
    "commands_retention_ms": "retention of the command log, ms",
    "app_id": "faust application id (consumer group)",
    "write_timeout_ms": (
        "the write deadline: how long a command may take to be written to Kafka and "
        "applied before the client gets -SERVER-ERROR (saying whether it may still take "
        "effect), ms"
    ),
    "max_state_record_bytes": (
        "largest job state record the processor stores; a command that would exceed it "
        "is rejected (lower it only to test that; replays must use the same value)"
    ),
    "log_level": "log level (DEBUG, INFO, WARNING, ERROR)",
    "command_producer": (
        "what writes commands to the command log: faust (the faust app's producer, "
        "shared with the bulk lane's admitted slices) or librdkafka (a producer of "
        "their own, with threads of its own)"
    ),
    "advertise": (
        "host:port other eventq processes reach this one's gateway at (default: "
        "listen host and port); they forward requests for this process's jobs there"
    ),
    "standby_replicas": (
        "warm copies of each partition's table kept by other processes, for fail-over"
    ),
    "session_timeout_ms": (
        "a process silent this long counts as dead and its partitions move, ms"
    ),
    "processes": "eventq up: how many eventq processes to start, on consecutive ports",
    "http_port": (
        "[host:]port of the Prometheus metrics (/metrics) and the web dashboard (/), or "
        "'off'; eventq up gives each process the next port"
    ),
    "apply_path": (
        "how the processor reads the command log: 'fetch' (whole fetches, on the main "
        "event loop) or 'agent' (faust's agent, one event per record)"
    ),
    "tokens_file": (
        "file of tokens and their roles, one `<token> <role>[,<role>...] [<prefix>]` per "
        "line (roles: reader, worker, producer, admin); clients must `auth` first; read "
        "again on SIGHUP (default: no tokens)"
    ),
    "tls_cert": (
        "PEM certificate (chain) the gateway and the dashboard present: both then speak TLS"
    ),
    "tls_key": "PEM private key of --tls-cert",
    "tls_client_ca": (
        "PEM CA that must have signed every client's certificate (mTLS, the dashboard's "
        "and /metrics' clients too); also what links between eventq processes trust"
    ),
    "http_actions": (
        "let the dashboard pause/resume queues and delete or retry jobs (read-only "
        "without it)"
    ),
}


def env_name(field_name: str) -> str:
    return "EVENTQ_" + field_name.upper()


def add_arguments(parser: argparse.ArgumentParser,
                  only: Sequence[str] | None = None) -> None:
    """One flag per setting, e.g. --listen-port (env EVENTQ_LISTEN_PORT); with ``only``,
    just those settings' (a command that uses a few lists just those)."""
    group = parser.add_argument_group("settings (flags override EVENTQ_* variables)")
    for item in fields(Settings):
        if only is not None and item.name not in only:
            continue
        flag = "--" + item.name.replace("_", "-")
        # A switch may stand alone (--http-actions) or take a value (--http-actions no).
        switch = {"nargs": "?", "const": "true"} if isinstance(item.default, bool) else {}
        group.add_argument(
            flag,
            dest=item.name,
            default=None,
            metavar=item.name.upper(),
            help=f"{HELP[item.name]} [env {env_name(item.name)}; default {item.default}]",
            **switch,
        )


def was_given(name: str, args: argparse.Namespace, environ: Mapping[str, str]) -> bool:
    """Whether a flag or an EVENTQ_* variable set this setting (not its default)."""
    return getattr(args, name, None) is not None or env_name(name) in environ


def _convert(value: str, like: object, name: str) -> object:
    try:
        if isinstance(like, bool):
            return value.lower() in ("1", "true", "yes", "on")
        if isinstance(like, int):
            return int(value)
        if isinstance(like, Path):
            return Path(value)
        return value
    except ValueError:
        raise ValueError(f"{name}: {value!r} is not a valid {type(like).__name__}") from None


def build_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Defaults, then EVENTQ_* variables, then flags."""
    defaults = Settings()
    changes = {}
    for item in fields(Settings):
        default = getattr(defaults, item.name)
        flag_value = getattr(args, item.name, None)
        raw = flag_value if flag_value is not None else environ.get(env_name(item.name))
        if raw is not None:
            changes[item.name] = _convert(raw, default, item.name)
    changes.setdefault("bulk_topic", "")  # derived from the (maybe changed) commands topic
    changes.setdefault("replication_factor", 0)  # derived from brokers and bootstrap
    return replace(defaults, **changes)


def kafka_security_env(security: KafkaSecurity, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with the Kafka security group's EVENTQ_* variables replaced by
    ``security``'s: how a child process (`eventq up`'s, the restore) is handed them,
    the password never on its command line, where `ps` would show it."""
    group = {env_name(name) for name in KAFKA_SECURITY_SETTINGS}
    return {**{key: value for key, value in environ.items() if key not in group},
            **settings_env(security)}


def kafka_security_from_env(environ: Mapping[str, str]) -> KafkaSecurity:
    """The Kafka security group alone from EVENTQ_* variables (a child process handed
    them with ``kafka_security_env``)."""
    return build_settings(argparse.Namespace(), {
        key: value for key, value in environ.items()
        if key in {env_name(name) for name in KAFKA_SECURITY_SETTINGS}}).kafka_security


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    return build_settings(argparse.Namespace(), os.environ if environ is None else environ)
