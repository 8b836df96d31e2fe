"""The codec's vocabulary: how a field's value is held in msgpack (``Kind``), and what
a table's rows are (``Field``, ``Nested``).

Decoding never raises anything but ``CodecError`` (a ``ValueError``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from operator import attrgetter
from typing import Any, TypeAlias

from eventq.core.ids import uuid_of_bytes
from eventq.core.job import NOTICE_OUTCOMES, Link, State, UpstreamOutcome
from eventq.limits import MAX_AFTER_IDS, MAX_ISSUER_BYTES, MAX_NODE_BYTES, MAX_REQUEST_ID, MAX_TAGS


class CodecError(ValueError):
    """A record that cannot be decoded (or a value that cannot be encoded)."""


# -------------------------------------------------------------------- field kinds


def _missing(key: str) -> CodecError:
    return CodecError(f"missing field {key!r}")


class _Unchecked:
    """The type of no msgpack value: a kind with it as ``plain`` reads every value."""


@dataclass(frozen=True, slots=True)
class Kind:
    """How a field's value is held in msgpack.

    ``read(key, value)`` returns the attribute's value of a msgpack value, or raises
    ``CodecError`` if it is none of this kind; ``write`` turns an attribute's value into
    its msgpack value (None: as it is) and may refuse it. A value of type ``plain`` is
    the attribute's value as it is, and ``read`` is not called: for most fields reading
    is one type test (the decoders are on the processor's hot path).
    """

    name: str  # in the docstring's tables
    read: Callable[[str, Any], Any]
    write: Callable[[Any], Any] | None = None
    plain: type = _Unchecked


def _typed(plain: type, what: str) -> Callable[[str, Any], Any]:
    def read(key: str, value: Any) -> Any:
        if type(value) is not plain:
            raise CodecError(f"field {key!r} must be {what}, got {type(value).__name__}")
        return value

    return read


INT = Kind("int", _typed(int, "an int"), plain=int)
STR = Kind("str", _typed(str, "a str"), plain=str)
BIN = Kind("bin", _typed(bytes, "bin"), plain=bytes)
BOOL = Kind("bool", _typed(bool, "a bool"), plain=bool)


def _read_uuid(key: str, value: Any) -> uuid.UUID:
    raw = value if type(value) is bytes else BIN.read(key, value)
    if len(raw) != 16:
        raise CodecError(f"field {key!r} must be 16 bytes of UUID, got {len(raw)}")
    return uuid_of_bytes(raw)


def _read_state(key: str, value: Any) -> State:
    # Not a state: ValueError, which _guarded makes a CodecError.
    return State(value if type(value) is int else INT.read(key, value))


def _read_waiting_state(key: str, value: Any) -> State:
    value = INT.read(key, value)
    if value not in (State.NEW, State.PENDING):
        raise CodecError(f"field {key!r} must be NEW (0) or PENDING (3), not {value}")
    return State(value)


_NODE_RULE = f"a str of at most {MAX_NODE_BYTES} bytes"
_REQUEST_ID_RULE = f"an int in 0..{MAX_REQUEST_ID}"


def _is_node(value: Any) -> bool:
    return type(value) is str and len(value.encode()) <= MAX_NODE_BYTES


def _read_node(key: str, value: Any) -> str:
    if not _is_node(value):
        raise CodecError(f"field {key!r} (node) must be {_NODE_RULE}")
    return value  # type: ignore[no-any-return]  # an unpacked value: Any, checked a str


def _write_node(node: Any) -> str:
    if not _is_node(node):
        raise CodecError(f"node must be {_NODE_RULE}")
    return node  # type: ignore[no-any-return]  # Any, checked a str just above


_ISSUER_RULE = f"a str of 1 to {MAX_ISSUER_BYTES} bytes"


def _is_issuer(value: Any) -> bool:
    return type(value) is str and 0 < len(value.encode()) <= MAX_ISSUER_BYTES


def _read_issuer(key: str, value: Any) -> str:
    if not _is_issuer(value):
        raise CodecError(f"field {key!r} (issuer) must be {_ISSUER_RULE}")
    return value  # type: ignore[no-any-return]  # an unpacked value: Any, checked a str


def _write_issuer(issuer: Any) -> str:
    if not _is_issuer(issuer):
        raise CodecError(f"issuer must be {_ISSUER_RULE}")
    return issuer  # type: ignore[no-any-return]  # Any, checked a str just above


def _is_request_id(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_REQUEST_ID


def _read_request_id(key: str, value: Any) -> int:
    if not _is_request_id(value):
        raise CodecError(f"field {key!r} (request id) must be {_REQUEST_ID_RULE}")
    return value  # type: ignore[no-any-return]  # an unpacked value: Any, checked an int


def _write_request_id(request_id: Any) -> int:
    if not _is_request_id(request_id):
        raise CodecError(f"request_id must be {_REQUEST_ID_RULE}")
    return request_id  # type: ignore[no-any-return]  # Any, checked an int just above


def _read_uuids(key: str, value: Any) -> tuple[uuid.UUID, ...]:
    if type(value) is not tuple or not 1 <= len(value) <= MAX_AFTER_IDS:
        raise CodecError(f"field {key!r} must be an array of 1 to {MAX_AFTER_IDS} UUIDs")
    return tuple(_read_uuid(key, item) for item in value)


def _write_uuids(ids: tuple[uuid.UUID, ...]) -> list[bytes]:
    return [u.bytes for u in ids]


def _read_notice_outcome(key: str, value: Any) -> UpstreamOutcome:
    if type(value) is not int or value not in NOTICE_OUTCOMES:
        raise CodecError(f"field {key!r} must be an upstream notice's outcome (1 to 5), "
                         f"got {value!r:.40}")
    return UpstreamOutcome(value)


_LINK_RULE = "an array of 1 to %d links [id, outcome, change or nil, completed or nil]" % MAX_AFTER_IDS


def _read_links(key: str, value: Any) -> tuple[Link, ...]:
    if type(value) is not tuple or not 1 <= len(value) <= MAX_AFTER_IDS:
        raise CodecError(f"field {key!r} must be {_LINK_RULE}")
    links = []
    for item in value:
        if type(item) is not tuple or len(item) != 4:
            raise CodecError(f"field {key!r} must be {_LINK_RULE}")
        raw_id, outcome, change, completed = item
        if type(outcome) is not int or (change is not None and type(change) is not int) or (
            completed is not None and type(completed) is not int
        ):
            raise CodecError(f"field {key!r} must be {_LINK_RULE}")
        try:
            links.append(Link(_read_uuid(key, raw_id), UpstreamOutcome(outcome), change, completed))
        except ValueError as error:
            raise CodecError(f"field {key!r}: {error}") from None
    return tuple(links)


def _write_links(links: tuple[Link, ...]) -> list[list[Any]]:
    return [[x.id.bytes, int(x.outcome), x.change, x.completed_ms] for x in links]


_TAGS_RULE = f"an array of 1 to {MAX_TAGS} tags (str)"


def _read_tags(key: str, value: Any) -> tuple[str, ...]:
    """A job's tags (each checked by the job or command the map builds)."""
    if type(value) is not tuple or not 1 <= len(value) <= MAX_TAGS or any(
        type(tag) is not str for tag in value
    ):
        raise CodecError(f"field {key!r} must be {_TAGS_RULE}")
    return value


UUID_BYTES = Kind("UUID: 16 bytes", _read_uuid, write=attrgetter("bytes"))
TAGS = Kind("array of tags", _read_tags)
UUIDS = Kind("array of UUIDs", _read_uuids, write=_write_uuids)
NOTICE_OUTCOME = Kind("UpstreamOutcome: 1 to 5", _read_notice_outcome, write=int)
LINKS = Kind("array of links", _read_links, write=_write_links)
STATE = Kind("State", _read_state, write=int)
WAITING_STATE = Kind("State: NEW or PENDING", _read_waiting_state, write=int)
NODE = Kind(_NODE_RULE.removeprefix("a "), _read_node, write=_write_node)
REQUEST_ID = Kind(_REQUEST_ID_RULE.removeprefix("an "), _read_request_id, write=_write_request_id)
ISSUER = Kind(_ISSUER_RULE.removeprefix("a "), _read_issuer, write=_write_issuer)


# ------------------------------------------------------------------------- fields


class Absent(Enum):
    """What a missing key means, when it is not a default value (``Field.absent``)."""

    REQUIRED = "required"  # a map without it is malformed
    IN_JOB = "in the job"  # the record's job holds the value: written only without one


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a map: ``key`` holds attribute ``attr`` of the record's dataclass.

    ``absent`` is what a missing key means: ``Absent.REQUIRED``, ``Absent.IN_JOB`` (the
    record's job's ``attr``), or a default value. A value equal to the default is not
    written, so that the records of commands and jobs that do not use a field added
    later keep the bytes they had (and older records read as what they meant). ``nil``:
    nil stands for None (and is written).
    """

    key: str
    attr: str
    kind: Kind
    absent: object = Absent.REQUIRED
    nil: bool = False
    note: str = ""  # more for the docstring's tables


@dataclass(frozen=True, slots=True)
class Nested:
    """A map under ``key`` whose ``fields`` are attributes of the record's own dataclass
    (an import's job snapshot); ``what`` names it in messages."""

    key: str
    what: str
    fields: tuple[Field, ...]


Table: TypeAlias = tuple[Field | Nested, ...]
