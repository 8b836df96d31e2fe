"""Ports (eventq/gateway/listeners.py; docs/architecture.md, "Feedback to users"): what a port
that cannot be bound means, said with the flag to change, and listeners that hold their
ports until handed over."""

from __future__ import annotations

import errno
import socket

import pytest

from eventq.gateway.listeners import (
    Endpoint,
    Listeners,
    PortUnusable,
    bind_endpoint,
    endpoints,
    port_problem,
)
from eventq.settings import Settings

GATEWAY = Endpoint("the workq protocol", "127.0.0.1", 9922, "--listen-port", "--listen-host")
DASHBOARD = Endpoint("the dashboard and metrics", "127.0.0.1", 9980, "--http-port",
                     "--http-port HOST:PORT", ", or --http-port off")


def test_a_port_in_use_names_it_and_the_flag_to_change():
    text = port_problem(GATEWAY, OSError(errno.EADDRINUSE, "Address already in use"))
    assert text.startswith("cannot serve the workq protocol on 127.0.0.1:9922: the port "
                           "is in use")
    assert text.endswith(": give another --listen-port")
    text = port_problem(DASHBOARD, OSError(errno.EADDRINUSE, "Address already in use"))
    assert text.endswith(": give another --http-port, or --http-port off")


def test_an_address_not_of_this_machine_names_the_host_flag():
    text = port_problem(GATEWAY, OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"))
    assert "Cannot assign requested address" in text and text.endswith("--listen-host")
    assert "below 1024" in port_problem(GATEWAY, OSError(errno.EACCES, "Permission denied"))


def test_the_endpoints_of_settings():
    settings = Settings(listen_port=7000, http_port="7001")
    assert [(e.host, e.port, e.port_flag) for e in endpoints(settings)] == [
        ("127.0.0.1", 7000, "--listen-port"), ("127.0.0.1", 7001, "--http-port")]
    assert len(endpoints(Settings(http_port="off"))) == 1


def test_a_port_someone_listens_on_cannot_be_bound():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = Endpoint("x", "127.0.0.1", other.getsockname()[1], "--p", "--h")
        with pytest.raises(PortUnusable, match="in use"):
            bind_endpoint(taken, listen=False)


def test_listeners_hold_their_ports_until_handed_over_or_closed():
    settings = Settings(listen_port=0, http_port="127.0.0.1:0")
    listeners = Listeners.bind(settings)
    try:
        port = listeners.gateway.getsockname()[1]
        assert listeners.web is not None
        # Listening: a client's connection waits for the server instead of failing,
        # and nobody else can take the port meanwhile.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        with pytest.raises(PortUnusable):
            bind_endpoint(Endpoint("x", "127.0.0.1", port, "--p", "--h"), listen=True)
    finally:
        listeners.close()
    assert Listeners.bind(Settings(listen_port=port, http_port="off")).web is None
