"""``eventq up``: the eventq processes on one machine, supervised. One process by
default; ``--processes N`` runs N to try scaling out (docs/architecture.md, "Scaling
out"). Each is a plain ``eventq serve`` child with its own port (consecutive from
``--listen-port``) and data dir (``<data-dir>/process-<i>``; one process keeps
``<data-dir>`` itself), in the same consumer group: clients may connect to any of them.

A child that ends without being asked to (a crash, ``kill -9``, a failed start) is
restarted after a backoff (eventq/run/supervisor.py) while the others keep serving, and so
is a local Kafka node ``eventq up`` started. Ctrl-C or SIGTERM stops them all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import fields, replace
from functools import partial
from pathlib import Path
from typing import Sequence

# `eventq serve` exits with EXIT_CANNOT_START when it cannot start with its
# configuration (a port in use, eventq's topics missing: eventq/run/serve.py preflight).
from eventq.gateway.listeners import EXIT_CANNOT_START
from eventq.run import die_with_parent
from eventq.run.localkafka.broker import BrokerConfig
from eventq.run.localkafka.supervise import BrokerNode
from eventq.run.supervisor import (
    StartFailed,
    describe_exit_status,
    stop_on_signals,
    supervise,
)
from eventq.settings import KAFKA_SECURITY_SETTINGS, Settings, kafka_security_env

STOP_TIMEOUT_S = 40.0
PER_PROCESS = ("listen_port", "data_dir", "advertise", "processes", "http_port")
# Handed to the children in their environment (kafka_security_env), not as flags: the
# SASL password must not be on a command line.
BY_ENVIRONMENT = tuple(KAFKA_SECURITY_SETTINGS)
EXIT_OK = 0
EXIT_FAILED = 1


def process_settings(settings: Settings, index: int) -> list[str]:
    """The flags of process ``index``: the shared settings, its own port and dir."""
    flags = []
    for item in fields(Settings):
        if item.name in PER_PROCESS or item.name in BY_ENVIRONMENT:
            continue
        value = getattr(settings, item.name)
        if value != item.default:
            flags += ["--" + item.name.replace("_", "-"), str(value)]
    port = settings.listen_port + index
    flags += ["--listen-port", str(port), "--data-dir", str(process_data_dir(settings, index))]
    if settings.advertise:
        flags += ["--advertise", process_advertise(settings, port)]
    flags += ["--http-port", process_http_port(settings, index)]
    if not settings.bootstrap:
        flags += ["--bootstrap", settings.kafka_bootstrap]  # the local broker(s)
    return flags


def process_http_port(settings: Settings, index: int) -> str:
    """One metrics and dashboard port each, from the given one on (or off)."""
    http = settings.http_address
    if http is None:
        return settings.http_port
    host, http_port = http
    return f"{host}:{http_port + index if http_port else 0}"


def files_problem(settings: Settings) -> str | None:
    """Why the tokens file or the TLS files cannot be used, or None: said once before
    anything starts, not by each process as it fails at start."""
    from eventq.gateway.tls import TlsUnusable, peer_context, server_context
    from eventq.gateway.tokens_file import TokensUnusable, load_tokens

    try:
        load_tokens(settings.tokens_file)
        server_context(settings)
        peer_context(settings)
    except (TokensUnusable, TlsUnusable) as error:
        return str(error)
    return None


def ports_problem(settings: Settings) -> str | None:
    """Why a process's gateway or dashboard port cannot be listened on (in use, say), or
    None: said in one line before anything starts, not by each process as it fails at
    start and is restarted (docs/architecture.md, "Feedback to users")."""
    from eventq.gateway.listeners import PortUnusable, check_ports

    for index in range(settings.processes):
        own = replace(settings, listen_port=settings.listen_port + index,
                      http_port=process_http_port(settings, index))
        try:
            check_ports(own)
        except PortUnusable as error:
            return str(error)
    return None


def process_data_dir(settings: Settings, index: int) -> Path:
    # One process keeps the layout `eventq serve` always had (`make run`: var/state).
    if settings.processes == 1:
        return settings.data_dir
    return settings.data_dir / f"process-{index + 1}"


def process_advertise(settings: Settings, port: int) -> str:
    if settings.processes == 1:
        return settings.advertise  # as given: it may name a port forwarded to ours
    host = settings.advertise.rpartition(":")[0]
    return f"{host}:{port}"


class ServeProcess:
    """One supervised `eventq serve` child."""

    def __init__(self, settings: Settings, index: int) -> None:
        self.port = settings.listen_port + index
        self.command = [sys.executable, "-m", "eventq.cli", "serve",
                        *process_settings(settings, index)]
        self.env = kafka_security_env(settings.kafka_security, os.environ)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:
        pid = f" (pid {self.process.pid})" if self.process is not None else ""
        return f"eventq process on port {self.port}{pid}"

    def start(self) -> None:
        try:  # its output goes where ours does; it ends with us even after a kill -9
            self.process = subprocess.Popen(die_with_parent.command(os.getpid(), self.command),
                                            stdin=subprocess.DEVNULL, env=self.env)
        except OSError as error:  # no memory or processes left to fork
            raise StartFailed(str(error)) from None

    def exit_reason(self) -> str | None:
        assert self.process is not None, "asked before it was started"
        code = self.process.poll()
        if code is None:
            return None
        if code == EXIT_CANNOT_START:
            return (f"failed at start (status {code}: it cannot start with this "
                    "configuration; its message above says what to change)")
        return describe_exit_status(code)

    def running(self) -> subprocess.Popen[bytes] | None:
        """Its process while it runs, else None."""
        if self.process is not None and self.process.poll() is None:
            return self.process
        return None


def serve_processes(settings: Settings, brokers_started: Sequence[BrokerConfig] = (),
                    cluster: Sequence[BrokerConfig] = ()) -> int:
    """Run ``settings.processes`` eventq processes until SIGINT or SIGTERM, restarting
    any that ends, and any of ``brokers_started`` (nodes of ``cluster``) whose JVM dies.
    Returns 0 if every process then stopped cleanly."""
    children = [ServeProcess(settings, index) for index in range(settings.processes)]
    nodes = [BrokerNode(config, list(cluster)) for config in brokers_started]
    could_not_start = False
    with stop_on_signals() as stop:  # from here on a signal stops the loop, never a stop
        # docs/security.md, "A tokens file": each process reads it again on SIGHUP
        if settings.tokens_file:
            signal.signal(signal.SIGHUP, partial(_pass_on, children))
        try:
            for child in children:
                child.start()
            if settings.processes > 1:
                ports = ", ".join(str(child.port) for child in children)
                print(f"eventq: {settings.processes} processes starting on "
                      f"{settings.listen_host} ports {ports}; any of them serves every job, "
                      "one that dies is restarted. Ctrl-C stops them all.", flush=True)
            supervise([*children, *nodes], stop, say_on_stderr)
        except StartFailed as error:
            say_on_stderr(f"cannot start an eventq process: {error}")
            could_not_start = True
        finally:
            code = stop_all(children)
    return EXIT_FAILED if could_not_start else code


def _pass_on(children: Sequence[ServeProcess], signum: int, frame: object) -> None:
    """Send ``signum`` on to every running child (SIGHUP: read the tokens again)."""
    for child in children:
        if (process := child.running()) is not None:
            process.send_signal(signum)


def say_on_stderr(message: str) -> None:
    print(f"eventq: {message}", file=sys.stderr, flush=True)


def stop_all(children: Sequence[ServeProcess]) -> int:
    """SIGTERM each running child, SIGKILL any still running after STOP_TIMEOUT_S.
    0 if each stopped cleanly, else 1 (its next start rebuilds state from the log)."""
    running = [(child, process) for child in children
               if (process := child.running()) is not None]
    for _, process in running:
        process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    code = EXIT_OK
    for child, process in running:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode not in (0, -signal.SIGTERM):
            say_on_stderr(f"{child.name} {describe_exit_status(process.returncode)} "
                          "while stopping: not a clean stop, its next start rebuilds its "
                          "state from the log")
            code = EXIT_FAILED
    return code


def interrupt_on_sigterm() -> None:
    """Until the processes run, SIGTERM stops `eventq up` as Ctrl-C does (and the
    brokers it started are stopped too): KeyboardInterrupt."""
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
