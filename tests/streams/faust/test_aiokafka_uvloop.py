"""A write on a connection the broker closed must fail as a broken connection under
uvloop too (streams/faust/aiokafka_uvloop.py), so aiokafka reconnects instead of losing
a background task."""

from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.kafka


async def send_on_closed_connection(bootstrap: str, send) -> BaseException:
    from aiokafka.conn import create_conn
    from aiokafka.protocol.metadata import MetadataRequest

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = await create_conn(host, int(port), request_timeout_ms=1000)
    conn._read_task.cancel()  # as if the close had not been noticed yet
    conn._writer.transport.close()
    await asyncio.sleep(0.1)  # uvloop closes the handle
    try:
        await send(conn, MetadataRequest([]))
    except BaseException as error:  # the error is the result
        return error
    finally:
        conn.close()
    raise AssertionError("a send on a closed connection succeeded")


def run_on_uvloop(coro):
    uvloop = pytest.importorskip("uvloop")
    loop = uvloop.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def test_uvloop_closed_connection_is_a_kafka_connection_error(kafka_bootstrap):
    from aiokafka.conn import AIOKafkaConnection
    from aiokafka.errors import KafkaConnectionError

    from streams.faust.aiokafka_uvloop import patch_closed_connection_writes

    patch_closed_connection_writes()
    patch_closed_connection_writes()  # idempotent
    error = run_on_uvloop(send_on_closed_connection(kafka_bootstrap, AIOKafkaConnection.send))
    assert isinstance(error, KafkaConnectionError), repr(error)
    assert "handler is closed" in str(error)


def test_unpatched_aiokafka_still_raises_runtime_error_under_uvloop(kafka_bootstrap):
    """The reason for the patch. When this fails, aiokafka handles it itself and
    streams/faust/aiokafka_uvloop.py can go."""
    from aiokafka.conn import AIOKafkaConnection

    from streams.faust.aiokafka_uvloop import patch_closed_connection_writes

    patch_closed_connection_writes()
    unpatched = AIOKafkaConnection.send.__wrapped__
    error = run_on_uvloop(send_on_closed_connection(kafka_bootstrap, unpatched))
    assert type(error) is RuntimeError and "handler is closed" in str(error), repr(error)
