"""``eventq up --processes N``: N eventq processes on one machine, to try scaling out
(issue 11). Each is a plain ``eventq serve`` with its own port (consecutive from
``--listen-port``) and data dir (``<data-dir>/process-<i>``), in the same consumer
group: clients may connect to any of them. Ctrl-C stops them all.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import fields

from eventq.settings import Settings

STOP_TIMEOUT_S = 40.0
PER_PROCESS = ("listen_port", "data_dir", "advertise", "processes", "http_port")


def process_settings(settings: Settings, index: int) -> list[str]:
    """The flags of process ``index``: the shared settings, its own port and dir."""
    flags = []
    for item in fields(Settings):
        if item.name in PER_PROCESS:
            continue
        value = getattr(settings, item.name)
        if value != item.default:
            flags += ["--" + item.name.replace("_", "-"), str(value)]
    port = settings.listen_port + index
    flags += ["--listen-port", str(port), "--data-dir", str(settings.data_dir / f"process-{index + 1}")]
    if settings.advertise:
        host = settings.advertise.rpartition(":")[0]
        flags += ["--advertise", f"{host}:{port}"]
    http = settings.http_address
    if http is None:
        flags += ["--http-port", settings.http_port]
    else:  # one metrics and dashboard port each, from the given one on
        host, http_port = http
        flags += ["--http-port", f"{host}:{http_port + index if http_port else 0}"]
    if not settings.bootstrap:
        flags += ["--bootstrap", settings.kafka_bootstrap]  # the local broker(s)
    return flags


def serve_processes(settings: Settings) -> int:
    children = []
    for index in range(settings.processes):
        command = [sys.executable, "-m", "eventq.cli", "serve", *process_settings(settings, index)]
        children.append(subprocess.Popen(command, stdin=subprocess.DEVNULL))
    ports = ", ".join(str(settings.listen_port + i) for i in range(settings.processes))
    print(f"eventq: {settings.processes} processes starting on {settings.listen_host} ports "
          f"{ports}; any of them serves every job. Ctrl-C stops them all.", flush=True)
    try:
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        failed = [c for c in children if c.poll() not in (None, 0)]
        if failed:
            print(f"eventq: a process exited with status {failed[0].returncode}; stopping "
                  "the others", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        pass
    return stop_all(children)


def stop_all(children: list[subprocess.Popen]) -> int:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    code = 0
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        code = code or (child.returncode if child.returncode not in (None, -signal.SIGTERM) else 0)
    return code



