"""The payload of a record: one workq command.

Byte 0 is the command type, then its fields (all varints are Go's, see ``varint``):

    1 add, 2 schedule   id(16) · name len · name · ttr · ttl · priority (zig-zag) ·
                        max-attempts · max-fails · payload len · payload ·
                        time(15) · created(15)
    3 complete, 4 fail  id(16) · result len · result
    5 delete, 6 expire, 7 start-attempt, 8 timeout-attempt   id(16)

Bytes left over after the fields, an unknown type, or a field cut short make the
payload corrupt (``PayloadError``).

Values are kept as decoded, without workq's validation or Go's narrowing (workq
stores ttr as uint32, priority as int32 and max-attempts/max-fails as uint8 and
truncates on read; all writers it knows stay within those ranges). The name must be
UTF-8 (workq only accepts ``[a-zA-Z0-9_.-]``). A job ``time`` of ``None`` is Go's
zero time ("not scheduled", what add writes); ``created_ns`` is always an instant.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable, ClassVar, TypeVar, Union

from .timefmt import TIME_LEN, TimeFormatError, decode_instant_ns, decode_time_ns, encode_time_ns
from .varint import VarintError, decode_uvarint, decode_varint, encode_uvarint, encode_varint

CMD_ADD = 1
CMD_SCHEDULE = 2
CMD_COMPLETE = 3
CMD_FAIL = 4
CMD_DELETE = 5
CMD_EXPIRE = 6
CMD_START_ATTEMPT = 7
CMD_TIMEOUT_ATTEMPT = 8

ID_LEN = 16


class PayloadError(ValueError):
    """A record payload that is not a valid workq command."""


@dataclass(frozen=True)
class _JobCommand:
    """Fields shared by add and schedule (ttr/ttl in milliseconds, times in Unix ns)."""

    id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    priority: int
    max_attempts: int
    max_fails: int
    payload: bytes
    time_ns: int | None
    created_ns: int


@dataclass(frozen=True)
class WqAdd(_JobCommand):
    TYPE: ClassVar[int] = CMD_ADD
    NAME: ClassVar[str] = "add"


@dataclass(frozen=True)
class WqSchedule(_JobCommand):
    TYPE: ClassVar[int] = CMD_SCHEDULE
    NAME: ClassVar[str] = "schedule"


@dataclass(frozen=True)
class WqComplete:
    TYPE: ClassVar[int] = CMD_COMPLETE
    NAME: ClassVar[str] = "complete"
    id: uuid.UUID
    result: bytes


@dataclass(frozen=True)
class WqFail:
    TYPE: ClassVar[int] = CMD_FAIL
    NAME: ClassVar[str] = "fail"
    id: uuid.UUID
    result: bytes


@dataclass(frozen=True)
class WqDelete:
    TYPE: ClassVar[int] = CMD_DELETE
    NAME: ClassVar[str] = "delete"
    id: uuid.UUID


@dataclass(frozen=True)
class WqExpire:
    TYPE: ClassVar[int] = CMD_EXPIRE
    NAME: ClassVar[str] = "expire"
    id: uuid.UUID


@dataclass(frozen=True)
class WqStartAttempt:
    TYPE: ClassVar[int] = CMD_START_ATTEMPT
    NAME: ClassVar[str] = "start-attempt"
    id: uuid.UUID


@dataclass(frozen=True)
class WqTimeoutAttempt:
    TYPE: ClassVar[int] = CMD_TIMEOUT_ATTEMPT
    NAME: ClassVar[str] = "timeout-attempt"
    id: uuid.UUID


Command = Union[
    WqAdd, WqSchedule, WqComplete, WqFail, WqDelete, WqExpire, WqStartAttempt, WqTimeoutAttempt
]

COMMAND_CLASSES: dict[int, type[Command]] = {
    cls.TYPE: cls
    for cls in (
        WqAdd, WqSchedule, WqComplete, WqFail, WqDelete, WqExpire, WqStartAttempt, WqTimeoutAttempt
    )
}
COMMAND_NAMES: dict[int, str] = {t: cls.NAME for t, cls in COMMAND_CLASSES.items()}

_ID_ONLY = (WqDelete, WqExpire, WqStartAttempt, WqTimeoutAttempt)


def _id_bytes(id_: uuid.UUID) -> bytes:
    if not isinstance(id_, uuid.UUID):
        raise TypeError(f"command id must be a uuid.UUID, not {type(id_).__name__}")
    return id_.bytes


def _blob(b: bytes) -> bytes:
    b = bytes(b)
    return encode_uvarint(len(b)) + b


def encode_payload(cmd: Command) -> bytes:
    """Encode a command as a record payload."""
    if isinstance(cmd, _JobCommand):
        if type(cmd) not in (WqAdd, WqSchedule):
            raise TypeError(f"not a workq command: {type(cmd).__name__}")
        return b"".join(
            (
                bytes((cmd.TYPE,)),
                _id_bytes(cmd.id),
                _blob(cmd.name.encode("utf-8")),
                encode_uvarint(cmd.ttr_ms),
                encode_uvarint(cmd.ttl_ms),
                encode_varint(cmd.priority),
                encode_uvarint(cmd.max_attempts),
                encode_uvarint(cmd.max_fails),
                _blob(cmd.payload),
                encode_time_ns(cmd.time_ns),
                encode_time_ns(cmd.created_ns),
            )
        )
    if isinstance(cmd, (WqComplete, WqFail)):
        return bytes((cmd.TYPE,)) + _id_bytes(cmd.id) + _blob(cmd.result)
    if isinstance(cmd, _ID_ONLY):
        return bytes((cmd.TYPE,)) + _id_bytes(cmd.id)
    raise TypeError(f"not a workq command: {type(cmd).__name__}")


T = TypeVar("T")


class _Reader:
    """Sequential field reader over one payload; every failure is a PayloadError."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 1
        self.what = what

    def _fail(self, field: str, detail: str) -> PayloadError:
        return PayloadError(f"{self.what}: {field} at payload byte {self.pos}: {detail}")

    def take(self, field: str, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise self._fail(field, f"needs {n} bytes, {len(self.data) - self.pos} left")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def uvarint(self, field: str) -> int:
        try:
            value, self.pos = decode_uvarint(self.data, self.pos)
        except VarintError as e:
            raise self._fail(field, str(e)) from None
        return value

    def varint(self, field: str) -> int:
        try:
            value, self.pos = decode_varint(self.data, self.pos)
        except VarintError as e:
            raise self._fail(field, str(e)) from None
        return value

    def id(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take("id", ID_LEN))

    def blob(self, field: str) -> bytes:
        return self.take(field, self.uvarint(field + " length"))

    def time(self, field: str) -> int | None:
        """A time in Unix ns; Go's zero time is None."""
        return self._time(field, decode_time_ns)

    def instant(self, field: str) -> int:
        """A time in Unix ns, Go's zero time as its own instant."""
        return self._time(field, decode_instant_ns)

    def _time(self, field: str, decode: Callable[[bytes], T]) -> T:
        raw = self.take(field, TIME_LEN)
        try:
            return decode(raw)
        except TimeFormatError as e:
            raise self._fail(field, str(e)) from None

    def finish(self) -> None:
        left = len(self.data) - self.pos
        if left:
            raise PayloadError(f"{self.what}: {left} byte(s) left over after the fields")


def decode_payload(data: bytes) -> Command:
    """Decode a record payload into a command; raises ``PayloadError`` if corrupt."""
    data = bytes(data)
    if not data:
        raise PayloadError("empty payload (no command type)")
    cmd_type = data[0]
    cls = COMMAND_CLASSES.get(cmd_type)
    if cls is None:
        raise PayloadError(f"unknown command type {cmd_type}")
    r = _Reader(data, cls.NAME)
    cmd: Command
    if issubclass(cls, _JobCommand):  # WqAdd, WqSchedule
        id_ = r.id()
        name_raw = r.blob("name")
        try:
            name = name_raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PayloadError(f"{cls.NAME}: name is not UTF-8: {e}") from None
        cmd = cls(
            id=id_,
            name=name,
            ttr_ms=r.uvarint("ttr"),
            ttl_ms=r.uvarint("ttl"),
            priority=r.varint("priority"),
            max_attempts=r.uvarint("max-attempts"),
            max_fails=r.uvarint("max-fails"),
            payload=r.blob("payload"),
            time_ns=r.time("time"),
            created_ns=r.instant("created"),
        )
    elif issubclass(cls, (WqComplete, WqFail)):
        cmd = cls(id=r.id(), result=r.blob("result"))
    else:
        cmd = cls(id=r.id())
    r.finish()
    return cmd
