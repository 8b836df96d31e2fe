"""eventq's murmur2 (eventq/core/partitioner.py: whole words unpacked at once, recent
keys' hashes kept) is Kafka's ``Utils.murmur2``: equal to a byte-by-byte transcription of
the Java code for any bytes, and to Kafka's own test vectors. (That every producer
agrees with it on a real broker is tests/kafka/test_partitioning.py.)"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eventq.core.partitioner import MURMUR2_SEED, murmur2, partition_for_key

# Kafka's UtilsTest.testMurmur2.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def java_murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` as written in Java, byte by byte, in 32-bit ints."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (MURMUR2_SEED ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        i4 = i * 4
        k = (data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) \
            + ((data[i4 + 2] & 0xFF) << 16) + ((data[i4 + 3] & 0xFF) << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    base = length & ~3
    if rest == 3:
        h ^= (data[base + 2] & 0xFF) << 16
    if rest >= 2:
        h ^= (data[base + 1] & 0xFF) << 8
    if rest >= 1:
        h ^= data[base] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def test_kafka_vectors():
    for data, expected in KAFKA_VECTORS.items():
        assert java_murmur2(data) == expected
        assert murmur2(data) == expected


@given(st.binary(max_size=200))
def test_equals_the_byte_by_byte_transcription(data):
    assert murmur2(data) == java_murmur2(data)


@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(1, 64))
def test_partition_is_the_same_when_the_key_was_seen_before(keys, partitions):
    # Each key twice: the second answer comes from the recent keys' hashes.
    for key in keys + keys:
        assert partition_for_key(key, partitions) == (java_murmur2(key) & 0x7FFFFFFF) % partitions
