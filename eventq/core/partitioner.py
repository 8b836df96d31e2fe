"""A job's Kafka key, and Kafka's default key partitioner (Java's murmur2), as pure
functions.

Every producer of eventq must put a job id in the same partition: each keys a job's
records with ``job_key``; faust/aiokafka and Spark use ``partition_for_key``;
confluent-kafka must be configured with ``partitioner=murmur2_random`` (its default,
CRC32, disagrees). The gateway uses it to know which partition owns a job; tests prove
all producers agree with it.
"""

from __future__ import annotations

import functools
import struct
import uuid

MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF

CONFLUENT_PRODUCER_PARTITIONER = "murmur2_random"


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a 32-bit hash, returned as a signed Java int.

    The whole 4-byte words are unpacked at once (one ``struct`` call per key, its
    ``Struct`` kept per word count) instead of a slice and an ``int.from_bytes`` each:
    the gateway hashes every job id it writes (tests/core/test_partitioner.py
    proves it equal to a byte-by-byte transcription of Java's)."""
    length = len(data)
    words = length >> 2
    m = _M
    h = (MURMUR2_SEED ^ length) & _MASK32
    for k in _words(words).unpack_from(data):
        k = (k * m) & _MASK32
        k ^= k >> 24
        h = ((h * m) ^ ((k * m) & _MASK32)) & _MASK32
    whole = words << 2
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=64)
def _words(count: int) -> struct.Struct:
    """The little-endian unsigned 32-bit words of a key of ``count`` whole words (one
    per key length: job keys are all 36 bytes)."""
    return struct.Struct(f"<{count}I")


def job_key(job_id: uuid.UUID) -> bytes:
    """The Kafka key of a job: its canonical lowercase UUID string (docs/architecture.md,
    "The topics")."""
    return str(job_id).encode()


RECENT_KEYS = 4096  # hashes of this many recently seen keys are kept (about 1 MB)


@functools.lru_cache(maxsize=RECENT_KEYS)
def _recent_murmur2(key: bytes) -> int:
    """A job's key is hashed several times on its way (the gateway's write, the table's
    reads, the processor's): each after the first is a dictionary lookup."""
    return murmur2(key)


def partition_for_key(key: bytes, partitions: int) -> int:
    """``toPositive(murmur2(key)) % partitions``, exactly as Kafka's producer does."""
    return (_recent_murmur2(key) & 0x7FFFFFFF) % partitions
