"""A recurrence's record (eventq/core/recurrence.py), a record of its own beside the
jobs: ``{"v": 1, "df": definition, "fs", "lf", "ver"}``; the definition is the map of
``recur``'s fields (``DEFINITION_FIELDS``) with its broker time ``c``.
"""

from __future__ import annotations

from typing import Any

from eventq.core.codec.compiled import (
    VERSION_KEY,
    _check_keys,
    _compiled,
    _guarded,
    _map,
    _pack,
    _unpack,
)
from eventq.core.codec.kinds import INT, CodecError, Field, _missing
from eventq.core.codec.rows import RECURRENCE_DEFINITION_FIELDS
from eventq.core.recurrence import Definition, Recurrence

DEFINITION_FIELDS: tuple[Field, ...] = RECURRENCE_DEFINITION_FIELDS + (
    Field("c", "created_ms", INT),
)
RECURRENCE_FIELDS: tuple[Field, ...] = (
    Field("fs", "first_slot", INT),
    Field("lf", "fired_ms", INT, absent=None, note="the last fired slot's due time"),
    Field("ver", "version", INT),
)
RECURRENCE_RECORD_VERSION = 1
DEFINITION_KEY = "df"
_DEFINITION = _compiled(Definition, DEFINITION_FIELDS, frozenset())
_RECURRENCE = _compiled(Recurrence, RECURRENCE_FIELDS, frozenset({VERSION_KEY, DEFINITION_KEY}),
                        given="definition")


def encode_recurrence(record: Recurrence) -> bytes:
    """The value of a recurrence's record (eventq/core/recurrence.py)."""
    if not isinstance(record, Recurrence):
        raise CodecError(f"not a recurrence: {record!r:.100}")
    definition: dict[str, Any] = {}
    _DEFINITION.write(record.definition, None, definition)
    m: dict[str, Any] = {VERSION_KEY: RECURRENCE_RECORD_VERSION, DEFINITION_KEY: definition}
    _RECURRENCE.write(record, None, m)
    return _pack(m)


def _decode_recurrence(data: object) -> Recurrence:
    m = _unpack(data, frozenset({RECURRENCE_RECORD_VERSION}))
    _check_keys(m, _RECURRENCE.keys, "recurrence")
    if DEFINITION_KEY not in m:
        raise _missing(DEFINITION_KEY)
    inner = _map(m[DEFINITION_KEY], "definition")
    _check_keys(inner, _DEFINITION.keys, "definition")
    definition = _DEFINITION.read(inner, None)
    return _RECURRENCE.read(m, definition)  # type: ignore[no-any-return]  # exec-built reader


def decode_recurrence(data: bytes) -> Recurrence:
    """The recurrence of a recurrence record; ``CodecError`` if it is malformed."""
    return _guarded("recurrence", _decode_recurrence, data)  # type: ignore[no-any-return]  # _guarded: Any
