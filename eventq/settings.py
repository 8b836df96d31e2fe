"""The one settings object. Built once in the CLI from flags and ``EVENTQ_*`` variables
and passed down; nothing reads the environment anywhere else or at import time.

Every setting is one flat attribute (``settings.listen_port``), one flag
(``--listen-port``) and one variable (``EVENTQ_LISTEN_PORT``). They are declared in
groups (GROUPS: general, the local broker, Kafka access, topics, the server, security),
each with its help beside it; a group is one heading of ``--help`` and is validated
together.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence, TypeVar

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
MAX_PARTITIONS = 1024
MAX_BROKERS = 9
MAX_PROCESSES = 64
MAX_STANDBY_REPLICAS = 8
SESSION_TIMEOUT_MS_RANGE = (3000, 300_000)
MAX_TCP_PORT = 65535

T = TypeVar("T")


def local_node_ports(port: int, controller_port: int, brokers: int) -> list[tuple[int, int]]:
    """The local Kafka's nodes listen on consecutive (port, controller port) pairs from
    the first node's: 9092/9093, 9094/9095, ..."""
    return [(port + 2 * i, controller_port + 2 * i) for i in range(brokers)]


@dataclass(frozen=True)
class Group:
    """Settings that belong together: one heading of ``--help``, validated together."""

    title: str
    about: str

    def setting(self, default: T, text: str, *, secret: bool = False) -> T:
        """A field of Settings in this group, ``text`` its help (``secret``: kept out of
        the settings' repr, so never logged nor shown)."""
        return field(default=default, repr=not secret,
                     metadata={"help": text, "group": self})


GENERAL = Group("general", "Where eventq keeps its data and how much it logs")
LOCAL_BROKER = Group(
    "local broker", "The local Kafka of `eventq kafka start` (and of `eventq up` "
    "without --bootstrap)")
KAFKA_ACCESS = Group(
    "Kafka access", "The brokers eventq's Kafka clients use and how they authenticate "
    "and encrypt (docs/security.md)")
TOPICS = Group("topics", "eventq's topics, created by eventq with exact configs")
SERVER = Group(
    "server", "The gateway, its processes, scaling out, metrics and the dashboard")
SECURITY = Group("security", "The gateway's tokens and TLS (docs/security.md)")
GROUPS = (GENERAL, LOCAL_BROKER, KAFKA_ACCESS, TOPICS, SERVER, SECURITY)


