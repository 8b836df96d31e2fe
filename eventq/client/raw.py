"""A minimal asyncio workq client for the test suite and benchmarks (raw replies as
bytes and dicts). Users want ``eventq.client`` (typed, pooled, sync and asyncio).

Any workq client works with eventq; this one exists so the project can drive itself.
Errors come back as the same ``EventqError`` classes the server uses.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from dataclasses import dataclass

from eventq.core.fields import MAX_ATTEMPTS, MAX_FAILS, PRIORITY, Option
from eventq.errors import ErrorReply, EventqError, ServerError

JobId = uuid.UUID | str  # a job's id, as a UUID or its text


@dataclass(frozen=True)
class Leased:
    id: uuid.UUID
    name: str
    ttr_ms: int
    payload: bytes


@dataclass(frozen=True)
class JobResult:
    id: uuid.UUID
    success: bool
    result: bytes


def _flags(*given: tuple[Option[int], int | None]) -> list[str]:
    """The flags of a job's options given a value (eventq/core/fields.py names them)."""
    return [f"-{option.word}={value}" for option, value in given if value is not None]


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = 9922, *,
                      tls: ssl.SSLContext | None = None, token: str | None = None) -> "RawClient":
        """``tls``: the context for a gateway that speaks TLS; ``token``: sent with
        ``auth`` first, for a server with tokens (docs/security.md, "Tokens and roles")."""
        reader, writer = await asyncio.open_connection(
            host, port, limit=4 * 1024 * 1024, ssl=tls,
            server_hostname=host if tls is not None else None)
        client = cls(reader, writer)
        if token is not None:
            try:
                await client.auth(token)
            except BaseException:
                await client.close()
                raise
        return client

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except ConnectionError:
            pass

    @property
    def usable(self) -> bool:
        """Not closed by the server while it sat idle (a process that stops closes idle
        connections: docs/operations.md, "Planned restarts"): a request sent on one that
        was would be lost without a word."""
        return not (self._reader.at_eof() or self._writer.is_closing())

    async def __aenter__(self) -> "RawClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- wire ----------------------------------------------------------------------

    def send(self, words: list[str], data: bytes | None = None) -> None:
        line = " ".join(words).encode() + b"\r\n"
        self._writer.write(line if data is None else line + data + b"\r\n")

    async def _line(self) -> bytes:
        line = await self._reader.readuntil(b"\r\n")
        return line[:-2]

    async def _block(self, size: int) -> bytes:
        data = await self._reader.readexactly(size + 2)
        return data[:-2]

    async def _status(self) -> int:
        """Reads `+OK` / `+OK n` (returns n, 0 for a bare +OK) or raises the error."""
        line = await self._line()
        if line.startswith(b"-"):
            raise ErrorReply.of(line).error()
        if line == b"+OK":
            return 0
        if line.startswith(b"+OK "):
            return int(line[4:])
        raise ServerError(f"unexpected reply {line!r}")

    async def _result(self) -> JobResult:
        await self._status()
        job_id, success, size = (await self._line()).split(b" ")
        return JobResult(uuid.UUID(job_id.decode()), success == b"1", await self._block(int(size)))

    async def _key_values(self) -> tuple[str, dict[str, bytes]]:
        head, count = (await self._line()).rsplit(b" ", 1)
        values: dict[str, bytes] = {}
        for _ in range(int(count)):
            # `payload` is raw bytes of `payload-size` (may hold \r\n): read it exactly.
            if "payload-size" in values and "payload" not in values:
                prefix = await self._reader.readexactly(len(b"payload "))
                assert prefix == b"payload ", prefix
                values["payload"] = await self._block(int(values["payload-size"]))
                continue
            key, _, value = (await self._line()).partition(b" ")
            values[key.decode()] = value
        return head.decode(), values

    # --- commands ------------------------------------------------------------------

    async def auth(self, token: str) -> None:
        self.send(["auth", token])
        await self._status()

    async def add(self, job_id: JobId, name: str, ttr_ms: int, ttl_ms: int, payload: bytes, *,
                  priority: int | None = None, max_attempts: int | None = None,
                  max_fails: int | None = None) -> None:
        flags = _flags((PRIORITY, priority), (MAX_ATTEMPTS, max_attempts), (MAX_FAILS, max_fails))
        self.send(["add", str(job_id), name, str(ttr_ms), str(ttl_ms), str(len(payload)),
                   *flags], payload)
        await self._status()

    async def schedule(self, job_id: JobId, name: str, ttr_ms: int, ttl_ms: int, time: str,
                       payload: bytes, *, priority: int | None = None,
                       max_attempts: int | None = None, max_fails: int | None = None) -> None:
        flags = _flags((PRIORITY, priority), (MAX_ATTEMPTS, max_attempts), (MAX_FAILS, max_fails))
        self.send(["schedule", str(job_id), name, str(ttr_ms), str(ttl_ms), time,
                   str(len(payload)), *flags], payload)
        await self._status()

    async def run(self, job_id: JobId, name: str, ttr_ms: int, wait_timeout_ms: int,
                  payload: bytes, *, priority: int | None = None) -> JobResult:
        self.send(["run", str(job_id), name, str(ttr_ms), str(wait_timeout_ms),
                   str(len(payload)), *_flags((PRIORITY, priority))], payload)
        return await self._result()

    async def result(self, job_id: JobId, wait_timeout_ms: int) -> JobResult:
        self.send(["result", str(job_id), str(wait_timeout_ms)])
        return await self._result()

    async def lease(self, names: list[str] | str, wait_timeout_ms: int) -> Leased:
        self.send(["lease", *([names] if isinstance(names, str) else names),
                   str(wait_timeout_ms)])
        await self._status()
        job_id, name, ttr, size = (await self._line()).split(b" ")
        payload = await self._block(int(size))
        return Leased(uuid.UUID(job_id.decode()), name.decode(), int(ttr), payload)

    async def complete(self, job_id: JobId, result: bytes) -> None:
        self.send(["complete", str(job_id), str(len(result))], result)
        await self._status()

    async def fail(self, job_id: JobId, result: bytes) -> None:
        self.send(["fail", str(job_id), str(len(result))], result)
        await self._status()

    async def delete(self, job_id: JobId) -> None:
        self.send(["delete", str(job_id)])
        await self._status()

    async def inspect_job(self, job_id: JobId) -> dict[str, bytes]:
        self.send(["inspect", "job", str(job_id)])
        await self._status()
        return (await self._key_values())[1]

    async def _inspect_many(self, words: list[str]) -> list[tuple[str, dict[str, bytes]]]:
        self.send(["inspect", *words])
        count = await self._status()
        return [await self._key_values() for _ in range(count)]

    async def inspect_jobs(self, name: str, offset: int = 0, limit: int = 100,
                           scheduled: bool = False) -> list[tuple[str, dict[str, bytes]]]:
        verb = "scheduled-jobs" if scheduled else "jobs"
        return await self._inspect_many([verb, name, str(offset), str(limit)])

    async def inspect_queue(self, name: str) -> dict[str, int]:
        [(_, values)] = await self._inspect_many(["queue", name])
        return {key: int(value) for key, value in values.items()}

    async def inspect_queues(self, offset: int = 0, limit: int = 100) -> dict[str, dict[str, int]]:
        found = await self._inspect_many(["queues", str(offset), str(limit)])
        return {name: {k: int(v) for k, v in values.items()} for name, values in found}

    async def inspect_server(self) -> dict[str, bytes]:
        [(_, values)] = await self._inspect_many(["server"])
        return values

    async def inspect_bulk(self) -> dict[int, dict[str, int]]:
        """eventq's extension: per partition, the next bulk offset to admit and the
        records of the bulk topic still waiting (the backlog)."""
        found = await self._inspect_many(["bulk"])
        return {int(p): {k: int(v) for k, v in values.items()} for p, values in found}

    async def digest(self) -> str:
        """eventq's extension: the order-independent digest of the whole job state."""
        self.send(["inspect", "digest"])
        await self._status()
        key, _, value = (await self._line()).partition(b" ")
        assert key == b"digest", key
        return value.decode()


__all__ = ["RawClient", "EventqError", "JobResult", "Leased"]
