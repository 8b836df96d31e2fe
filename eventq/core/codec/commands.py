"""Command records (``eventq.commands`` values): a msgpack map with short keys, ``v``
the schema version (1), ``t`` the command type (``CommandType``), then the command's
fields (``COMMAND_FIELDS``), then the issuer's optional correlation fields ``o`` and
``q`` and [eventq] its audit field ``by`` (``CORRELATION_FIELDS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from eventq.core.codec.compiled import (
    TYPE_KEY,
    VERSION_KEY,
    _check_keys,
    _Codec,
    _compiled,
    _guarded,
    _int,
    _keys,
    _pack,
    _unpack,
)
from eventq.core.codec.kinds import (
    BIN,
    INT,
    ISSUER,
    NODE,
    NOTICE_OUTCOME,
    REQUEST_ID,
    STR,
    UUID_BYTES,
    WAITING_STATE,
    CodecError,
    Field,
    Nested,
    Table,
)
from eventq.core.codec.rows import (
    ADD_FIELDS,
    ATTEMPT,
    DELAY,
    DEPENDENT_CREATED,
    JOB_ID,
    QUEUE_NAME,
    RECURRENCE_DEFINITION_FIELDS,
    RECURRENCE_NAME,
    RESULT,
    SCHEDULE_FIELDS,
    SCOPE,
    SNAPSHOT_FIELDS,
)
from eventq.core.commands import (
    COMMAND_CLASSES,
    QUEUE_COMMAND_CLASSES,
    RECURRENCE_COMMAND_CLASSES,
    Command,
    CommandType,
    QueueCommand,
)

SCHEMA_VERSION = 1  # of command records
_VERSIONS = frozenset({SCHEMA_VERSION})


@dataclass(frozen=True, slots=True)
class DecodedCommand:
    """A command with the optional correlation fields of its issuer (a job's command,
    or a queue's: ``Pause``/``Resume``, which name no job)."""

    command: Command | QueueCommand
    node: str | None = None
    request_id: int | None = None
    # [eventq] audit (docs/security.md, "Queue-name prefixes"): the name of the token
    # that issued it (Grant.name, e.g. ``line-3``, never the token); None: a server
    # without tokens, or a command eventq wrote itself (timers, follow-ups) or written
    # before audit existed.
    issuer: str | None = None


COMMAND_FIELDS: dict[CommandType, Table] = {
    CommandType.ADD: ADD_FIELDS,
    CommandType.SCHEDULE: SCHEDULE_FIELDS,
    CommandType.COMPLETE: (JOB_ID, RESULT, SCOPE),
    # -group: absent when none, so workq's fails keep their bytes.
    CommandType.FAIL: (JOB_ID, RESULT, Field("fd", "group", STR, absent=None), SCOPE),
    CommandType.DELETE: (JOB_ID, SCOPE),
    CommandType.EXPIRE: (JOB_ID,),
    CommandType.START_ATTEMPT: (JOB_ID, ATTEMPT),
    CommandType.TIMEOUT_ATTEMPT: (JOB_ID, ATTEMPT),
    CommandType.IMPORT: (JOB_ID, Nested("j", "import snapshot", SNAPSHOT_FIELDS)),
    CommandType.RELEASE_ATTEMPT: (
        JOB_ID,
        ATTEMPT,
        Field("s", "state", WAITING_STATE),
        # Absent: a give-back by attempt number (records written before claims).
        Field("c", "claim", INT, absent=None, note="the start-attempt's position"),
    ),
    CommandType.TOUCH: (
        JOB_ID,
        ATTEMPT,
        Field("r", "ttr_ms", INT, absent=None, note="None: the job's TTR"),
        SCOPE,
    ),
    CommandType.PAUSE: (QUEUE_NAME,),  # a queue's command: no job, no ``i``
    CommandType.RESUME: (QUEUE_NAME,),
    # Workflows': ``i`` is the id of the job whose partition applies it, as for all.
    CommandType.DEPEND: (
        Field("i", "upstream", UUID_BYTES),
        Field("dp", "dependent", UUID_BYTES),
        DEPENDENT_CREATED,
        Field("dl", "dependent_deadline_ms", INT, nil=True),
        SCOPE,
    ),
    CommandType.UPSTREAM: (
        Field("i", "dependent", UUID_BYTES),
        DEPENDENT_CREATED,
        Field("u", "upstream", UUID_BYTES),
        Field("oc", "outcome", NOTICE_OUTCOME),
        Field("ch", "change", INT, note="a position"),
        Field("a", "at_ms", INT),
        Field("x", "result", BIN, absent=None, note="completed, failed"),
    ),
    # Recurring jobs' (docs/workflows.md, "Recurring jobs"): keyed ``recur:<name>``,
    # with the recurrence's name ``rn`` and no ``i``.
    CommandType.RECUR: RECURRENCE_DEFINITION_FIELDS + (SCOPE,),
    CommandType.UNRECUR: (RECURRENCE_NAME, SCOPE),
    CommandType.FIRE: (RECURRENCE_NAME, Field("sl", "slot", INT)),
    CommandType.RETRY: (JOB_ID, DELAY, SCOPE),
}
# Last in every command record: its issuer, when known (absent or nil: unknown).
CORRELATION_FIELDS: tuple[Field, ...] = (
    Field("o", "node", NODE, absent=None, nil=True),
    Field("q", "request_id", REQUEST_ID, absent=None, nil=True),
    # [eventq] audit (docs/security.md, "Queue-name prefixes"): who issued it, the
    # token's name; absent: none.
    Field("by", "issuer", ISSUER, absent=None, nil=True, note="the token's name"),
)


def _command_codec(t: CommandType) -> _Codec:
    cls = COMMAND_CLASSES.get(t) or QUEUE_COMMAND_CLASSES.get(t) or RECURRENCE_COMMAND_CLASSES[t]
    return _compiled(cls, COMMAND_FIELDS[t], _COMMAND_AROUND)


_COMMAND_AROUND = frozenset({VERSION_KEY, TYPE_KEY}) | _keys(CORRELATION_FIELDS)
_COMMAND_CODECS: dict[int, _Codec] = {t: _command_codec(t) for t in CommandType}
_COMMAND_CODEC_OF: dict[type, _Codec] = {c.cls: c for c in _COMMAND_CODECS.values()}
_CORRELATION = _compiled(DecodedCommand, CORRELATION_FIELDS, frozenset(), "command")


def encode_command(
    command: Command | QueueCommand, *, node: str | None = None, request_id: int | None = None,
    issuer: str | None = None,
) -> bytes:
    """The command record of ``command``, with the issuer's optional correlation fields
    and [eventq] audit name (``issuer``: the token's name; docs/security.md,
    "Queue-name prefixes")."""
    codec = _COMMAND_CODEC_OF.get(type(command))
    if codec is None:
        raise CodecError(f"not a command: {command!r:.100}")
    m: dict[str, Any] = {VERSION_KEY: SCHEMA_VERSION, TYPE_KEY: int(command.type)}
    codec.write(command, None, m)
    if node is not None or request_id is not None or issuer is not None:
        _CORRELATION.write(DecodedCommand(command, node, request_id, issuer), None, m)
    return _pack(m)


def _decode_command(data: object) -> DecodedCommand:
    m = _unpack(data, _VERSIONS)
    t = _int(m, TYPE_KEY)
    codec = _COMMAND_CODECS.get(t)
    if codec is None:
        raise CodecError(f"unknown command type {t}")
    _check_keys(m, codec.keys, f"command type {t}")
    return _CORRELATION.read(m, codec.read(m, None))  # type: ignore[no-any-return]  # exec-built reader


def decode_command(data: bytes) -> DecodedCommand:
    """The command (and correlation fields) of a command record; ``CodecError`` if bad."""
    return _guarded("command", _decode_command, data)  # type: ignore[no-any-return]  # _guarded: Any


def correlation_of(data: object) -> tuple[str | None, int | None]:
    """The issuer (node, request id) of a record that may not decode as a command, so
    that whoever waits for it can be told it was rejected; (None, None) if unknown.
    Never raises."""
    try:
        m = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception:
        return None, None
    if type(m) is not dict:
        return None, None
    node, request_id = m.get("o"), m.get("q")
    if type(node) is not str or type(request_id) is not int:
        return None, None
    return node, request_id

