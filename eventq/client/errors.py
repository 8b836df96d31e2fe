"""The client's exceptions: eventq's one error hierarchy (``eventq.errors``), with one
class per protocol error a caller may want to catch by name.

Each is the server's reply turned back into the error the server raised, so
``except NotFound`` works the same on both sides of the wire.
"""

from __future__ import annotations

from eventq.errors import (
    DUPLICATE_JOB,
    DUPLICATE_RESULT,
    ClientError,
    EventqError,
    NotFound,
    ServerError,
    Timeout,
)


class DuplicateJob(ClientError):
    """``-CLIENT-ERROR Duplicate job``: the id is taken (in any state, until TTL)."""


class DuplicateResult(ClientError):
    """``-CLIENT-ERROR Duplicate result``: the job already completed or failed."""


class TimedOut(Timeout):
    """``-TIMEOUT``: nothing happened within the request's wait-timeout."""


class ConnectionLost(ServerError):
    """The connection broke before the whole reply arrived: the request may or may not
    have taken effect (check with ``inspect_job`` before repeating an add)."""


class Unavailable(ServerError):
    """No connection could be made within the client's ``connect_timeout_s``."""


class Unauthorized(ClientError):
    """``-CLIENT-ERROR Unauthorized``: the server has tokens and this client gave none
    that it holds (docs/security.md): pass ``token=`` (or ``--token``/``EVENTQ_TOKEN``)."""


class Forbidden(ClientError):
    """``-CLIENT-ERROR Forbidden``: the token's roles do not include this request."""


_CLIENT_ERRORS = {DUPLICATE_JOB: DuplicateJob, DUPLICATE_RESULT: DuplicateResult,
                  "Unauthorized": Unauthorized, "Forbidden": Forbidden}


def error_of(line: bytes) -> EventqError:
    """The exception for an error reply line (without its CRLF)."""
    code, _, text_bytes = line[1:].partition(b" ")
    text = text_bytes.decode("utf-8", errors="replace")
    if code == b"CLIENT-ERROR":
        return _CLIENT_ERRORS.get(text, ClientError)(text)
    if code == b"NOT-FOUND":
        return NotFound(text)
    if code == b"TIMEOUT":
        return TimedOut(text)
    return ServerError(text or code.decode("latin-1"))


__all__ = [
    "ClientError", "ConnectionLost", "DuplicateJob", "DuplicateResult", "EventqError",
    "Forbidden", "NotFound", "Unauthorized", "ServerError", "TimedOut", "Timeout", "Unavailable", "error_of",
]
