"""Job ids (``uuid.UUID``) made from what was already checked, without ``UUID.__init__``.

``uuid.UUID(bytes=...)`` and ``uuid.UUID(int=...)`` check their argument in Python
(which form was given, its length or range, the version to stamp) at about 2 us each,
and the request path makes several a command: decoding a command and a job's state
(eventq/core/codec), a request's id (eventq/protocol/values.py), an index entry
(eventq/state/indexes/keys.py). Where the value is already known to be 16 bytes or 128
bits, these build the same object (equal, same hash, same str, same pickle) for a third of that.
"""

from __future__ import annotations

import uuid

_UUID = uuid.UUID
_new = object.__new__
_set = object.__setattr__  # UUID forbids attribute assignment (its __setattr__ raises)
_UNKNOWN = uuid.SafeUUID.unknown  # what UUID() records when not told otherwise


def uuid_of_int(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` for ``0 <= value < 2**128`` (not checked here)."""
    made = _new(_UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN)
    return made


def uuid_of_bytes(raw: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=raw)`` for 16 bytes (not checked here)."""
    return uuid_of_int(int.from_bytes(raw, "big"))
