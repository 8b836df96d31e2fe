"""The Kafka security settings (docs/security.md, "A secured Kafka": every Kafka client of
eventq takes the same TLS and SASL settings) and their one mapping to each client
library's options (eventq/kafka/security.py); and the source check that no Kafka client of
eventq is made without it. No broker: tests/e2e/test_secured_kafka.py runs eventq against
a SASL_SSL one."""

from __future__ import annotations

import ast
import ssl
import subprocess
from pathlib import Path

import pytest

from eventq.kafka.security import (
    NO_SECURITY,
    KafkaAccess,
    KafkaSecurity,
    aiokafka_options,
    confluent_config,
    faust_options,
    is_refusal,
    java_properties,
    refusal,
    settings_env,
    spark_options,
)
from eventq.settings import (
    Settings,
    kafka_security_env,
    kafka_security_from_env,
    settings_from_env,
)
from tools.tls_files import make_tls_files

ROOT = Path(__file__).resolve().parents[2]
SASL = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                     sasl_username="eventq", sasl_password="s3cr3t")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


# --- settings -----------------------------------------------------------------------------


def test_every_setting_is_an_eventq_variable_and_the_password_is_never_shown(files):
    settings = settings_from_env({
        "EVENTQ_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "EVENTQ_KAFKA_SASL_MECHANISM": "scram-sha-256",
        "EVENTQ_KAFKA_SASL_USERNAME": "eventq",
        "EVENTQ_KAFKA_SASL_PASSWORD": "s3cr3t-pw",
        "EVENTQ_KAFKA_SSL_CAFILE": files.pem("ca"),
        "EVENTQ_KAFKA_SSL_CERTFILE": files.pem("client"),
        "EVENTQ_KAFKA_SSL_KEYFILE": files.key("client"),
    })
    assert settings.kafka_security_protocol == "SASL_SSL"  # any case, kept upper
    assert settings.kafka_sasl_mechanism == "SCRAM-SHA-256"
    assert settings.kafka == KafkaAccess("127.0.0.1:9092", settings.kafka_security)
    assert settings.kafka_security.ssl_certfile == files.pem("client")
    for shown in (repr(settings), repr(settings.kafka), str(settings.kafka),
                  settings.kafka_security.describe()):
        assert "s3cr3t-pw" not in shown
    assert str(settings.kafka) == "127.0.0.1:9092"  # messages name it as before


