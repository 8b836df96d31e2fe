"""The one error hierarchy of eventq.

Every error a client can see is an ``EventqError`` and carries the exact protocol
reply line it turns into (docs/protocol.md, "Errors").
The protocol parser, the pure core and the adapters all raise or return these, so
the reply for a failure is decided in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass


class EventqError(Exception):
    """Root of every error eventq reports to a client.

    ``code`` is the reply's error code (without the leading ``-``) and ``text`` the
    optional description. ``closes_connection`` marks framing errors after which the
    byte stream is out of step, so the connection must end (docs/protocol.md, "Connections and
    framing", [eventq]).
    """

    code: str = "SERVER-ERROR"
    closes_connection: bool = False

    def __init__(self, text: str = "") -> None:
        super().__init__(text or self.code)
        self.text = text

    @property
    def reply(self) -> bytes:
        """The exact reply line, ``-CODE\\r\\n`` or ``-CODE text\\r\\n``."""
        if self.text:
            return b"-%s %s\r\n" % (self.code.encode(), self.text.encode())
        return b"-%s\r\n" % self.code.encode()

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and other.text == self.text
        )

    def __hash__(self) -> int:
        return hash((type(self), self.text))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"


class ClientError(EventqError):
    """``-CLIENT-ERROR <text>``: the request is malformed or refused by state."""

    code = "CLIENT-ERROR"


class FramingError(ClientError):
    """A client error after which the connection is closed (docs/protocol.md, "Connections and framing")."""

    closes_connection = True


class NotFound(EventqError):
    """``-NOT-FOUND``: the job or queue does not exist."""

    code = "NOT-FOUND"


class Timeout(EventqError):
    """``-TIMEOUT``: nothing happened within the wait-timeout."""

    code = "TIMEOUT"


class ServerError(EventqError):
    """``-SERVER-ERROR <text>``: the log could not be written or read."""

    code = "SERVER-ERROR"


class NotWritten(ServerError):
    """The command never reached Kafka: nothing happened, retrying is safe."""


class Unserved(NotWritten):
    """This process does not serve the job's partition right now: it is moving, this
    process or its owner is still recovering, or the owner cannot be reached. Nothing
    happened; the gateway asks again, of whoever owns it by then (docs/operations.md,
    "Planned restarts"). A write Kafka did not take in time is not one: its deadline is
    the user's (``--write-timeout-ms``)."""


class MayTakeEffect(ServerError):
    """The command reached (or may have reached) the log but was not applied in time:
    it may still take effect (docs/architecture.md, "Abandoned commands")."""


class PartitionMoved(MayTakeEffect):
    """The command is in the log, but its partition moved to another process before
    this one applied it: the new owner applies it, and may be asked for its reply as
    this process's request ``request_id`` of ``partition`` (docs/architecture.md,
    "Abandoned commands")."""

    def __init__(self, text: str, request_id: int = 0, partition: int = -1) -> None:
        super().__init__(text)
        self.request_id = request_id
        self.partition = partition


# Reading an error reply back: the class the server raised it as, by its code. The one
# place a code meets its class (``code`` above is the other way): every reader of
# replies (eventq/client/errors.py, eventq/client/raw.py) takes its errors from here.
ERROR_CLASSES: dict[str, type[EventqError]] = {
    cls.code: cls for cls in (ClientError, NotFound, Timeout, ServerError)
}


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An error reply line read back: its ``code`` and ``text`` (``-CODE text``)."""

    code: str
    text: str

    @classmethod
    def of(cls, line: bytes) -> ErrorReply:
        """The reply ``line`` (an error's, without its CRLF). The code is read as
        latin-1, the text as UTF-8 (a byte that is not is replaced)."""
        code, _, text = line[1:].partition(b" ")
        return cls(code.decode("latin-1"), text.decode("utf-8", errors="replace"))

    @property
    def error_class(self) -> type[EventqError]:
        """The class the server raised it as; ``ServerError`` for a code eventq never
        sends."""
        return ERROR_CLASSES.get(self.code, ServerError)

    def error(self) -> EventqError:
        """The error itself, of ``error_class`` with the reply's text."""
        return self.error_class(self.text)


# The exact client error texts of the spec, named once so no code spells them twice.
UNKNOWN_COMMAND = "Unknown command"
LINE_TOO_LONG = "Line too long"
INVALID_COMMAND_ARGS = "Invalid command args"
INVALID_COMMAND_FLAGS = "Invalid command flags"
INVALID_PAYLOAD_SIZE = "Invalid payload size"
INVALID_RESULT_SIZE = "Invalid result size"
INVALID_ID = "Invalid ID"
INVALID_NAME = "Invalid Name"
INVALID_TTR = "Invalid TTR"
INVALID_TTL = "Invalid TTL"
INVALID_TIME = "Invalid Time"
INVALID_MAX_ATTEMPTS = "Invalid Max Attempts"
INVALID_MAX_FAILS = "Invalid Max Fails"
INVALID_PRIORITY = "Invalid Priority"
INVALID_BACKOFF = "Invalid Backoff"  # [eventq] -backoff (docs/protocol.md, "eventq extensions")
INVALID_AFTER = "Invalid After"  # [eventq] -after (docs/workflows.md, "Values and checks")
# [eventq] docs/workflows.md, "Values and checks" and "Errors".
INVALID_TAGS = "Invalid Tags"  # -tags, and the tag of `inspect tagged`
INVALID_GROUP = "Invalid Group"  # a failure group (`fail -group=`, `inspect failed-jobs`, `retry-group`)
INVALID_DELAY = "Invalid Delay"  # `retry -delay=`
INVALID_COUNT = "Invalid Count"  # `retry-group`'s count
INVALID_EVERY = "Invalid Every"  # `recur`'s every-ms
INVALID_WAIT_TIMEOUT = "Invalid wait timeout"
# [eventq] A verb none of the token's roles may use (docs/security.md, "Tokens and
# roles"), or a queue name outside its prefix (check 6a: docs/security.md, "Queue-name
# prefixes")
FORBIDDEN = "Forbidden"
# [eventq] docs/security.md, "Fail closed": a server with tokens, and none given that it
# holds
UNAUTHORIZED = "Unauthorized"
DUPLICATE_JOB = "Duplicate job"
DUPLICATE_RESULT = "Duplicate result"
INVALID_CURSOR_OFFSET = "Invalid cursor offset"
INVALID_LIMIT = "Invalid limit"
