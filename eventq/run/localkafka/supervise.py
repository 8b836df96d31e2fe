"""The local Kafka's nodes, restarted when their JVM dies (eventq/run/supervisor.py's
backoff): by `eventq up` for the nodes it started, and by a detached supervisor that
`eventq kafka start` leaves running for the node set. The supervisor keeps its pid file
and log beside the nodes' homes (``<data-dir>/kafka/supervisor.pid`` and
``supervisor.log``); `eventq kafka stop` stops it before the nodes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from eventq.run.localkafka import broker
from eventq.run.supervisor import (
    StartFailed,
    describe_exit_status,
    stop_on_signals,
    supervise,
)
from eventq.settings import Settings

SUPERVISOR_START_TIMEOUT_S = 20.0  # until it has written its pid file (Python's imports)
SUPERVISOR_STOP_TIMEOUT_S = 10.0
SUPERVISOR_LOG_TAIL_LINES = 20
POLL_INTERVAL_S = 0.05


class SupervisorError(RuntimeError):
    """The supervisor could not be started; the message says why and where to look."""


class BrokerNode:
    """One local Kafka node, supervised."""

    def __init__(self, config: broker.BrokerConfig, cluster: list[broker.BrokerConfig]) -> None:
        self.config = config
        self.cluster = cluster  # all its nodes: a node whose data is gone rejoins them
        self.process: subprocess.Popen | None = None  # the JVM, once we restarted it
        self.pid = broker.running_pid(config)

    @property
    def name(self) -> str:
        node = f" node {self.config.node_id}" if broker.cluster_size(self.config) > 1 else ""
        pid = f" (pid {self.pid})" if self.pid is not None else ""
        return f"Kafka{node} on {self.config.bootstrap}{pid}"

    def start(self) -> None:
        try:
            self.process = broker.launch(self.config, self.cluster)
        except broker.BrokerError as error:
            raise StartFailed(str(error)) from None
        self.pid = self.process.pid

    def exit_reason(self) -> str | None:
        if self.process is not None:  # ours: its status is known
            code = self.process.poll()
            return None if code is None else describe_exit_status(code)
        if broker.running_pid(self.config) is not None:
            return None
        code = reaped_exit_status(self.pid)
        if code is None:
            return "is gone (its JVM ended)"
        return describe_exit_status(code)


def reaped_exit_status(pid: int | None) -> int | None:
    """The exit status of ``pid`` if it was our child that ended (a node `eventq up`
    started: reaping it also frees its process entry), else None."""
    if pid is None:
        return None
    try:
        reaped, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if reaped == pid else None


# --- the detached supervisor of `eventq kafka start` -------------------------------------


def supervisor_pid_file(settings: Settings) -> Path:
    return broker.local_home(settings) / "supervisor.pid"


def supervisor_log_file(settings: Settings) -> Path:
    return broker.local_home(settings) / "supervisor.log"


def supervisor_command(settings: Settings) -> list[str]:
    """`eventq kafka supervise` with every setting that places the nodes."""
    return [
        sys.executable, "-m", "eventq.cli", "kafka", "supervise",
        "--data-dir", str(settings.data_dir),
        "--kafka-host", settings.kafka_host,
        "--kafka-port", str(settings.kafka_port),
        "--controller-port", str(settings.controller_port),
        "--kafka-heap-mb", str(settings.kafka_heap_mb),
        "--brokers", str(settings.brokers),
    ]


def supervisor_pid(settings: Settings) -> int | None:
    """The pid of the supervisor of this data dir's nodes, if one runs."""
    pid = _pid_in(supervisor_pid_file(settings))
    return pid if pid is not None and _is_supervisor(pid, settings.data_dir) else None


def _is_supervisor(pid: int, data_dir: Path) -> bool:
    """True if ``pid`` is alive and is `eventq kafka supervise` of ``data_dir`` (a stale
    pid file may name a pid the system gave to another process since)."""
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    if state == "Z":  # ended, waiting to be reaped
        return False
    return b"supervise" in arguments and str(data_dir).encode() in arguments


def start_supervisor(settings: Settings) -> tuple[int, bool]:
    """Start the detached supervisor unless one runs: (its pid, whether it already ran).
    Returns once it has claimed its pid file."""
    pid = supervisor_pid(settings)
    if pid is not None:
        return pid, True
    log_file = supervisor_log_file(settings)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        process = subprocess.Popen(
            supervisor_command(settings), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this command and the terminal's Ctrl-C
        )
    deadline = time.monotonic() + SUPERVISOR_START_TIMEOUT_S
    while supervisor_pid(settings) != process.pid:
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                broker.stop_process(process.pid, SUPERVISOR_STOP_TIMEOUT_S)
            raise SupervisorError(
                f"the Kafka supervisor did not start (the nodes run, but one that dies "
                f"stays down). From {log_file}:\n{_log_tail(log_file)}")
        time.sleep(POLL_INTERVAL_S)
    return process.pid, False


def _log_tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(lines[-SUPERVISOR_LOG_TAIL_LINES:])


def stop_supervisor(settings: Settings) -> int | None:
    """Stop the supervisor if one runs; its pid, or None if none ran."""
    pid = supervisor_pid(settings)
    if pid is not None:
        broker.stop_process(pid, SUPERVISOR_STOP_TIMEOUT_S)
    supervisor_pid_file(settings).unlink(missing_ok=True)
    return pid


def run_supervisor(settings: Settings) -> int:
    """`eventq kafka supervise`: restart this data dir's nodes that die, until SIGTERM or
    Ctrl-C (the nodes keep running then)."""
    other = supervisor_pid(settings)
    if other is not None and other != os.getpid():
        say_with_time(f"the nodes of {settings.data_dir} already have a supervisor (pid "
                      f"{other}); stop it first (eventq kafka stop stops it and the nodes)")
        return 1
    nodes = broker.local_nodes(settings)
    pid_file = supervisor_pid_file(settings)
    with stop_on_signals() as stop:
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(f"{os.getpid()}\n")
        say_with_time(f"supervising Kafka on {settings.kafka_bootstrap} (pid {os.getpid()})")
        try:
            supervise([BrokerNode(config, nodes) for config in nodes], stop, say_with_time)
        finally:
            if _pid_in(pid_file) == os.getpid():  # not a successor's
                pid_file.unlink()
    say_with_time("supervisor stopped; the nodes keep running")
    return 0


def _pid_in(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def say_with_time(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}", flush=True)
