"""A job claimed by one process for a lease waiting on another must not be spent while
the requester cannot take it (found by the fault campaign, seed 3143; docs/fencing.md,
"A claim made for another process: offered, then confirmed").

Two eventq processes. A client's lease waits on process A; A waits for the queue at B
too (eventq/gateway/cluster_answers.py ``_wait_anywhere``: a peer lease). A is stopped with
SIGSTOP; the queue is resumed, so B claims one of its jobs for A's peer lease
(start-attempt) and writes the handover to A's connection, where nobody reads it. The
job's TTR passes (time-out: an attempt counted), then A runs again, reads the handover
and gives it to its client as a lease the job no longer has.

What must hold: the lease A's client gets is live (the job is LEASED, in its first
counted attempt). Before claims were confirmed (eventq/state/offers.py) it was not: the
attempt was spent while A slept and A's client got a lease the job no longer had
(PENDING, attempts 1), which another worker could be granted too. Now B withdraws the
unconfirmed claim before its TTR (no attempt counted), A's late confirm is refused, and
A leases again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
import uuid

import pytest

from eventq.client.raw import RawClient
from tools.servers import EventqCluster, raw_exchange

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

TTR_MS = 1000
JOBS = 8  # spread over both processes' partitions
STOPPED_S = 4.0  # well past the TTR, well within the peer request timeout (15 s)


def ok(port: int, request: bytes) -> None:
    reply = raw_exchange(port, request)
    assert reply.startswith(b"+OK"), (request, reply)


def fields_of(port: int, job_id: str) -> dict[str, str]:
    async def inspect() -> dict[str, bytes]:
        async with await RawClient.connect(port=port) as client:
            return await client.inspect_job(job_id)

    return {key: value.decode(errors="replace") for key, value in asyncio.run(inspect()).items()}


def test_a_claim_for_a_stopped_process_is_not_spent_behind_its_back(kafka_cluster, tmp_path):
    cluster = EventqCluster(kafka_cluster, f"claim{os.getpid()}", tmp_path, processes=2,
                            partitions=2, session_timeout_ms=6000).start()
    requester, owner = cluster[0], cluster[1]
    queue = f"claimed-{uuid.uuid4().hex[:8]}"
    try:
        ok(owner.port, f"pause {queue}\r\n".encode())
        for _ in range(JOBS):
            ok(owner.port, f"add {uuid.uuid4()} {queue} {TTR_MS} 600000 1\r\nx\r\n".encode())
        client = socket.create_connection(("127.0.0.1", requester.port), timeout=60)
        client.sendall(f"lease {queue} 30000\r\n".encode())
        time.sleep(1.0)  # waiting here and, through a peer lease, at the owner
        os.kill(requester.process.pid, signal.SIGSTOP)
        try:
            # The owner's partitions apply the resume at once: its peer lease for the
            # stopped requester claims a job (the reply waits for the requester).
            resume = socket.create_connection(("127.0.0.1", owner.port), timeout=10)
            resume.sendall(f"resume {queue}\r\n".encode())
            time.sleep(STOPPED_S)
        finally:
            os.kill(requester.process.pid, signal.SIGCONT)
        reply = b""
        while reply.count(b"\r\n") < 3:
            chunk = client.recv(65536)
            assert chunk, reply
            reply += chunk
        client.close()
        resume.close()
        status, head, _ = reply.split(b"\r\n", 2)
        assert status == b"+OK 1", reply
        job_id = head.split(b" ")[0].decode()
        fields = fields_of(owner.port, job_id)
        # The client holds a live lease: LEASED, its first counted attempt.
        assert (fields.get("state"), fields.get("attempts")) == ("4", "1"), fields
    finally:
        cluster.stop()
