"""Workflows (docs/workflows.md, "Dependencies" and "Inputs") through a live server and
broker: a diamond added dependents first runs in edge order and hands results down; a
failing upstream fails its dependents down the graph."""

from __future__ import annotations

import time
import uuid

import pytest

from eventq.client import Client

pytestmark = pytest.mark.kafka


def queue(label: str) -> str:
    return f"{label}-{time.monotonic_ns()}"


def test_a_diamond_added_dependents_first_runs_in_edge_order_with_its_inputs(server):
    q = queue("diamond")
    a, b, c, d = (uuid.uuid4() for _ in range(4))
    names = {a: "a", b: "b", c: "c", d: "d"}
    with Client(port=server.port) as client:
        client.add(q, b"d", id=d, after=[b, c])  # dependents before their upstreams
        client.add(q, b"b", id=b, after=[a])
        client.add(q, b"c", id=c, after=[a])
        client.add(q, b"a", id=a)
        waiting = client.inspect_job(d)
        assert (waiting.state, waiting.after, waiting.waiting) == ("waiting", 2, 2)
        order = []
        while len(order) < 4:
            job = client.lease(q, wait_timeout_ms=20_000)
            order.append(names[job.id])
            client.complete(job.id, b"done " + job.payload)
        assert order[0] == "a" and order[-1] == "d" and set(order[1:3]) == {"b", "c"}
        released = client.inspect_job(d)
        assert (released.state, released.after, released.waiting) == ("completed", 2, 0)
        assert [(r.id, r.ok, r.data) for r in client.inputs(d)] == [
            (b, True, b"done b"), (c, True, b"done c")]


def test_a_failed_upstream_fails_its_dependents_down_the_graph(server):
    q = queue("cascade")
    e, f, g = (uuid.uuid4() for _ in range(3))
    with Client(port=server.port) as client:
        client.add(q, b"e", id=e)
        client.add(q, b"f", id=f, after=[e])
        client.add(q, b"g", id=g, after=[f])
        job = client.lease(q, wait_timeout_ms=20_000)
        assert job.id == e
        client.fail(e, b"broken")
        f_result = client.result(f, wait_timeout_ms=20_000)
        g_result = client.result(g, wait_timeout_ms=20_000)
        assert (f_result.ok, f_result.data) == (False, f"upstream {e} failed".encode())
        assert (g_result.ok, g_result.data) == (False, f"upstream {f} failed".encode())
        assert [(r.id, r.ok, r.data) for r in client.inputs(f)] == [(e, False, b"broken")]
