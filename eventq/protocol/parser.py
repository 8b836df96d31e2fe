"""A sans-IO parser for workq requests (docs/protocol.md, "Connections and framing" and
"Arguments").

Feed it bytes with ``feed``; take events with ``next_event`` until it returns None
("need more data"). An event is a request (``eventq.protocol.requests``), an
``EventqError`` to be answered with its ``reply`` (errors are returned, never
raised, so replies stay in request order), or ``Close`` (close without a reply).

After a ``FramingError`` or ``Close`` the byte stream is out of step and the parser
is finished: ``closed`` is True and every later call returns None. Every other error
leaves the stream in step: a data block that belongs to the failed request is
consumed before its error is returned.

Checks run in the spec's order: 1 flag syntax, 2 verb, 3 number of positional words
and of flags, 4 flag names, 5 framing of the data block, 6 the fields in the order
listed for each command, [eventq] 6a the scope of the connection's token
(docs/security.md, "Queue-name prefixes": a queue name outside its prefix is Forbidden).
(7, state, belongs to the core.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from eventq.errors import (
    INVALID_COMMAND_ARGS,
    INVALID_COMMAND_FLAGS,
    LINE_TOO_LONG,
    UNKNOWN_COMMAND,
    ClientError,
    EventqError,
    FramingError,
)
from eventq.limits import MAX_LINE_BYTES

from .access import Access
from .buffer import ReceiveBuffer
from .grammar import GRAMMAR, Clock, Command
from .requests import Close, Request
from .tokens import Tokens, split_line
from .values import parse_size

Event = Request | EventqError | Close

_CR = 0x0D
_LF = 0x0A
_LINE_ENCODING = "latin-1"  # one character per byte: lengths and bytes are preserved


@dataclass(frozen=True, slots=True)
class _AwaitingBlock:
    """A data-carrying request whose line is read and whose data block is not yet.

    ``line_error`` is the text of a failed check 1, 3 or 4: the block is still read
    (so the stream stays in step) and then that error, not the request, is the event.
    """

    command: Command
    words: tuple[str, ...]
    flags: Mapping[str, str]
    size: int
    line_error: str | None

    @property
    def framing_error(self) -> FramingError:
        """The event if the block is not followed by ``\\r\\n`` (first failed check wins)."""
        assert self.command.data is not None
        return FramingError(self.line_error or self.command.data.size_error)


class Parser:
    """Turns the bytes of one connection into request events (see module docstring)."""

    def __init__(self, now_ms: Clock, access: Access | None = None) -> None:
        self._now_ms = now_ms  # read only for schedule's "time + ttl in the future"
        # The connection's standing with a server that has tokens (None: no tokens):
        # asked about each request's verb before any check (docs/security.md, "Fail
        # closed").
        self._access = access
        self._buffer = ReceiveBuffer()
        self._awaiting: _AwaitingBlock | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once a FramingError or Close was returned: no more events will come."""
        return self._closed

    def feed(self, data: bytes) -> None:
        """Add received bytes. Bytes after the stream went out of step are dropped."""
        if not self._closed:
            self._buffer.extend(data)

    def next_event(self) -> Event | None:
        """The next event, or None when more data is needed (or the parser is closed)."""
        if self._closed:
            return None
        try:
            event = self._next_event()
        except EventqError as error:
            event = error
        if _closes_connection(event):
            self._closed = True
            self._awaiting = None
        return event

    def _next_event(self) -> Event | None:
        if self._awaiting is None:
            line = self._next_line()
            if line is None or isinstance(line, Close):
                return line
            outcome = _interpret_line(line, self._now_ms, self._access)
            if not isinstance(outcome, _AwaitingBlock):
                return outcome
            self._awaiting = outcome
        return self._next_block()

    def _next_line(self) -> str | Close | None:
        """The next request line without its ``\\r\\n``; raises if it is too long.

        A line whose content exceeds MAX_LINE_BYTES is an error as soon as that is
        certain, without waiting for its end. A line ending in a bare ``\\n`` is Close.
        """
        raw = self._buffer.take_line()
        if raw is None:
            if self._buffer.unterminated_line_length() > MAX_LINE_BYTES:
                raise FramingError(LINE_TOO_LONG)
            return None
        has_cr = raw.endswith(b"\r")
        content = raw[:-1] if has_cr else raw
        if len(content) > MAX_LINE_BYTES:
            raise FramingError(LINE_TOO_LONG)
        if not has_cr:
            return Close()
        return content.decode(_LINE_ENCODING)

    def _next_block(self) -> Event | None:
        """The pending data-carrying request once its block and ``\\r\\n`` arrived.

        Framing fails as soon as a byte after the block is not the expected one.
        """
        awaiting = self._awaiting
        assert awaiting is not None
        available = len(self._buffer)
        for offset, expected in ((awaiting.size, _CR), (awaiting.size + 1, _LF)):
            if available <= offset:
                return None
            if self._buffer.byte_at(offset) != expected:
                raise awaiting.framing_error
        block = self._buffer.take(awaiting.size)
        self._buffer.take(2)  # the \r\n just checked
        self._awaiting = None
        if awaiting.line_error is not None:
            return ClientError(awaiting.line_error)
        request = _build_request(
            awaiting.command, awaiting.words, awaiting.flags, block, self._now_ms)
        return _scoped(request, self._access)


