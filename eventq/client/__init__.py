"""eventq's Python client: ``Client`` (blocking) and ``AsyncClient`` (asyncio).

Both speak the workq protocol, so they work against workq too for the commands workq
has (touch, pause, resume, -backoff and digest are eventq's)::

    from eventq.client import Client

    with Client() as client:                          # 127.0.0.1:9922
        client.add("emails", b"hello")                # -> the job's UUID
        job = client.lease("emails", wait_timeout_ms=1_000)
        client.complete(job.id, b"done")

Errors are ``eventq.errors.EventqError`` subclasses, one per protocol error:
``NotFound``, ``TimedOut``, ``DuplicateJob``, ``DuplicateResult``, ``Unauthorized`` and
``Forbidden`` (a server with tokens: pass ``token=``), ``ClientError`` (any other
refusal), ``ServerError``, and ``ConnectionLost`` / ``Unavailable``.
Workers: ``eventq.worker``.
"""

from eventq.client.aio import AsyncClient
from eventq.client.errors import (
    ClientError,
    ConnectionLost,
    DuplicateJob,
    DuplicateResult,
    EventqError,
    Forbidden,
    NotFound,
    ServerError,
    TimedOut,
    Unauthorized,
    Unavailable,
)
from eventq.client.models import (
    Job,
    JobInfo,
    NewJob,
    QueueInfo,
    RecurrenceInfo,
    Result,
    ServerInfo,
)
from eventq.client.sync import AddManyError, Client
from eventq.client.tls import tls_context

__all__ = [
    "AddManyError", "AsyncClient", "Client", "ClientError", "ConnectionLost", "DuplicateJob",
    "DuplicateResult", "EventqError", "Forbidden", "Job", "JobInfo", "NewJob", "NotFound",
    "QueueInfo", "RecurrenceInfo", "Result", "ServerError", "ServerInfo", "TimedOut", "Unauthorized",
    "Unavailable", "tls_context",
]
