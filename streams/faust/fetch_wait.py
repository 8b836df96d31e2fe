"""Two settings of faust's worker consumer that faust does not expose: a shorter fetch
long-poll, so rebalances finish in time, and reading committed records only.

faust-streaming 0.15.3 creates its worker consumer with ``fetch_max_wait_ms=1500``
(faust/transport/drivers/aiokafka.py, ``_create_worker_consumer``). A broker answers the
requests of one connection in order, so every ListOffsets that faust's recovery sends
after a rebalance (highwaters, earliest offsets of the active, then of the standby
partitions) queued behind an idle fetch and waited for it: measured on a 3-process
cluster after a `kill -9`, each of five recovery steps took 1.0-1.5 s, 6.7 s from the
new assignment to serving (the aim is 10 s from the kill, which includes the 6 s session
timeout: docs/architecture.md, "Scaling out"). A fetch still returns as soon as a record
arrives, so a shorter wait costs no latency, only a few idle fetches a second.
"""

from __future__ import annotations

from typing import Any

from streams.faust.monkeypatch import original_of, replace

FETCH_MAX_WAIT_MS = 200


def install() -> None:
    from faust.transport.drivers import aiokafka as driver

    thread_class = driver.AIOKafkaConsumerThread
    original = thread_class._create_worker_consumer
    if original_of(original) is not None:
        return

    # ``self``: faust's AIOKafkaConsumerThread, patched (streams/faust/monkeypatch.py);
    # the consumer it creates is aiokafka's.
    def create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read by its Fetcher at start
        # Standby copies read `eventq.jobs` committed records only: it is written in
        # transactions, and an aborted one was written by a process that no longer
        # owned its partition (streams/faust/transactions.py). faust sets read_committed only
        # in its exactly-once mode, which eventq does not use.
        consumer._isolation_level = "read_committed"
        return consumer

    replace(thread_class, "_create_worker_consumer", create_worker_consumer)
