"""A secured local Kafka (`eventq kafka start --sasl-ssl [--mtls]`, docs/security.md, "A
secured Kafka"): one SASL_SSL listener, its SCRAM user made when the storage is
formatted, certificates from a CA of its own, and with --mtls a client certificate every
client must present.
The files are made once in the node's security dir; a node whose dir holds them stays
secured at every later start.
"""

from __future__ import annotations

import ipaddress
import secrets
import subprocess

from eventq.kafka.security import (
    NO_SECURITY,
    SASL_SSL,
    KafkaAccess,
    KafkaSecurity,
)
from eventq.run.localkafka.config import BrokerConfig, BrokerError

# A secured local broker (`eventq kafka start --sasl-ssl`): one SASL_SSL listener, its
# SCRAM user made when the storage is formatted, certificates from a CA of its own.
LOCAL_USER = "eventq"
LOCAL_MECHANISM = "SCRAM-SHA-512"
CERTIFICATE_DAYS = 3650
# With --mtls: the certificate (signed by the same CA) and key eventq's clients present.
CLIENT_CERT = "client.pem"
CLIENT_KEY = "client.key"


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


def security_properties(config: BrokerConfig) -> dict[str, str]:
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
