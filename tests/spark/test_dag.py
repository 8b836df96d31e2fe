"""A DAG of chains of 100 jobs (1,000 chains at the full size) enqueued from a DataFrame
by `eventq spark enqueue`'s code path, into the bulk lane as the CLI sends it, and worked
to the end by the worker runtime: every job once, each after its upstream, checked from the
command log (tools/dag_helpers.py), not from what the workers saw.

The full size took 8m46s on the 2-core machine this was written on, shared with other
work (load average 15: 442 s to enqueue and work, 30 s to read the log back), so `make
test` runs DEFAULT_JOBS: 40 chains, more than the worker's 32 slots, so released jobs
queue behind others as at the full size. The full size is bench/dag_bench.py's (its
figures, and this check of the log); EVENTQ_DAG_JOBS=100000 runs it here too (any
multiple of the chain length).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid

import pytest

from eventq.client import Client
from eventq.kafka.topics import bulk_name_for
from eventq.spark import enqueue
from eventq.spark.ids import DEFAULT_NAMESPACE, derive_job_id
from eventq.worker import Worker
from tools.dag_helpers import chains_frame, edge_order_faults, timelines

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

CHAIN_LENGTH = 100  # jobs per chain: each waits for the one before it
FULL_JOBS = 100_000  # the full size: 1,000 chains of 100
DEFAULT_JOBS = 4_000  # what `make test` runs (the full size: EVENTQ_DAG_JOBS=100000)
JOBS = int(os.environ.get("EVENTQ_DAG_JOBS", DEFAULT_JOBS))
WORKER_SLOTS = 32
TTR_MS = 600_000  # no attempt may time out: every job is leased exactly once
TTL_MS = 6 * 3_600_000
SECONDS_PER_1000_JOBS = 30  # the time allowed, generously, on a busy 2-core machine


@pytest.mark.timeout(60 + JOBS * SECONDS_PER_1000_JOBS // 1000)
def test_a_dag_of_chains_from_spark_is_worked_once_each_in_edge_order(spark, server):
    assert JOBS % CHAIN_LENGTH == 0, f"EVENTQ_DAG_JOBS must be a multiple of {CHAIN_LENGTH}"
    name = f"chains-{uuid.uuid4().hex[:10]}"
    commands_topic = server.settings["commands-topic"]
    began = time.monotonic()

    def phase(what: str) -> None:  # printed with a failure, and with -s: where time went
        print(f"{time.monotonic() - began:7.1f}s {what}", flush=True)

    handled: list[uuid.UUID] = []
    lock = threading.Lock()
    worker = Worker(port=server.port, concurrency=WORKER_SLOTS)

    @worker.handler(name)
    def handle(job):
        with lock:
            handled.append(job.id)
        return b"done " + job.payload

    worker_log = logging.getLogger("eventq.worker")
    level = worker_log.level
    worker_log.setLevel(logging.WARNING)  # no line per job, and no read per job for it
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()  # working while the load is admitted, as a pipeline would be
    try:
        report = enqueue(
            chains_frame(spark, JOBS, CHAIN_LENGTH), bootstrap=server.bootstrap,
            topic=bulk_name_for(commands_topic), name=name, key_columns=["step"],
            after_keys_column="needs", payload_column="body", ttr_ms=TTR_MS, ttl_ms=TTL_MS,
        )
        assert (report.sent, report.rejected) == (JOBS, 0)
        phase(report.summary())
        deadline = began + JOBS * SECONDS_PER_1000_JOBS / 1000
        while worker.tally.done < JOBS:
            assert time.monotonic() < deadline, (
                f"{worker.tally.done:,} of {JOBS:,} jobs done in time")
            time.sleep(0.2)
        phase(f"{JOBS:,} jobs done by the workers")
    finally:
        worker.stop()
        thread.join(30)
        worker_log.setLevel(level)
    took_s = time.monotonic() - began
    print(f"DAG of {JOBS:,} jobs ({JOBS // CHAIN_LENGTH:,} chains of {CHAIN_LENGTH}) "
          f"enqueued and worked in {took_s:.1f}s = {JOBS / took_s:,.0f} jobs/s", flush=True)
    assert worker.tally.failed == worker.tally.lost == 0

    ids = [derive_job_id(DEFAULT_NAMESPACE, name, [str(step)]) for step in range(JOBS)]
    assert sorted(handled) == sorted(ids)  # every job, none twice, as the workers saw it
    lines = timelines(server.bootstrap, commands_topic, ids)
    phase("the command log read")
    assert len(lines) == JOBS
    for step in (1, CHAIN_LENGTH - 1, JOBS - 1):  # the keys named the edges
        assert lines[ids[step]].upstreams == (ids[step - 1],)
    assert sum(bool(line.upstreams) for line in lines.values()) == JOBS - JOBS // CHAIN_LENGTH
    assert edge_order_faults(lines) == []
    with Client(port=server.port) as client:
        queue = client.inspect_queue(name)
        assert (queue.ready, queue.scheduled, queue.waiting) == (0, 0, 0)
        last = client.inspect_job(ids[-1])
        assert (last.state, last.attempts, last.after, last.waiting) == ("completed", 1, 1, 0)
        [told] = client.inputs(ids[-1])
        assert (told.id, told.ok, told.data) == (ids[-2], True, b"done step %d" % (JOBS - 2))
