"""A paused owner loses nothing (docs/fencing.md).

Three eventq processes on a 3-broker cluster; clients on processes 0 and 2 run a mixed
load while process 1 is paused with SIGSTOP for longer than its session timeout, twice,
and resumed with SIGCONT. Its partitions move to the others meanwhile; when it runs
again it still believes it owns them for a moment. Before fencing this lost
acknowledged adds, undid acknowledged deletes, granted jobs twice and completed them
twice, and the newest changelog record of a job stopped being its state: the paused
process's late changelog writes became the newest records of their keys, and when it
got partitions back it skipped the records others had written after its own.

The whole history is checked (tools/faults/checker.py), and the live state, the
changelog and a fold of the command log must be the same state.
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from eventq.kafka.topics import bulk_name_for
from tools.faults.campaign import changelog_violations, settled_digests
from tools.faults.checker import check, summary, violations_text
from tools.faults.explain import explain
from tools.faults.history import Clock, Recorder
from tools.faults.load import (
    BulkTarget,
    LoadConfig,
    created_job_ids,
    read_back,
    run_load,
    wait_bulk_admitted,
)
from tools.servers import EventqCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(420)]

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
PAUSE_S = 15.0  # past the session timeout: the partitions move while it sleeps
PAUSES = 2
SERVE_BOUND_S = 60.0
ENOUGH_OK_OPERATIONS = 500


def test_a_process_paused_past_its_session_loses_nothing(kafka_cluster, tmp_path):
    prefix = f"paused{os.getpid()}"
    cluster = EventqCluster(kafka_cluster, prefix, tmp_path, partitions=PARTITIONS,
                            session_timeout_ms=SESSION_TIMEOUT_MS, log_level="INFO").start()
    commands = cluster.settings["commands-topic"]
    jobs_topic = cluster.settings["jobs-topic"]
    app_id = cluster.settings["app-id"]
    paused = cluster[1]
    recorder = Recorder(clock=Clock())
    config = LoadConfig(
        ports=(cluster[0].port, cluster[2].port), duration_s=PAUSES * (PAUSE_S + 10) + 5,
        seed=26, bulk=BulkTarget(kafka_cluster, bulk_name_for(commands), PARTITIONS),
    )

    async def pause_twice() -> None:
        await asyncio.sleep(5)
        for _ in range(PAUSES):
            os.kill(paused.process.pid, signal.SIGSTOP)
            await asyncio.sleep(PAUSE_S)
            os.kill(paused.process.pid, signal.SIGCONT)
            await asyncio.sleep(10)

    async def scenario():
        ops, _ = await asyncio.gather(run_load(config, recorder), pause_twice())
        assert await wait_bulk_admitted(cluster[0].port)
        reads = await read_back(cluster[0].port, created_job_ids(ops), clock=recorder.clock)
        live, derived = await settled_digests(cluster[0].port, kafka_cluster, commands)
        return ops, reads, live, derived

    try:
        ops, reads, live, derived = asyncio.run(scenario())
        violations = check(ops, reads, live, derived)
        violations += changelog_violations(kafka_cluster, app_id, commands, jobs_topic)
        for job_id in sorted({v.job_id for v in violations if v.job_id})[:3]:
            print(explain(kafka_cluster, commands, jobs_topic, job_id))
    finally:
        codes = cluster.stop()
        for process in cluster.processes:
            print(process.log_tail(40))
    print(summary(ops).text())
    assert not violations, violations_text(violations)
    # The load did enough to mean something (it did 990 ok operations on a machine
    # shared with a fault campaign and the soak: a floor, not a speed).
    assert summary(ops).outcome_total("ok") > ENOUGH_OK_OPERATIONS
    assert codes == [0, 0, 0], codes
