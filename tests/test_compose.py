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


def test_compose_file_describes_kafka_and_eventq():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:3.9")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert services["eventq"]["ports"] == ["127.0.0.1:9922:9922"]
    assert "--bootstrap" in services["eventq"]["command"]
    assert services["topics"]["command"][:2] == ["topics", "create"]
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
