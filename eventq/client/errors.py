"""The client's exceptions: eventq's one error hierarchy (``eventq.errors``), with one
class per protocol error a caller may want to catch by name.

Each is the server's reply turned back into the error the server raised, so
``except NotFound`` works the same on both sides of the wire.
"""

from __future__ import annotations

from eventq.errors import (
    DUPLICATE_JOB,
    DUPLICATE_RESULT,
    FORBIDDEN,
    UNAUTHORIZED,
    ClientError,
    ErrorReply,
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
    that it holds (docs/security.md, "Fail closed"): pass ``token=`` (or
    ``--token``/``EVENTQ_TOKEN``)."""


class Forbidden(ClientError):
    """``-CLIENT-ERROR Forbidden``: the token's roles do not include this request."""


# The client's own classes of some replies (eventq.errors.ERROR_CLASSES gives the class
# the server raised): a client error's by its text, the others' by that class.
_CLIENT_ERRORS: dict[str, type[ClientError]] = {
    DUPLICATE_JOB: DuplicateJob, DUPLICATE_RESULT: DuplicateResult,
    UNAUTHORIZED: Unauthorized, FORBIDDEN: Forbidden,
}
_REFINED: dict[type[EventqError], type[EventqError]] = {Timeout: TimedOut}


def error_of(line: bytes) -> EventqError:
    """The exception for an error reply line (without its CRLF)."""
    reply = ErrorReply.of(line)
    cls = reply.error_class
    if cls is ClientError:
        return _CLIENT_ERRORS.get(reply.text, ClientError)(reply.text)
    if cls is ServerError:
        return ServerError(reply.text or reply.code)
    return _REFINED.get(cls, cls)(reply.text)


__all__ = [
    "ClientError", "ConnectionLost", "DuplicateJob", "DuplicateResult", "EventqError",
    "Forbidden", "NotFound", "Unauthorized", "ServerError", "TimedOut", "Timeout", "Unavailable", "error_of",
]
