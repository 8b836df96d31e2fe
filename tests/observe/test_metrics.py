"""``/metrics`` of workflows (eventq/observe/metrics.py), scraped from a real processor's
state (the memory processes of tests/support/memory_processes.py): WAITING jobs per
queue beside the other states, and the counters of what partitions told each other."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from eventq.observe.metrics import Sources, exposition, registry_of
from support.memory_processes import Process, add, finish, job_id, run

U, X, D1, D2 = (job_id(0, n) for n in range(1, 5))


@dataclass
class GatewayStats:
    active_clients: int = 0
    peer_connections: int = 0
    request_seconds: None = None


def scrape(process: Process) -> dict[tuple[str, tuple], float]:
    engine = process.engine
    sources = Sources(index=engine.index, processor=engine.driver.processor,
                      gateway_stats=GatewayStats(), lag=dict, serving=lambda: True,
                      now_ms=lambda: engine.log.now_ms)
    text = exposition(registry_of(sources)).decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_waiting_jobs_notices_and_registrations_are_counted() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(U, "extract"))
        await p.handle(add(D1, "etl", f" -after={U}"))
        await p.handle(add(D2, "etl", f" -after={U},{X}"))  # X is never added
        m = scrape(p)
        assert value(m, "eventq_queue_jobs", queue="etl", state="waiting") == 2
        assert value(m, "eventq_queue_jobs", queue="etl", state="ready") == 0
        assert value(m, "eventq_queue_jobs", queue="extract", state="waiting") == 0
        assert value(m, "eventq_dependents_registered_total") == 3  # U:D1, U:D2, X:D2
        assert value(m, "eventq_upstream_notices_total") == 0

        await finish(p, "extract", "complete", b"done")  # D1 released, D2 still waits on X
        m = scrape(p)
        assert value(m, "eventq_queue_jobs", queue="etl", state="waiting") == 1
        assert value(m, "eventq_queue_jobs", queue="etl", state="ready") == 1
        assert value(m, "eventq_upstream_notices_total") == 2
        assert value(m, "eventq_queue_events_total", queue="etl", event="released") == 1
        assert value(m, "eventq_queue_events_total", queue="etl", event="upstream_noted") == 1

    run(scenario())


def test_failed_jobs_are_counted_per_group() -> None:
    """[eventq] docs/workflows.md, "Failure groups and retry": one gauge per group."""
    async def scenario() -> None:
        p = Process()
        await p.handle(add(U, "extract"))
        await p.handle(add(D1, "etl", f" -after={U}"))
        await p.handle(add(X, "etl"))
        m = scrape(p)
        assert not [key for key in m if key[0] == "eventq_failed_jobs"]
        await p.handle(f"fail {U} 1 -group=deploy-7\r\nx\r\n".encode())
        await p.handle(f"fail {X} 1\r\nx\r\n".encode())
        m = scrape(p)
        assert value(m, "eventq_failed_jobs", group="deploy-7") == 1
        assert value(m, "eventq_failed_jobs", group="upstream-failed") == 1
        assert value(m, "eventq_failed_jobs", group="failed") == 1
        await p.handle(b"retry-group deploy-7 10\r\n")  # U and, in cascade, D1
        m = scrape(p)
        assert [key for key in m if key[0] == "eventq_failed_jobs"] == [
            ("eventq_failed_jobs", (("group", "failed"),))]

    run(scenario())
