"""TLS and mTLS on the gateway and the links between processes (docs/security.md,
"TLS": a matter of transport, and nothing in the protocol changes).

The contexts are built once at start from the settings, so a missing file or a key that
does not match its certificate is said in one line before anything starts (like a port
in use, docs/architecture.md, "Feedback to users"), never at the first client.

- ``server_context``: the gateway's (``--tls-cert``/``--tls-key``); with
  ``--tls-client-ca`` a client must present a certificate signed by that CA (mTLS).
- ``peer_context``: what this process presents to, and trusts of, the other processes
  of its cluster ("the links between eventq processes use the same certificates"): its
  own certificate (their gateways may require one), and their certificates checked
  against ``--tls-client-ca`` when given (one CA for the cluster), else against this
  process's own certificate (one self-signed certificate shared by the cluster).
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import Callable

from eventq.settings import Settings

log = logging.getLogger(__name__)

# A client that connects and never completes its handshake is dropped after this long.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class _RefusalsLogged(ssl.SSLObject):
    """The TLS state of one connection of the gateway, which says why a handshake is
    refused: the event loop drops a refused connection silently (an ``SSLError`` is an
    ``OSError``, logged at debug level only), and an operator must be able to tell a
    client with the wrong CA from one without a certificate. The loop does not give
    the TLS state the client's address, so the line has none."""

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise  # the handshake goes on
        except ssl.SSLError as error:
            log.warning("refused a TLS connection: %s", describe_refusal(error))
            raise


class TlsUnusable(Exception):
    """The TLS files cannot be used: which and why, in one line."""


def _load(what: str, action: Callable[[], object], *files: str) -> None:
    for name in files:
        if not Path(name).is_file():
            raise TlsUnusable(f"cannot use {what}: {name} is not a file")
    try:
        action()
    except (ssl.SSLError, OSError, ValueError) as error:
        raise TlsUnusable(f"cannot use {what}: {error}") from None


def server_context(settings: Settings) -> ssl.SSLContext | None:
    """The gateway's context, or None without ``--tls-cert``."""
    if not settings.tls_cert:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.sslobject_class = _RefusalsLogged
    _load(f"the certificate {settings.tls_cert} with the key {settings.tls_key}",
          lambda: context.load_cert_chain(settings.tls_cert, settings.tls_key),
          settings.tls_cert, settings.tls_key)
    if settings.tls_client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        _load(f"the client CA {settings.tls_client_ca}",
              lambda: context.load_verify_locations(settings.tls_client_ca),
              settings.tls_client_ca)
    return context


def peer_context(settings: Settings) -> ssl.SSLContext | None:
    """The context of this process's links to the others, or None without TLS."""
    if not settings.tls_cert:
        return None
    trust = settings.tls_client_ca or settings.tls_cert
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load(f"the CA {trust} for links to other eventq processes",
          lambda: context.load_verify_locations(trust), trust)
    _load(f"the certificate {settings.tls_cert} with the key {settings.tls_key}",
          lambda: context.load_cert_chain(settings.tls_cert, settings.tls_key),
          settings.tls_cert, settings.tls_key)
    return context


def describe_refusal(error: BaseException) -> str:
    """Why a handshake failed, in words for a log line (the OpenSSL reason when there
    is one: "tlsv13 alert certificate required", "certificate verify failed")."""
    if isinstance(error, ssl.SSLCertVerificationError) and error.verify_message:
        return f"certificate verify failed: {error.verify_message}"
    if isinstance(error, ssl.SSLError) and error.reason:
        return error.reason.lower().replace("_", " ")
    if isinstance(error, TimeoutError):
        return f"no handshake within {TLS_HANDSHAKE_TIMEOUT_S:g} s"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
