"""A job's Kafka key, and Kafka's default key partitioner (Java's murmur2), as pure
functions.

Every producer of eventq must put a job id in the same partition: each keys a job's
records with ``job_key``; faust/aiokafka and Spark use ``partition_for_key``;
confluent-kafka must be configured with ``partitioner=murmur2_random`` (its default,
CRC32, disagrees). The gateway uses it to know which partition owns a job; tests prove
all producers agree with it.
"""

from __future__ import annotations

import uuid

MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF

CONFLUENT_PRODUCER_PARTITIONER = "murmur2_random"


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a 32-bit hash, returned as a signed Java int."""
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _MASK32
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def job_key(job_id: uuid.UUID) -> bytes:
    """The Kafka key of a job: its canonical lowercase UUID string (docs/architecture.md)."""
    return str(job_id).encode()


def partition_for_key(key: bytes, partitions: int) -> int:
    """``toPositive(murmur2(key)) % partitions``, exactly as Kafka's producer does."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
