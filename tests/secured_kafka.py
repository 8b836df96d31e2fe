"""A local broker started by `eventq kafka start --sasl-ssl` (and `--mtls`) for the
real-broker tests of eventq against a secured Kafka (tests/e2e/test_secured_kafka.py,
tests/e2e/test_secured_kafka_mtls.py), and what those tests run against it."""

from __future__ import annotations

import os
import subprocess
import sys

from support import ServerProcess, free_port

PARTITIONS = 2


def eventq(*args: str, env: dict[str, str] | None = None, timeout_s: float = 300,
           check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "eventq.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, env={**os.environ, **(env or {})})
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


class SecuredKafka:
    """`eventq kafka start --sasl-ssl` (plus ``security_flags``, e.g. --mtls) in a data
    dir of its own."""

    def __init__(self, home, *security_flags: str) -> None:
        self.home = home
        self.port = free_port()
        self.security_flags = ["--sasl-ssl", *security_flags]
        self.flags = ["--data-dir", str(home), "--kafka-port", str(self.port),
                      "--controller-port", str(free_port()), "--kafka-heap-mb", "512"]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.env: dict[str, str] = {}
        self.started = ""

    def start(self) -> None:
        self.started = eventq("kafka", "start", *self.security_flags, *self.flags).stdout
        # The settings it printed, as a file too (set -a; . client.env; set +a).
        lines = self.client_env_file.read_text().splitlines()
        self.env = dict(line.split("=", 1) for line in lines)

    @property
    def client_env_file(self):
        return self.home / "kafka" / "security" / "client.env"

    def stop(self) -> None:
        eventq("kafka", "stop", *self.flags)


def serve(kafka: SecuredKafka, home, prefix: str, **env: str) -> ServerProcess:
    process = ServerProcess(kafka.bootstrap, prefix, home, partitions=PARTITIONS)
    process.env = {**kafka.env, **env}  # the password in the environment, not on argv
    return process


def topic_flags(process: ServerProcess) -> list[str]:
    return ["--bootstrap", process.bootstrap, "--partitions", str(PARTITIONS),
            *(f for key in ("commands-topic", "jobs-topic", "app-id")
              for f in (f"--{key}", process.settings[key]))]
