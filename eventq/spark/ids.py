"""Deterministic job ids for bulk enqueue (pure; runs on Spark executors).

A job id derived from a row's key columns is the same on every run, so re-running an
enqueue writes the same ids again and the processor refuses them as duplicates instead
of creating second jobs.

    id = first 16 bytes of SHA-256(namespace.bytes || msgpack([name, [v1, v2, ...]]))
         with the version nibble set to 4 and the RFC 4122 variant bits (10xx)

so every derived id is a valid version-4 UUID, as the protocol requires of add and
schedule. ``v1, v2, ...`` are the key column values as strings, exactly as Spark's
``CAST(column AS STRING)`` writes them (``None`` for null): the same data read from
parquet (ints) or CSV (text) gives the same ids. The queue name is part of the input,
so the same key enqueued into two queues makes two jobs. msgpack's length prefixes make
the encoding unambiguous (``["a,b", "c"]`` and ``["a", "b,c"]`` differ).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable

import msgpack

# The default namespace of derived ids (a fixed random UUID; changing it changes every
# derived id, so it never changes).
DEFAULT_NAMESPACE = uuid.UUID("79dbf41f-806e-441c-84f8-8591331e9bb9")


def namespace_uuid(namespace: uuid.UUID | str | None) -> uuid.UUID:
    """A namespace given as a UUID, a UUID string, or any other text (hashed to one)."""
    if namespace is None:
        return DEFAULT_NAMESPACE
    if isinstance(namespace, uuid.UUID):
        return namespace
    try:
        return uuid.UUID(namespace)
    except ValueError:
        return derive_job_id(DEFAULT_NAMESPACE, "namespace", [namespace])


def canonical_key(name: str, values: Iterable[str | None]) -> bytes:
    """The canonical bytes of (queue name, key values) that a derived id hashes."""
    items = list(values)
    for value in items:
        if value is not None and type(value) is not str:
            raise TypeError(
                f"key values are strings (Spark's CAST(... AS STRING)) or None, "
                f"not {type(value).__name__}"
            )
    return msgpack.packb([name, items], use_bin_type=True)  # type: ignore[no-any-return]  # msgpack is untyped


def as_version4(digest: bytes) -> uuid.UUID:
    """The first 16 bytes of ``digest`` as a version-4, RFC 4122 variant UUID."""
    raw = bytearray(digest[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # variant 10xx (RFC 4122)
    return uuid.UUID(bytes=bytes(raw))


def derive_job_id(namespace: uuid.UUID, name: str, values: Iterable[str | None]) -> uuid.UUID:
    """The job id of a row of queue ``name`` whose key column values are ``values``."""
    return as_version4(hashlib.sha256(namespace.bytes + canonical_key(name, values)).digest())
