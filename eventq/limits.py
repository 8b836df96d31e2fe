"""Named limits of the workq protocol (docs/protocol.md, "Arguments" and "Connections and
framing").

Units are in the names. These are facts of the wire contract, not settings.
"""

MAX_LINE_BYTES = 10_000  # a request line, not counting its \r\n
MAX_PAYLOAD_BYTES = 1_048_576  # a data block (payload or result): 1 MiB
MAX_NAME_BYTES = 255
MIN_TTR_MS = 1
MAX_TTR_MS = 86_400_000  # 24 hours
MIN_TTL_MS = 1
MAX_TTL_MS = 2**64 - 1  # [eventq] as documented; workq's code capped it at 30 days
MAX_WAIT_TIMEOUT_MS = 86_400_000
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1
MAX_ATTEMPTS_LIMIT = 255  # -max-attempts=0 means unlimited, which is this hard cap
MAX_FAILS_LIMIT = 255
MAX_CURSOR_OFFSET = 2**32 - 1
MIN_LIMIT = 1
MAX_LIMIT = 100
MAX_ADD_FLAGS = 3  # add and schedule take at most 3 flags
MAX_ADD_FLAGS_WITH_BACKOFF = 4  # [eventq] ... or 4 when -backoff is one of them
MAX_BACKOFF_MS = 86_400_000  # [eventq] -backoff, and the cap of any one retry's wait
MAX_RETURNS = 2 * 255  # returns to PENDING: at most one per attempt and one per fail
MAX_RUN_FLAGS = 1  # run takes at most 1 (-priority)
# [eventq] -after on add and schedule (docs/workflows.md, "Values and checks"): 1 to 100
# upstream ids. 100 ids in their longest spelling (urn:uuid:, 45 bytes) make 4,599 bytes.
MIN_AFTER_IDS = 1
MAX_AFTER_IDS = 100
# [eventq] docs/workflows.md, "Values and checks": tags, failure groups, retry, recur.
MIN_TAGS = 1
MAX_TAGS = 16
MAX_TAG_BYTES = 64  # each tag: 1-64 bytes of [A-Za-z0-9_.-]
MAX_GROUP_BYTES = 255  # a failure group: like a name
MAX_RETRY_DELAY_MS = 86_400_000  # `retry -delay=`
MIN_RETRY_COUNT = 1  # `retry-group`'s count
MAX_RETRY_COUNT = 10_000
# retry-group submits its jobs in waves of this many, each wave all in flight at once: each
# command's write deadline (Settings.write_timeout_ms) then measures its own write, not the
# queue of 10,000 before it (a loaded machine retried 6,500 of 10,000 in one wave: the rest
# timed out waiting behind the others and went uncounted, though they were applied).
RETRY_WAVE_JOBS = 1_000
MIN_EVERY_MS = 1_000  # `recur`'s every-ms: 1 s ...
MAX_EVERY_MS = 31_536_000_000  # ... to 365 days

# Times and log positions of the pure core (eventq/core). Times are integer ms since the
# Unix epoch (UTC); offsets are Kafka log offsets.
MIN_TIME_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z, the earliest protocol time
MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the latest protocol time
MAX_DEADLINE_MS = 2**64 - 1  # time + a huge TTL saturates here (msgpack's uint64 max)
MAX_OFFSET = 2**63 - 1  # Kafka offsets are signed 64-bit
MAX_REQUEST_ID = 2**64 - 1  # correlation id carried by a command, unsigned 64-bit
MAX_NODE_BYTES = 255  # name of the node that issued a command (UTF-8)
# [eventq] audit (docs/security.md, "Queue-name prefixes"): the name of the token that
# issued a command (UTF-8)
MAX_ISSUER_BYTES = 255

# --- Record sizes, from the protocol up (docs/architecture.md, "Limits") -----------------
# Every layer is derived from these: the processor's state-record check, every
# producer's max_request_size, consumer fetch sizes, the broker's message.max.bytes and
# each topic's max.message.bytes (and what `eventq serve` demands of existing topics).
KIB = 1024
MIB = 1024 * KIB
MAX_RESULT_BYTES = MAX_PAYLOAD_BYTES  # complete/fail carry a data block like add (spec)
# Everything in a command or state record but its payload and result, encoded: a name
# (<= 255 B), a node (<= 255 B), an id, about twenty integers and their msgpack keys,
# and a dependent's links to up to 100 upstreams (docs/workflows.md, "Values and
# checks"), about 38 B each.
# Measured at 568 B for the largest job without upstreams and 4,303 B for the largest
# dependent; with 16 tags of 64 bytes each (docs/workflows.md, "Tags") 1,503 B and
# 5,365 B (tests/test_limits.py keeps it true, tags included).
MAX_RECORD_FIELDS_BYTES = 16 * KIB
# An import command carries a whole job: a payload and a result.
MAX_COMMAND_RECORD_BYTES = MAX_PAYLOAD_BYTES + MAX_RESULT_BYTES + MAX_RECORD_FIELDS_BYTES
# A state record (`eventq.jobs` value) holds the job (payload and result) once, and its
# last event without copies of either (eventq/core/codec/states.py).
MAX_STATE_RECORD_BYTES = MAX_PAYLOAD_BYTES + MAX_RESULT_BYTES + MAX_RECORD_FIELDS_BYTES
# A Kafka record batch around one record: batch header (61 B), record header, key
# (a 36-byte job id), headers. Generous on purpose.
KAFKA_RECORD_OVERHEAD_BYTES = 16 * KIB
# What a topic of eventq must accept, at the least: its largest record in a batch of one.
MIN_TOPIC_MESSAGE_BYTES = (
    max(MAX_COMMAND_RECORD_BYTES, MAX_STATE_RECORD_BYTES) + KAFKA_RECORD_OVERHEAD_BYTES
)
# What eventq configures on its own broker, topics, producers (max_request_size) and
# consumers (per-partition fetch size): the minimum with room for batch records.
KAFKA_MESSAGE_BYTES = 4 * MIB
assert KAFKA_MESSAGE_BYTES >= MIN_TOPIC_MESSAGE_BYTES