@pytest.mark.parametrize("env, says", [
    ({"EVENTQ_KAFKA_SECURITY_PROTOCOL": "TLS"}, "kafka_security_protocol must be one of"),
    ({"EVENTQ_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "EVENTQ_KAFKA_SASL_MECHANISM": "GSSAPI",
      "EVENTQ_KAFKA_SASL_USERNAME": "u", "EVENTQ_KAFKA_SASL_PASSWORD": "p"},
     "kafka_sasl_mechanism must be one of"),
    ({"EVENTQ_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "EVENTQ_KAFKA_SASL_USERNAME": "u"},
     "SASL_SSL needs kafka_sasl_password"),
    ({"EVENTQ_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"},
     "needs kafka_sasl_username and kafka_sasl_password"),
    ({"EVENTQ_KAFKA_SASL_USERNAME": "u", "EVENTQ_KAFKA_SASL_PASSWORD": "p"},
     "not PLAINTEXT: set the protocol too"),
    ({"EVENTQ_KAFKA_SSL_CAFILE": "ca.pem"}, "kafka_ssl_cafile are used with"),
    ({"EVENTQ_KAFKA_SECURITY_PROTOCOL": "SSL", "EVENTQ_KAFKA_SSL_CERTFILE": "c.pem"},
     "kafka_ssl_certfile and kafka_ssl_keyfile go together"),
])
def test_a_wrong_or_missing_setting_says_what_to_set(env, says):
    with pytest.raises(ValueError, match=says):
        settings_from_env(env)


def test_the_group_reaches_a_child_by_its_environment_and_only_it():
    settings = Settings(kafka_security_protocol="SASL_SSL", kafka_sasl_username="eventq",
                        kafka_sasl_password="pw")
    # A flag overrode a variable of the parent's: the child gets the flag's value, and a
    # variable of the group the settings do not set is not passed on.
    env = kafka_security_env(settings.kafka_security, {
        "PATH": "/bin", "EVENTQ_KAFKA_SASL_PASSWORD": "old", "EVENTQ_KAFKA_SSL_CAFILE": "x"})
    assert env == {"PATH": "/bin", "EVENTQ_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                   "EVENTQ_KAFKA_SASL_USERNAME": "eventq", "EVENTQ_KAFKA_SASL_PASSWORD": "pw"}
    assert kafka_security_from_env({**env, "EVENTQ_PARTITIONS": "not a number"}) == \
        settings.kafka_security


def test_eventq_up_gives_its_processes_the_password_outside_their_command_line():
    from eventq.run.up import ServeProcess

    settings = Settings(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_username="eventq",
                        kafka_sasl_password="pw-on-no-command-line")
    child = ServeProcess(settings, 0)
    assert not any("pw-on-no-command-line" in part for part in child.command)
    assert child.env["EVENTQ_KAFKA_SASL_PASSWORD"] == "pw-on-no-command-line"
    assert child.env["EVENTQ_KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"


# --- the mapping --------------------------------------------------------------------------


def test_plaintext_is_what_each_client_had_before():
    assert confluent_config("a:1, b:2", {"acks": "all"}) == {
        "bootstrap.servers": "a:1, b:2", "acks": "all"}
    assert aiokafka_options("a:1, b:2") == {"bootstrap_servers": ["a:1", "b:2"],
                                            "security_protocol": "PLAINTEXT"}
    assert faust_options("a:1, b:2") == {"broker": "kafka://a:1;b:2"}
    assert spark_options("a:1,b:2") == {"kafka.bootstrap.servers": "a:1,b:2",
                                        "kafka.security.protocol": "PLAINTEXT"}
    assert KafkaAccess("a:1").security is NO_SECURITY


def test_sasl_ssl_for_librdkafka(files):
    security = KafkaSecurity(**{**SASL.__dict__, "ssl_cafile": files.pem("ca")})
    assert confluent_config(KafkaAccess("k:9093", security), {"client.id": "x"}) == {
        "bootstrap.servers": "k:9093", "security.protocol": "sasl_ssl",
        "ssl.ca.location": files.pem("ca"), "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "eventq", "sasl.password": "s3cr3t", "client.id": "x"}
    mtls = KafkaSecurity(protocol="SSL", ssl_certfile="c.pem", ssl_keyfile="c.key")
    assert confluent_config(KafkaAccess("k:1", mtls)) == {
        "bootstrap.servers": "k:1", "security.protocol": "ssl",
        "ssl.ca.location": "probe",  # no CA file: the system's
        "ssl.certificate.location": "c.pem", "ssl.key.location": "c.key"}


def test_sasl_ssl_for_aiokafka_and_faust(files):
    from faust.auth import SASLCredentials, SSLCredentials
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    security = KafkaSecurity(**{**SASL.__dict__, "ssl_cafile": files.pem("ca"),
                                "ssl_certfile": files.pem("client"),
                                "ssl_keyfile": files.key("client")})
    kafka = KafkaAccess("k:9093", security)
    options = aiokafka_options(kafka)
    context = options.pop("ssl_context")
    assert options == {"bootstrap_servers": ["k:9093"], "security_protocol": "SASL_SSL",
                       "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "eventq",
                       "sasl_plain_password": "s3cr3t"}
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert aiokafka_options(kafka)["ssl_context"] is context  # one per process
    # faust hands its aiokafka clients the same.
    credentials = faust_options(kafka)["broker_credentials"]
    assert isinstance(credentials, SASLCredentials)
    assert credentials_to_aiokafka_auth(credentials) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "eventq", "sasl_plain_password": "s3cr3t",
        "ssl_context": context}
    plain_sasl = KafkaSecurity(**{**SASL.__dict__, "protocol": "SASL_PLAINTEXT"})
    assert credentials_to_aiokafka_auth(
        faust_options(KafkaAccess("k:1", plain_sasl))["broker_credentials"]
    )["security_protocol"] == "SASL_PLAINTEXT"
    tls_only = faust_options(KafkaAccess("k:1", KafkaSecurity(protocol="SSL")))
    assert isinstance(tls_only["broker_credentials"], SSLCredentials)


def test_sasl_ssl_for_the_java_client_and_spark(files):
    security = KafkaSecurity(**{**SASL.__dict__, "sasl_password": 'we"ird\\pw',
                                "ssl_cafile": files.pem("ca")})
    assert spark_options(KafkaAccess("k:9093", security)) == {
        "kafka.bootstrap.servers": "k:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": files.pem("ca"),
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            'org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="eventq" password="we\\"ird\\\\pw";'),
    }
    plain = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                          sasl_username="u", sasl_password="p")
    assert java_properties(plain)["sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required")
    mtls = KafkaSecurity(protocol="SSL", ssl_certfile=files.pem("client"),
                         ssl_keyfile=files.key("client"))
    props = java_properties(mtls)
    assert props["ssl.keystore.type"] == "PEM"
    assert props["ssl.keystore.certificate.chain"].startswith("-----BEGIN CERTIFICATE")
    assert "PRIVATE KEY" in props["ssl.keystore.key"]
    assert "ssl.truststore.location" not in props  # the JVM's own CAs


def test_a_refusal_says_which_settings_decide_it():
    kafka = KafkaAccess("k:9093", SASL)
    text = str(refusal(kafka, -169, "SASL authentication error: invalid credentials"))
    assert text.startswith("Kafka refused eventq's credentials at k:9093 "
                           "(SASL_SSL, SCRAM-SHA-512 as eventq)")
    assert "EVENTQ_KAFKA_SASL_PASSWORD" in text and "s3cr3t" not in text
    assert "kafka_ssl_cafile" in str(refusal(kafka, -181, "certificate verify failed"))


# What librdkafka reports of a broker that requires a client certificate and got none
# (TLS 1.3: the alert comes with the first response, as a failed receive).
NO_CLIENT_CERT = ("sasl_ssl://127.0.0.1:9093/bootstrap: Receive failed: error:0A00045C:SSL "
                  "routines::tlsv13 alert certificate required: SSL alert number 116 (after "
                  "0ms in state APIVERSION_QUERY)")


def test_a_missing_client_certificate_is_a_refusal_naming_the_certificate_settings(files):
    assert is_refusal(-195, NO_CLIENT_CERT)
    assert not is_refusal(-195, "sasl_ssl://k:9093/bootstrap: Connect to ipv4#127.0.0.1:9093 "
                                "failed: Connection refused")  # down: waiting helps
    text = str(refusal(KafkaAccess("k:9093", SASL), -195, NO_CLIENT_CERT))
    assert text.startswith("Kafka refused eventq's client certificate at k:9093 "
                           "(SASL_SSL, SCRAM-SHA-512 as eventq)"), text
    assert "none was given" in text and "EVENTQ_KAFKA_SSL_CERTFILE" in text, text
    assert "kafka_ssl_keyfile" in text and "s3cr3t" not in text, text
    mtls = KafkaSecurity(**{**SASL.__dict__, "ssl_certfile": files.pem("client"),
                            "ssl_keyfile": files.key("client")})
    # What a Kafka 3.9 broker (Java) sends for a certificate of another CA, or none.
    untrusted = str(refusal(KafkaAccess("k:9093", mtls), -195,
                            "sasl_ssl://k:9093/bootstrap: Receive failed: error:0A000412:SSL "
                            "routines::ssl/tls alert bad certificate: SSL alert number 42"))
    assert "did not accept the client certificate" in untrusted, untrusted
    assert f"client certificate {files.pem('client')}" in untrusted  # describe() names it


# --- no client without it -----------------------------------------------------------------

# Constructors of Kafka clients, by the name they are called with.
CLIENTS = {"Producer", "Consumer", "AdminClient", "SerializingProducer",
           "DeserializingConsumer", "AIOKafkaProducer", "AIOKafkaConsumer",
           "AIOKafkaAdminClient", "AIOKafkaClient", "App"}
MAPPINGS = {"confluent_config", "aiokafka_options", "faust_options", "spark_options"}
# What names the servers to a client: only eventq/kafka/security.py may.
SERVER_WORDS = ("bootstrap.servers", "bootstrap_servers")


def sources():
    for package in ("eventq", "streams"):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text()


def called_name(call: ast.Call) -> str | None:
    function = call.func
    if isinstance(function, ast.Name):
        return function.id
    if isinstance(function, ast.Attribute):
        return function.attr
    return None


def test_every_kafka_client_is_made_with_the_security_settings():
    """Each construction of a Kafka client in eventq and streams takes its options from
    eventq/kafka/security.py, and nothing else names the bootstrap servers: a client
    made another way would ignore the security settings and fail against a secured
    cluster (or reach a plain one it should not)."""
    unmapped, naming = [], []
    for path, text in sources():
        if path == "eventq/kafka/security.py":
            continue
        naming += [f"{path}: names {word!r}" for word in SERVER_WORDS
                   if f'"{word}"' in text or f"{word}=" in text]
        naming += [f"{path}: Spark option 'kafka.bootstrap.servers'"
                   for _ in [1] if '"kafka.bootstrap.servers"' in text]
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call) or called_name(node) not in CLIENTS:
                continue
            used = {called_name(inner) for inner in ast.walk(node)
                    if isinstance(inner, ast.Call)}
            if not used & MAPPINGS:
                unmapped.append(f"{path}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert not naming, naming
    assert not unmapped, "Kafka clients made without eventq/kafka/security.py:\n" + "\n".join(
        unmapped)


def test_the_settings_reach_clients_as_settings_kafka_not_a_bare_bootstrap():
    """``settings.kafka_bootstrap`` is the servers' text, for messages; a client is
    handed ``settings.kafka`` (servers and security). Passed as an argument anywhere but
    to a child's command line (which gets the security in its environment), it would
    reach a client without the security settings."""
    allowed = {("eventq/run/up.py", "List"), ("eventq/run/serve.py", "List")}
    found = []
    for path, text in sources():
        tree = ast.parse(text)
        for node in ast.walk(tree):
            children = list(ast.iter_child_nodes(node))
            if isinstance(node, ast.JoinedStr):
                continue
            for child in children:
                if not (isinstance(child, ast.Attribute) and child.attr == "kafka_bootstrap"):
                    continue
                if isinstance(node, ast.FormattedValue) or (path, type(node).__name__) in allowed:
                    continue
                if path == "eventq/settings.py":
                    continue
                found.append(f"{path}:{child.lineno}: {ast.unparse(node)[:100]}")
    assert not found, found


# --- the secured local broker's configuration (no JVM) ------------------------------------


def test_a_secured_local_broker_has_one_sasl_ssl_listener_and_its_clients_settings(tmp_path):
    from dataclasses import replace

    from eventq.run.localkafka import broker

    config = broker.BrokerConfig(home=tmp_path / "kafka", port=19092, controller_port=19093,
                                 sasl_ssl=True)
    broker.prepare_security(config)
    props = broker.server_properties(config)
    assert props["listeners"] == "SASL_SSL://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "SASL_SSL://127.0.0.1:19092"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    security = broker.local_security(config)
    assert (security.protocol, security.sasl_username) == ("SASL_SSL", "eventq")
    assert len(security.sasl_password) >= 32
    assert f'password="{security.sasl_password}"' in props[
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert (config.security_dir / "password").stat().st_mode & 0o077 == 0
    # Later starts (the supervisor's, `eventq up`'s) know it without being told, and
    # the nodes of a cluster share one CA and user.
    later = replace(config, sasl_ssl=False)
    assert broker.secured(later) and broker.local_security(later) == security
    nodes = broker.cluster_configs(later, 3)
    assert {node.security_dir for node in nodes} == {config.security_dir}
    assert all(broker.secured(node) for node in nodes)
    # A plain broker's storage has no SCRAM user: it cannot be secured in place.
    plain = broker.BrokerConfig(home=tmp_path / "plain", sasl_ssl=True)
    plain.data_dir.mkdir(parents=True)
    (plain.data_dir / "meta.properties").write_text("cluster.id=x\n")
    with pytest.raises(broker.BrokerError, match="formatted without SASL"):
        broker.prepare_security(plain)
    assert "listeners" in broker.server_properties(broker.BrokerConfig(home=tmp_path / "p"))
    assert not broker.secured(broker.BrokerConfig(home=tmp_path / "p"))


LISTENER_CLIENT_AUTH = "listener.name.sasl_ssl.ssl.client.auth"


def openssl_verifies(security_dir: Path, purpose: str, certificate: str) -> bool:
    done = subprocess.run(["openssl", "verify", "-CAfile", "ca.pem", "-purpose", purpose,
                           certificate], cwd=security_dir, capture_output=True, text=True)
    return done.returncode == 0


def test_an_mtls_local_broker_requires_client_certificates_and_stays_so(tmp_path):
    from dataclasses import replace

    from eventq.run.localkafka import broker

    config = broker.BrokerConfig(home=tmp_path / "kafka", sasl_ssl=True)
    broker.prepare_security(config)  # first secured without client certificates
    assert broker.server_properties(config)[LISTENER_CLIENT_AUTH] == "none"
    assert not broker.local_security(config).ssl_certfile
    password = broker.local_security(config).sasl_password
    # A later start with --mtls adds them: same CA and user (the storage is unchanged).
    mtls = replace(config, client_certs=True)
    broker.prepare_security(mtls)
    directory = config.security_dir
    assert directory is not None
    # The listener's own setting: Kafka ignores the broker-wide one on SASL_SSL (KIP-684).
    assert broker.server_properties(mtls)[LISTENER_CLIENT_AUTH] == "required"
    security = broker.local_security(mtls)
    assert security.ssl_certfile == str(directory / "client.pem")
    assert security.ssl_keyfile == str(directory / "client.key")
    assert security.sasl_password == password
    assert (directory / "client.key").stat().st_mode & 0o077 == 0
    # The client certificate is signed by the brokers' CA, and the broker's own serves
    # as a client's too (the nodes present it to each other over SASL_SSL).
    assert openssl_verifies(directory, "sslclient", "client.pem")
    assert openssl_verifies(directory, "sslclient", "broker.pem")
    assert openssl_verifies(directory, "sslserver", "broker.pem")
    # Later starts (the supervisor's, `eventq up`'s, any node of a cluster) keep it.
    later = replace(config, sasl_ssl=False, client_certs=False)
    assert broker.requires_client_certs(later) and broker.local_security(later) == security
    assert all(broker.server_properties(node)[LISTENER_CLIENT_AUTH] == "required"
               for node in broker.cluster_configs(later, 3))
    env = settings_env(security)
    assert env["EVENTQ_KAFKA_SSL_CERTFILE"] == security.ssl_certfile
    assert env["EVENTQ_KAFKA_SSL_KEYFILE"] == security.ssl_keyfile


def test_mtls_without_sasl_ssl_is_refused_before_anything_starts(tmp_path, capsys):
    from eventq.cli.main import main

    assert main(["kafka", "start", "--mtls", "--data-dir", str(tmp_path)]) == 1
    assert "--mtls needs --sasl-ssl" in capsys.readouterr().err
    assert not (tmp_path / "kafka").exists()
