"""The changelog buffer never drops a record the producer refused: it offers it again,
counted in flight, so no commit passes it; the worker does not crash."""

from __future__ import annotations

import asyncio

from streams.faust import durable_flush
from streams.faust.durable_flush import DurableProducerBuffer


def test_a_refused_record_is_offered_again_until_taken(monkeypatch):
    monkeypatch.setattr(durable_flush, "RETRY_FIRST_S", 0.001)
    attempts = []

    async def send_pending(message) -> None:
        attempts.append(message)
        if len(attempts) < 3:
            raise RuntimeError("MessageSizeTooLargeError or a broker away")

    async def scenario() -> None:
        buffer = DurableProducerBuffer()
        await buffer._send_until_taken(send_pending, "record")
        assert attempts == ["record"] * 3 and buffer.retried == 2

    asyncio.run(scenario())
