"""A TCP server for the fault campaign's load tests: it reads eventq requests (a line,
and the data block of the verbs that carry one, docs/protocol.md, "Connections and
framing") and answers each with what a test's function says, or drops the connection
when it says None. Every request is kept in ``seen`` as (words, data)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

# the index of the size argument of the verbs that carry a data block
SIZE_AT = {"add": 5, "schedule": 6, "run": 5, "complete": 2, "fail": 2, "recur": 6}

Answer = Callable[[list[str], bytes | None], bytes | None]


class ScriptedServer:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.seen: list[tuple[list[str], bytes | None]] = []
        self.server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def __aenter__(self) -> ScriptedServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                words = (await reader.readuntil(b"\r\n"))[:-2].decode().split(" ")
                data = None
                if words[0] in SIZE_AT:
                    data = (await reader.readexactly(int(words[SIZE_AT[words[0]]]) + 2))[:-2]
                self.seen.append((words, data))
                reply = self.answer(words, data)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def leased(job_id: str, name: str, ttr_ms: int, payload: bytes) -> bytes:
    return (f"+OK 1\r\n{job_id} {name} {ttr_ms} {len(payload)}\r\n".encode() + payload
            + b"\r\n")
