"""[eventq] Workflows' records beside the jobs (eventq/core/workflow.py), maps of their
own: ``encode_registration`` ``{"v": 1, "dp", "c", "dl"}`` and ``encode_input``
``{"v": 1, "ok", "x"}`` (``REGISTRATION_FIELDS``, ``INPUT_FIELDS``); and a dependent's
links on their own, as its job map holds them (``encode_links``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from eventq.core.codec.compiled import (
    VERSION_KEY,
    _check_keys,
    _Codec,
    _compiled,
    _guarded,
    _pack,
    _unpack,
)
from eventq.core.codec.kinds import (
    BIN,
    BOOL,
    INT,
    STR,
    UUID_BYTES,
    CodecError,
    Field,
    _read_links,
    _write_links,
)
from eventq.core.codec.rows import DEPENDENT_CREATED, JOB_KEYS
from eventq.core.job import Link
from eventq.core.workflow import Input, Registration

REGISTRATION_FIELDS: tuple[Field, ...] = (
    Field("dp", "dependent", UUID_BYTES),
    DEPENDENT_CREATED,
    Field("dl", "deadline_ms", INT, nil=True),
    Field("sc", "scope", STR, absent=None, note="the dependent's"),
)
INPUT_FIELDS: tuple[Field, ...] = (Field("ok", "completed", BOOL), Field("x", "result", BIN))
WORKFLOW_RECORD_VERSION = 1
_REGISTRATION = _compiled(Registration, REGISTRATION_FIELDS, frozenset({VERSION_KEY}))
_INPUT = _compiled(Input, INPUT_FIELDS, frozenset({VERSION_KEY}))


def encode_registration(registration: Registration) -> bytes:
    """The value of a registration record (eventq/core/workflow.py)."""
    if not isinstance(registration, Registration):
        raise CodecError(f"not a registration: {registration!r:.100}")
    m: dict[str, Any] = {VERSION_KEY: WORKFLOW_RECORD_VERSION}
    _REGISTRATION.write(registration, None, m)
    return _pack(m)


def _decode_side(codec: _Codec, what: str) -> Callable[[object], Any]:
    versions = frozenset({WORKFLOW_RECORD_VERSION})

    def decode(data: object) -> Any:
        m = _unpack(data, versions)
        _check_keys(m, codec.keys, what)
        return codec.read(m, None)

    return decode


_decode_registration = _decode_side(_REGISTRATION, "registration")
_decode_input = _decode_side(_INPUT, "input")


def decode_registration(data: bytes) -> Registration:
    """The registration of a registration record; ``CodecError`` if it is malformed."""
    return _guarded("registration", _decode_registration, data)  # type: ignore[no-any-return]  # _guarded: Any


def encode_input(input_: Input) -> bytes:
    """The value of an input record (eventq/core/workflow.py)."""
    if not isinstance(input_, Input):
        raise CodecError(f"not an input: {input_!r:.100}")
    m: dict[str, Any] = {VERSION_KEY: WORKFLOW_RECORD_VERSION}
    _INPUT.write(input_, None, m)
    return _pack(m)


def decode_input(data: bytes) -> Input:
    """The input of an input record; ``CodecError`` if it is malformed."""
    return _guarded("input", _decode_input, data)  # type: ignore[no-any-return]  # _guarded: Any


def encode_links(links: tuple[Link, ...]) -> bytes:
    """A dependent's links on their own, as its job map holds them (``up``): for
    readers that keep them apart from the job (eventq/spark/rows.py)."""
    return msgpack.packb(_write_links(links), use_bin_type=True)  # type: ignore[no-any-return]  # msgpack is untyped


def _decode_links(data: object) -> tuple[Link, ...]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"links must be bytes, got {type(data).__name__}")
    try:
        value = msgpack.unpackb(data, raw=False, use_list=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CodecError(f"not msgpack links: {exc}") from None
    return _read_links(JOB_KEYS["upstreams"], value)


def decode_links(data: bytes) -> tuple[Link, ...]:
    """The links of ``encode_links``; ``CodecError`` if they are malformed."""
    return _guarded("links", _decode_links, data)  # type: ignore[no-any-return]  # _guarded: Any