@dataclass(frozen=True)
class Settings:
    """Every setting, validated and completed (derived defaults, absolute paths)."""

    # --- general --------------------------------------------------------------------------
    data_dir: Path = GENERAL.setting(
        Path("var"), "directory for the local broker's data and the RocksDB state")
    log_level: str = GENERAL.setting(  # INFO: normal events; WARNING: look at it
        "INFO", "log level (DEBUG, INFO, WARNING, ERROR)")

    # --- local broker ---------------------------------------------------------------------
    kafka_host: str = LOCAL_BROKER.setting("127.0.0.1", "address the local broker listens on")
    kafka_port: int = LOCAL_BROKER.setting(9092, "port of the local broker")
    controller_port: int = LOCAL_BROKER.setting(
        9093, "KRaft controller port of the local broker")
    kafka_heap_mb: int = LOCAL_BROKER.setting(768, "JVM heap of the local broker, MiB")
    brokers: int = LOCAL_BROKER.setting(1, (
        "nodes of the local Kafka (`eventq kafka start`): 3 runs a cluster on "
        "consecutive port pairs from --kafka-port/--controller-port"))

    # --- Kafka access ---------------------------------------------------------------------
    # eventq/kafka/security.py maps these to each client library's options.
    bootstrap: str = KAFKA_ACCESS.setting(  # empty: the local broker(s)
        "", "Kafka bootstrap servers (default: the local broker)")
    kafka_security_protocol: str = KAFKA_ACCESS.setting("PLAINTEXT", (
        "how eventq's Kafka clients talk to the brokers: PLAINTEXT, SSL (TLS), "
        "SASL_PLAINTEXT or SASL_SSL (SASL over TLS)"))
    kafka_sasl_mechanism: str = KAFKA_ACCESS.setting(
        "SCRAM-SHA-512", "SASL mechanism: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN")
    kafka_sasl_username: str = KAFKA_ACCESS.setting("", "SASL user (with a SASL_* protocol)")
    kafka_sasl_password: str = KAFKA_ACCESS.setting("", (
        "SASL password; prefer the variable to the flag, which `ps` shows (never logged)"),
        secret=True)
    kafka_ssl_cafile: str = KAFKA_ACCESS.setting("", (
        "PEM CA file the brokers' certificates are checked against (default: the "
        "system's CAs)"))
    kafka_ssl_certfile: str = KAFKA_ACCESS.setting(
        "", "PEM client certificate, for brokers that require one (mTLS)")
    kafka_ssl_keyfile: str = KAFKA_ACCESS.setting("", "PEM private key of --kafka-ssl-certfile")

    # --- topics ---------------------------------------------------------------------------
    # 4: fewer partitions carry more commands per record; 2 to 16 measured on 2 cores
    # (docs/operations.md, "On many machines"). Topics that exist keep their count
    # (eventq/run/serve.py, with_existing_partitions).
    partitions: int = TOPICS.setting(4, "partitions of eventq's topics (fixed at creation)")
    replication_factor: int = TOPICS.setting(0, (
        "replication factor of eventq's topics (0: one per local broker, at most 3; "
        "1 with --bootstrap)"))
    commands_topic: str = TOPICS.setting("eventq.commands", "name of the command log topic")
    jobs_topic: str = TOPICS.setting("eventq.jobs", "name of the compacted state log topic")
    bulk_topic: str = TOPICS.setting("", (
        "name of the staging topic bulk producers write to (default: the command log's "
        "name with 'commands' replaced by 'bulk': eventq.bulk)"))
    commands_retention_ms: int = TOPICS.setting(
        ONE_WEEK_MS, "retention of the command log, ms")

    # --- server ---------------------------------------------------------------------------
    listen_host: str = SERVER.setting(
        "127.0.0.1", "address eventq serves the workq protocol on")
    listen_port: int = SERVER.setting(9922, "port eventq serves the workq protocol on")
    app_id: str = SERVER.setting("eventq", "faust application id (consumer group)")
    write_timeout_ms: int = SERVER.setting(5000, (
        "the write deadline: how long a command may take to be written to Kafka and "
        "applied before the client gets -SERVER-ERROR (saying whether it may still take "
        "effect), ms"))
    max_state_record_bytes: int = SERVER.setting(MAX_STATE_RECORD_BYTES, (
        "largest job state record the processor stores; a command that would exceed it "
        "is rejected (lower it only to test that; replays must use the same value)"))
    # Scaling out (docs/architecture.md, "Scaling out"): the address other eventq
    # processes reach this one's gateway at, warm copies of each partition's table kept
    # by other processes, and how soon a silent process counts as dead.
    advertise: str = SERVER.setting("", (
        "host:port other eventq processes reach this one's gateway at (default: "
        "listen host and port); they forward requests for this process's jobs there"))
    standby_replicas: int = SERVER.setting(
        1, "warm copies of each partition's table kept by other processes, for fail-over")
    session_timeout_ms: int = SERVER.setting(
        6000, "a process silent this long counts as dead and its partitions move, ms")
    processes: int = SERVER.setting(
        1, "eventq up: how many eventq processes to start, on consecutive ports")
    # Metrics and the dashboard (docs/architecture.md, "Metrics and the dashboard";
    # "off": neither, and no live statistics).
    http_port: str = SERVER.setting("127.0.0.1:9980", (
        "[host:]port of the Prometheus metrics (/metrics) and the web dashboard (/), or "
        "'off'; eventq up gives each process the next port"))
    http_actions: bool = SERVER.setting(False, (
        "let the dashboard pause/resume queues and delete or retry jobs (read-only "
        "without it)"))

    # --- security -------------------------------------------------------------------------
    # Tokens and roles: read at start and on SIGHUP; none: every client may do
    # everything, as workq. TLS on the gateway, the dashboard and the links between
    # processes: a client CA makes client certificates required (mTLS).
    tokens_file: str = SECURITY.setting("", (
        "file of tokens and their roles, one `<token> <role>[,<role>...] [<prefix>]` per "
        "line (roles: reader, worker, producer, admin); clients must `auth` first; read "
        "again on SIGHUP (default: no tokens)"))
    tls_cert: str = SECURITY.setting("", (
        "PEM certificate (chain) the gateway and the dashboard present: both then speak "
        "TLS"))
    tls_key: str = SECURITY.setting("", "PEM private key of --tls-cert")
    tls_client_ca: str = SECURITY.setting("", (
        "PEM CA that must have signed every client's certificate (mTLS, the dashboard's "
        "and /metrics' clients too); also what links between eventq processes trust"))

    def __post_init__(self) -> None:
        """Each group validated, what is derived filled in, files made absolute."""
        self._check_general()
        self._check_local_broker()
        self._check_kafka_access()
        self._check_topics()
        self._check_server()
        self._check_security()

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)  # frozen: only __post_init__ completes it

    def _resolve_files(self, *names: str) -> None:
        # Resolved once: the broker JVM and faust run in other working directories, and
        # `eventq up` starts its processes elsewhere.
        for name in names:
            if getattr(self, name):
                self._set(name, str(Path(getattr(self, name)).resolve()))

    def _check_port(self, name: str) -> None:
        port = getattr(self, name)
        if not 0 <= port <= MAX_TCP_PORT:
            raise ValueError(f"{name} must be a TCP port, not {port}")

    def _check_general(self) -> None:
        self._set("data_dir", Path(self.data_dir).resolve())

    def _check_local_broker(self) -> None:
        self._check_port("kafka_port")
        self._check_port("controller_port")
        if not 1 <= self.brokers <= MAX_BROKERS:
            raise ValueError(f"brokers must be 1..{MAX_BROKERS}, not {self.brokers}")

    def _check_kafka_access(self) -> None:
        self._resolve_files("kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile")
        security = self.kafka_security  # validates the group: an error says what to set
        self._set("kafka_security_protocol", security.protocol)
        self._set("kafka_sasl_mechanism", security.sasl_mechanism)

    def _check_topics(self) -> None:
        if not self.bulk_topic:
            self._set("bulk_topic", bulk_name_for(self.commands_topic))
        if not 1 <= self.partitions <= MAX_PARTITIONS:
            raise ValueError(f"partitions must be 1..{MAX_PARTITIONS}, not {self.partitions}")
        if self.replication_factor == 0:
            self._set("replication_factor", min(self.brokers, 3) if not self.bootstrap else 1)

    def _check_server(self) -> None:
        self._check_port("listen_port")
        if not 1 <= self.processes <= MAX_PROCESSES:
            raise ValueError(f"processes must be 1..{MAX_PROCESSES}, not {self.processes}")
        if not 0 <= self.standby_replicas <= MAX_STANDBY_REPLICAS:
            raise ValueError(f"standby_replicas must be 0..{MAX_STANDBY_REPLICAS}, "
                             f"not {self.standby_replicas}")
        low, high = SESSION_TIMEOUT_MS_RANGE
        if not low <= self.session_timeout_ms <= high:
            raise ValueError(f"session_timeout_ms must be {low}..{high}")
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
        if self.write_timeout_ms <= 0:
            raise ValueError("write_timeout_ms must be positive")
        if not 1 <= self.max_state_record_bytes <= MAX_STATE_RECORD_BYTES:
            raise ValueError(
                f"max_state_record_bytes must be 1..{MAX_STATE_RECORD_BYTES}, "
                f"not {self.max_state_record_bytes}"
            )

    def _check_security(self) -> None:
        self._resolve_files("tokens_file", "tls_cert", "tls_key", "tls_client_ca")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together: give both, or neither")
        if self.tls_client_ca and not self.tls_cert:
            raise ValueError("tls_client_ca needs tls_cert and tls_key (the server's own)")

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


