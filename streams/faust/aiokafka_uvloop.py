"""aiokafka under uvloop: a write to a connection the broker has closed raises RuntimeError.

`AIOKafkaConnection.send` turns only OSError into the KafkaConnectionError that the rest
of aiokafka handles (reconnect, refresh metadata, retry); uvloop raises RuntimeError
("... the handler is closed") where asyncio's own transport drops the write
(aio-libs/aiokafka#1038, open). The RuntimeError then kills a background task nothing
restarts. Seen here after a broker restart: the consumer's metadata synchronizer died,
so every group-coordinator lookup waited forever, offsets were never committed again
and the server's stop hung (tests/e2e/test_recovery.py, about 1 run in 3).
"""

from __future__ import annotations

import functools
from typing import Any

CLOSED_HANDLE_TEXT = "the handler is closed"  # uvloop/handles/handle.pyx _ensure_alive


def patch_closed_connection_writes() -> None:
    """Make `send` on a closed uvloop transport fail like a broken connection. Idempotent."""
    from aiokafka import errors
    from aiokafka.conn import AIOKafkaConnection, CloseReason

    original = AIOKafkaConnection.send
    if getattr(original, "eventq_patched", False):
        return

    # aiokafka has no types: its connection, request and response are Any.
    @functools.wraps(original)
    def send(self: Any, request: Any, expect_response: bool = True) -> Any:
        try:
            return original(self, request, expect_response)
        except RuntimeError as error:
            if CLOSED_HANDLE_TEXT not in str(error):
                raise
            self.close(reason=CloseReason.CONNECTION_BROKEN, exc=error)
            raise errors.KafkaConnectionError(
                f"Connection at {self.host}:{self.port} broken: {error}"
            ) from error

    send.__dict__["eventq_patched"] = True
    AIOKafkaConnection.send = send