def _closes_connection(event: Event | None) -> bool:
    return isinstance(event, Close) or (isinstance(event, EventqError) and event.closes_connection)


# --- interpreting a line with the grammar table ---------------------------------------


def _interpret_line(line: str, now_ms: Clock, access: Access | None) -> Request | _AwaitingBlock:
    """Checks 1–4 (and the size of a data block) for one line; raises on failure."""
    tokens = split_line(line)
    if access is not None:
        denied = access.denial(tokens.verb)
        if denied is not None:
            return _deny(tokens, denied)
    command, words = _resolve_command(tokens)  # checks 1 and 2
    line_error = _line_error(command, words, tokens)  # checks 1, 3 and 4
    if command.data is not None:
        return _await_block(command, words, tokens, line_error)
    if line_error is not None:
        raise ClientError(line_error)
    return _scoped(_build_request(command, words, tokens.flags, b"", now_ms), access)


def _scoped(request: Request, access: Access | None) -> Request:
    """Check 6a (docs/security.md, "Queue-name prefixes"), once the fields are valid: a
    request naming a queue outside the token's prefix is Forbidden. A server without
    tokens skips it."""
    if access is not None:
        denied = access.scope_denial(request)
        if denied is not None:
            raise ClientError(denied)
    return request


def _deny(tokens: Tokens, denied: str) -> _AwaitingBlock:
    """A request the connection may not make (docs/security.md, "Fail closed"): framed
    as usual, so the stream stays in step, and answered ``denied`` before any other
    check. Its data block is read when its verb carries one; where the block cannot be
    located the stream is out of step and the error closes, with the same text (nothing
    about the request's fields is revealed)."""
    try:
        command, words = _lookup_command(tokens.verb, tokens.words)
    except ClientError:
        raise ClientError(denied) from None
    if command.data is None:
        raise ClientError(denied)
    return _await_block(command, words, tokens, denied)


def _resolve_command(tokens: Tokens) -> tuple[Command, tuple[str, ...]]:
    """Check 2, the verb; a flag syntax error (check 1) outranks its failure."""
    try:
        return _lookup_command(tokens.verb, tokens.words)
    except ClientError:
        if tokens.flags_malformed:
            raise ClientError(INVALID_COMMAND_FLAGS) from None
        raise


def _lookup_command(verb: str, words: tuple[str, ...]) -> tuple[Command, tuple[str, ...]]:
    """The command named by the verb (and inspect's object) and its positional words.

    ``inspect`` without an object is a wrong argument count, with an unknown one an
    unknown command (as workq's inspect router answers).
    """
    entry = GRAMMAR.get(verb)
    if entry is None:
        raise ClientError(UNKNOWN_COMMAND)
    if isinstance(entry, Command):
        return entry, words
    if not words:
        raise ClientError(INVALID_COMMAND_ARGS)
    command = entry.commands.get(words[0])
    if command is None:
        raise ClientError(UNKNOWN_COMMAND)
    return command, words[1:]


def _line_error(command: Command, words: tuple[str, ...], tokens: Tokens) -> str | None:
    """The first failure of check 1 (flag syntax), 3 (counts) and 4 (flag names)."""
    if tokens.flags_malformed:
        return INVALID_COMMAND_FLAGS
    if not command.accepts_word_count(len(words)) or not command.accepts_flag_count(tokens.flags):
        return INVALID_COMMAND_ARGS
    if not command.flag_names.issuperset(tokens.flags):
        return INVALID_COMMAND_FLAGS
    return None


def _await_block(
    command: Command, words: tuple[str, ...], tokens: Tokens, line_error: str | None
) -> _AwaitingBlock:
    """A data-carrying command: locate its block, or fail closing the connection.

    With the wrong number of words the size cannot be found; with an invalid size the
    block cannot be skipped. Either way the stream is out of step (docs/protocol.md, "Connections
    and framing") and
    the error closes. Its text is still that of the first failed check, so a flag or
    count error outranks the size error.
    """
    assert command.data is not None
    if not command.accepts_word_count(len(words)):
        raise FramingError(line_error or INVALID_COMMAND_ARGS)  # line_error is set here
    size = parse_size(words[command.data.size_index], line_error or command.data.size_error)
    return _AwaitingBlock(command, words, tokens.flags, size, line_error)


def _build_request(
    command: Command,
    words: tuple[str, ...],
    flags: Mapping[str, str],
    block: bytes,
    now_ms: Clock,
) -> Request:
    """Check 6: parse the fields in the command's order and build the request."""
    values: dict[str, object] = {}
    if command.data is not None:
        values[command.data.keyword] = block
    for field in command.fields:
        values[field.keyword] = field.source.read(words, flags, field.parse)
        if field.check is not None:
            field.check(values, now_ms)
    return command.request(**values)  # type: ignore[no-any-return]  # request: a class, typed type