def env_name(field_name: str) -> str:
    return "EVENTQ_" + field_name.upper()


def add_arguments(parser: argparse.ArgumentParser,
                  only: Sequence[str] | None = None) -> None:
    """One flag per setting, e.g. --listen-port (env EVENTQ_LISTEN_PORT), under one
    heading per group of settings; with ``only``, just those settings' (a command that
    uses a few lists just those)."""
    shown = [item for item in fields(Settings) if only is None or item.name in only]
    note = "Flags override EVENTQ_* variables."
    for group in GROUPS:
        members = [item for item in shown if item.metadata["group"] is group]
        if not members:
            continue
        arguments = parser.add_argument_group(
            f"{group.title} settings", f"{group.about}. {note}".strip())
        note = ""
        for item in members:
            _add_flag(arguments, item)


def _add_flag(arguments: argparse._ArgumentGroup, item: Field[Any]) -> None:
    flag = "--" + item.name.replace("_", "-")
    text = f"{item.metadata['help']} [env {env_name(item.name)}; default {item.default}]"
    if isinstance(item.default, bool):
        # A switch may stand alone (--http-actions) or take a value (--http-actions no).
        arguments.add_argument(flag, dest=item.name, default=None, metavar=item.name.upper(),
                               help=text, nargs="?", const="true")
    else:
        arguments.add_argument(flag, dest=item.name, default=None, metavar=item.name.upper(),
                               help=text)


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
    # Any: each value converted to its field's type by _convert; Settings checks them.
    changes: dict[str, Any] = {}
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
