"""docker-compose.yml runs the same stack where Docker exists."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _compose_cli() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_file_describes_three_brokers_and_three_eventq_processes():
    """The scaled-out shape (docs/architecture.md, "Several brokers"): three KRaft nodes
    in one controller quorum, topics at replication factor 3 with min.insync.replicas=2,
    three eventq processes that each advertise the address their peers reach them at."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    brokers = [services[f"kafka-{n}"] for n in (1, 2, 3)]
    voters = "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
    for n, kafka in enumerate(brokers, 1):
        env = kafka["environment"]
        assert kafka["image"].startswith("apache/kafka:3.9")
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert env["KAFKA_NODE_ID"] == str(n)
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == voters
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://kafka-{n}:9092"
    bootstrap = "kafka-1:9092,kafka-2:9092,kafka-3:9092"
    topics = services["topics"]["command"]
    assert topics[:2] == ["topics", "create"]
    assert topics[topics.index("--bootstrap") + 1] == bootstrap
    assert topics[topics.index("--replication-factor") + 1] == "3"
    for n in (1, 2, 3):
        eventq = services[f"eventq-{n}"]
        command = eventq["command"]
        assert command[0] == "serve"
        assert command[command.index("--bootstrap") + 1] == bootstrap
        assert command[command.index("--advertise") + 1] == f"eventq-{n}:9922"
        assert eventq["ports"] == [f"127.0.0.1:{9921 + n}:9922", f"127.0.0.1:{9979 + n}:9980"]
        assert command[command.index("--http-port") + 1] == "0.0.0.0:9980"
    assert (ROOT / "Dockerfile").exists()


def test_docker_compose_config_parses():
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no docker compose CLI on this machine")
    done = subprocess.run(
        [*cli, "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_testcontainers_broker_where_a_docker_engine_answers():
    """EVENTQ_TEST_BROKER=docker makes the suite use a Kafka container (tests/conftest.py)."""
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:
        pytest.skip("no Docker engine answers on this machine")
    kafka = pytest.importorskip("testcontainers.kafka")
    from eventq.kafka.topics import TopicNames, ensure_topics, eventq_topics

    with kafka.KafkaContainer().with_kraft() as container:
        reports = ensure_topics(container.get_bootstrap_server(), eventq_topics(TopicNames(), 2))
        assert all(report.ok for report in reports)
