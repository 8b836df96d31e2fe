"""faust's worker consumer long-polls for at most FETCH_MAX_WAIT_MS (streams/faust/fetch_wait.py
says why: a rebalance's offset requests wait behind the fetch)."""

from __future__ import annotations

import asyncio

import faust

from streams.faust import fetch_wait


def test_the_worker_consumer_fetches_with_the_short_wait() -> None:
    fetch_wait.install()
    fetch_wait.install()  # twice is harmless

    async def create():
        app = faust.App("fetch-wait-test", broker="kafka://127.0.0.1:1", web_enabled=False)
        return app.consumer._thread._create_worker_consumer(app.transport)

    consumer = asyncio.run(create())  # aiokafka wants a running loop; nothing connects
    assert consumer._fetch_max_wait_ms == fetch_wait.FETCH_MAX_WAIT_MS < 1500
