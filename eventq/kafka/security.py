"""How every Kafka client of eventq reaches Kafka: its bootstrap servers and the
standard security settings (TLS and SASL), turned into each client library's options
in this one place (docs/security.md, "Where tokens and certificates come from": "eventq's
Kafka clients take the standard security settings (TLS and SASL) through settings").

Each client is given a ``KafkaAccess`` (``Settings.kafka``) or, in tests and tools
against a plain broker, a bootstrap string, and builds its options here: librdkafka's
(``confluent_config``), aiokafka's (``aiokafka_options``), faust's (``faust_options``),
Spark's connector's (``spark_options``) and the Java client's properties
(``java_properties``). No other module names the bootstrap servers to a client, so none
can be made without the security settings (tests/kafka/test_security.py checks the
source for it).

The mapping is pure but for reading the files it is told of: aiokafka takes an
``ssl.SSLContext`` (made once per set of files), and a Java client's own certificate is
given inline.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
SASL_PROTOCOLS = (SASL_PLAINTEXT, SASL_SSL)
TLS_PROTOCOLS = (SSL, SASL_SSL)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_MECHANISM = "SCRAM-SHA-512"
# The Java client's login module of each mechanism (sasl.jaas.config).
JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# librdkafka without a CA file: its own probe of the system's CA bundle, as Python's
# default context and the JVM's cacerts trust the system's CAs.
SYSTEM_CAS = "probe"


@dataclass(frozen=True)
class KafkaSecurity:
    """The Kafka security settings (``kafka_*`` of eventq/settings.py), validated: a
    setting that would be ignored or a missing one is an error naming what to set."""

    protocol: str = PLAINTEXT
    sasl_mechanism: str = DEFAULT_MECHANISM
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)  # never logged nor shown
    ssl_cafile: str = ""  # PEM CA(s) the brokers' certificates are checked with
    ssl_certfile: str = ""  # PEM certificate (chain) of this client (mTLS), with its key
    ssl_keyfile: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "protocol", self.protocol.upper())
        object.__setattr__(self, "sasl_mechanism", self.sasl_mechanism.upper())
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"kafka_security_protocol must be one of {', '.join(PROTOCOLS)}, "
                             f"not {self.protocol!r}")
        if self.sasl_mechanism not in MECHANISMS:
            raise ValueError(f"kafka_sasl_mechanism must be one of {', '.join(MECHANISMS)}, "
                             f"not {self.sasl_mechanism!r}")
        if self.sasl:
            missing = [name for name, value in (("kafka_sasl_username", self.sasl_username),
                                                ("kafka_sasl_password", self.sasl_password))
                       if not value]
            if missing:
                raise ValueError(f"kafka_security_protocol {self.protocol} needs "
                                 f"{' and '.join(missing)} (the SASL user's)")
        elif self.sasl_username or self.sasl_password:
            raise ValueError(f"kafka_sasl_username and kafka_sasl_password are used with "
                             f"kafka_security_protocol SASL_SSL or SASL_PLAINTEXT, not "
                             f"{self.protocol}: set the protocol too")
        files = [name for name, value in (("kafka_ssl_cafile", self.ssl_cafile),
                                          ("kafka_ssl_certfile", self.ssl_certfile),
                                          ("kafka_ssl_keyfile", self.ssl_keyfile)) if value]
        if files and not self.tls:
            raise ValueError(f"{', '.join(files)} are used with kafka_security_protocol SSL "
                             f"or SASL_SSL, not {self.protocol}: set the protocol too")
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise ValueError("kafka_ssl_certfile and kafka_ssl_keyfile go together: give "
                             "both (a client certificate and its key), or neither")

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    def describe(self) -> str:
        """What a message about reaching Kafka may say of it (no password)."""
        text = self.protocol
        if self.sasl:
            text += f", {self.sasl_mechanism} as {self.sasl_username}"
        if self.ssl_certfile:
            text += f", client certificate {self.ssl_certfile}"
        return text


NO_SECURITY = KafkaSecurity()


@dataclass(frozen=True)
class KafkaAccess:
    """Where Kafka is and how to reach it: what every client of eventq is made from.
    Prints as its bootstrap servers, so messages naming it stay as they were."""

    bootstrap: str
    security: KafkaSecurity = NO_SECURITY

    def __str__(self) -> str:
        return self.bootstrap

    @property
    def servers(self) -> list[str]:
        return [part.strip() for part in self.bootstrap.split(",") if part.strip()]


# What a function that makes Kafka clients takes: the settings' KafkaAccess, or a bare
# bootstrap string (tests, tools against a plain local broker); ``access`` tells them apart.
KafkaTarget = KafkaAccess | str


def access(target: KafkaTarget) -> KafkaAccess:
    """``target`` as a KafkaAccess: a bare bootstrap string (tests, tools against a
    plain local broker) is one without security."""
    return target if isinstance(target, KafkaAccess) else KafkaAccess(target)


class KafkaRefused(ConnectionError):
    """Kafka answered but refused this client: its credentials, or the TLS handshake.
    Trying again changes nothing; the message says which settings to fix."""


# librdkafka's error codes of a refusal (confluent_kafka.KafkaError): _AUTHENTICATION,
# _SSL, SASL_AUTHENTICATION_FAILED.
REFUSAL_CODES = frozenset({-169, -181, 58})
TLS_REFUSAL_CODE = -181
# A broker that requires a client certificate (ssl.client.auth=required) and gets none,
# or one it does not trust, ends the connection with a TLS alert. Under TLS 1.3 that
# alert arrives after the client's side of the handshake is done, so librdkafka reports
# it as a failed receive (_TRANSPORT, "tlsv13 alert certificate required"), not _SSL:
# it is told from a broker that is down by the alert's text (OpenSSL's names of them).
TRANSPORT_CODE = -195
CERTIFICATE_ALERTS = ("alert certificate required", "alert bad certificate",
                      "alert unknown ca", "alert certificate unknown",
                      "alert certificate expired", "alert certificate revoked",
                      "alert unsupported certificate")


def certificate_refused(reason: str) -> bool:
    """Whether librdkafka's ``reason`` is a broker's TLS alert about this client's
    certificate (missing, or not signed by a CA the broker trusts)."""
    return any(alert in reason for alert in CERTIFICATE_ALERTS)


def is_refusal(code: int, reason: str) -> bool:
    """Whether a librdkafka error (``code``, ``reason``) is a refusal of this client
    (retrying changes nothing), not a broker that is down or still starting."""
    return code in REFUSAL_CODES or (code == TRANSPORT_CODE and certificate_refused(reason))


def _refusal_fix(security: KafkaSecurity, code: int, reason: str) -> tuple[str, str]:
    """(what was refused, which settings to check) for a refusal."""
    if certificate_refused(reason):
        given = ("the brokers did not accept the client certificate given"
                 if security.ssl_certfile
                 else "the brokers require a client certificate and none was given")
        return ("Kafka refused eventq's client certificate",
                f"{given}: set kafka_ssl_certfile and kafka_ssl_keyfile "
                "(EVENTQ_KAFKA_SSL_CERTFILE, "
                "EVENTQ_KAFKA_SSL_KEYFILE) to a certificate signed by a CA the brokers "
                "trust and its key (a local `eventq kafka start --sasl-ssl --mtls` prints "
                "them)")
    if code == TLS_REFUSAL_CODE:
        return ("the TLS handshake failed",
                "check kafka_ssl_cafile (EVENTQ_KAFKA_SSL_CAFILE: the CA that signed the "
                "brokers' certificates), and kafka_ssl_certfile/kafka_ssl_keyfile if the "
                "brokers require a client certificate")
    return ("Kafka refused eventq's credentials",
            "check kafka_sasl_username and kafka_sasl_password (EVENTQ_KAFKA_SASL_USERNAME, "
            "EVENTQ_KAFKA_SASL_PASSWORD) and kafka_sasl_mechanism "
            f"(now {security.sasl_mechanism}) against the user Kafka knows")


def refusal(target: KafkaTarget, code: int, reason: str) -> KafkaRefused:
    """The error of a refusal (``is_refusal``: librdkafka's ``code`` and ``reason``):
    what was refused, and the settings that decide it."""
    kafka = access(target)
    what, fix = _refusal_fix(kafka.security, code, reason)
    return KafkaRefused(f"{what} at {kafka.bootstrap} ({kafka.security.describe()}): "
                        f"{reason}; {fix}")


# --- librdkafka (confluent-kafka) ------------------------------------------------------


def confluent_security(security: KafkaSecurity) -> dict[str, Any]:
    conf: dict[str, Any] = {}
    if security.protocol != PLAINTEXT:
        conf["security.protocol"] = security.protocol.lower()
    if security.tls:
        conf["ssl.ca.location"] = security.ssl_cafile or SYSTEM_CAS
        if security.ssl_certfile:
            conf["ssl.certificate.location"] = security.ssl_certfile
            conf["ssl.key.location"] = security.ssl_keyfile
    if security.sasl:
        conf["sasl.mechanisms"] = security.sasl_mechanism
        conf["sasl.username"] = security.sasl_username
        conf["sasl.password"] = security.sasl_password
    return conf


def confluent_config(target: KafkaTarget,
                     extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A librdkafka (Producer, Consumer, AdminClient) configuration: the servers, the
    security, then ``extra``."""
    kafka = access(target)
    return {"bootstrap.servers": kafka.bootstrap, **confluent_security(kafka.security),
            **(extra or {})}


# --- aiokafka and faust ----------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def ssl_context(cafile: str, certfile: str, keyfile: str) -> ssl.SSLContext:
    """Python's TLS context for brokers: their certificates checked (against ``cafile``,
    or the system's CAs) and their names too; the client's certificate if given. One per
    set of files: every client of a process shares it."""
    context = ssl.create_default_context(cafile=cafile or None)
    if certfile:
        context.load_cert_chain(certfile, keyfile)
    return context


def _context_of(security: KafkaSecurity) -> ssl.SSLContext | None:
    if not security.tls:
        return None
    return ssl_context(security.ssl_cafile, security.ssl_certfile, security.ssl_keyfile)


def aiokafka_security(security: KafkaSecurity) -> dict[str, Any]:
    options: dict[str, Any] = {"security_protocol": security.protocol}
    context = _context_of(security)
    if context is not None:
        options["ssl_context"] = context
    if security.sasl:
        options["sasl_mechanism"] = security.sasl_mechanism
        options["sasl_plain_username"] = security.sasl_username
        options["sasl_plain_password"] = security.sasl_password
    return options


def aiokafka_options(target: KafkaTarget) -> dict[str, Any]:
    """Keyword arguments of an aiokafka client (AIOKafkaProducer, AIOKafkaConsumer,
    AIOKafkaAdminClient): the servers and the security."""
    kafka = access(target)
    return {"bootstrap_servers": kafka.servers, **aiokafka_security(kafka.security)}


def faust_options(target: KafkaTarget) -> dict[str, Any]:
    """faust.App's ``broker`` (kafka://a:9092;b:9092) and ``broker_credentials``: faust
    hands those to each of its aiokafka clients (faust/transport/drivers/aiokafka.py,
    ``credentials_to_aiokafka_auth``)."""
    kafka = access(target)
    options: dict[str, Any] = {"broker": "kafka://" + ";".join(kafka.servers)}
    security = kafka.security
    credentials: object | None = None
    if security.sasl:
        from faust.auth import SASLCredentials

        # With a context faust's SASLCredentials say SASL_SSL, without it SASL_PLAINTEXT.
        credentials = SASLCredentials(
            username=security.sasl_username, password=security.sasl_password,
            mechanism=security.sasl_mechanism, ssl_context=_context_of(security))
    elif security.tls:
        from faust.auth import SSLCredentials

        credentials = SSLCredentials(_context_of(security))
    if credentials is not None:
        options["broker_credentials"] = credentials
    return options


# --- the Java client (Spark's connector) -------------------------------------------------


def _jaas_quoted(value: str) -> str:
    """A JAAS option value: double-quoted, its backslashes and quotes escaped (Kafka's
    JaasConfig reads it with a StreamTokenizer)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _read_text(path: str) -> str:
    return Path(path).read_text()


def java_properties(security: KafkaSecurity,
                    read_text: Callable[[str], str] = _read_text) -> dict[str, str]:
    """The Kafka Java client's security properties. Trust comes from a PEM truststore
    (ssl.truststore.type=PEM, KIP-651) or the JVM's own CAs; a client certificate is
    given inline (its certificate chain and key, read with ``read_text``) since the PEM
    keystore's file must hold both."""
    props: dict[str, str] = {"security.protocol": security.protocol}
    if security.tls:
        if security.ssl_cafile:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = security.ssl_cafile
        if security.ssl_certfile:
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.certificate.chain"] = read_text(security.ssl_certfile)
            props["ssl.keystore.key"] = read_text(security.ssl_keyfile)
    if security.sasl:
        props["sasl.mechanism"] = security.sasl_mechanism
        props["sasl.jaas.config"] = (
            f"{JAAS_MODULES[security.sasl_mechanism]} required "
            f"username={_jaas_quoted(security.sasl_username)} "
            f"password={_jaas_quoted(security.sasl_password)};")
    return props


def spark_options(target: KafkaTarget) -> dict[str, str]:
    """Options of Spark's Kafka source and sink: every Java client property prefixed
    with ``kafka.``."""
    kafka = access(target)
    props = {"bootstrap.servers": kafka.bootstrap, **java_properties(kafka.security)}
    return {f"kafka.{key}": value for key, value in props.items()}


# --- as settings ------------------------------------------------------------------------

# The Settings fields of the group (eventq/settings.py), in the order they are listed.
SETTINGS = {
    "kafka_security_protocol": "protocol",
    "kafka_sasl_mechanism": "sasl_mechanism",
    "kafka_sasl_username": "sasl_username",
    "kafka_sasl_password": "sasl_password",
    "kafka_ssl_cafile": "ssl_cafile",
    "kafka_ssl_certfile": "ssl_certfile",
    "kafka_ssl_keyfile": "ssl_keyfile",
}


def settings_env(security: KafkaSecurity) -> dict[str, str]:
    """The EVENTQ_* variables that give a process these settings (what `eventq kafka
    start` prints for a secured broker; how a child process is handed the password)."""
    return {f"EVENTQ_{name.upper()}": getattr(security, attribute)
            for name, attribute in SETTINGS.items()
            if getattr(security, attribute) != getattr(NO_SECURITY, attribute)}
