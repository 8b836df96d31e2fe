"""A client's TLS context for a gateway that speaks TLS (docs/security.md, "TLS and
client certificates")::

    from eventq.client import Client, tls_context

    with Client("queue.example", 9922, tls=tls_context(ca="ca.pem"), token="...") as c:
        ...

``ca``: the CA that signed the server's certificate (None: the system's CAs);
``cert``/``key``: this client's certificate, for a server that requires one (mTLS).
The server's name is checked against its certificate (an IP address too).
"""

from __future__ import annotations

import ssl
from pathlib import Path


def tls_context(ca: str | Path | None = None, cert: str | Path | None = None,
                key: str | Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH,
                                         cafile=None if ca is None else str(ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert is not None:
        context.load_cert_chain(str(cert), None if key is None else str(key))
    return context
