"""Reading and writing workq's command-log files (docs/migrate.md, "The command-log
files").

Pure: files and bytes only. Modules, one concept each:

* ``varint``   - LEB128 and zig-zag varints
* ``timefmt``  - the 15-byte time format
* ``records``  - one record (time, size, payload, CRC-32C) and ``CorruptRecord``
* ``commands`` - the payload codec for workq's 8 command types
* ``segments`` - directories of segment files: listing, reading with a corruption
  policy, ``SegmentWriter``
* ``replay``   - what the commands mean when replayed in order (a pure fold)
* ``export``   - writing live jobs as a log that replays to them
"""

from .commands import (
    CMD_ADD,
    CMD_COMPLETE,
    CMD_DELETE,
    CMD_EXPIRE,
    CMD_FAIL,
    CMD_SCHEDULE,
    CMD_START_ATTEMPT,
    CMD_TIMEOUT_ATTEMPT,
    COMMAND_NAMES,
    Command,
    PayloadError,
    WqAdd,
    WqComplete,
    WqDelete,
    WqExpire,
    WqFail,
    WqSchedule,
    WqStartAttempt,
    WqTimeoutAttempt,
    decode_payload,
    encode_payload,
)
from .export import ExportReport, job_commands, write_jobs
from .records import (
    BAD_HEADER,
    BAD_PAYLOAD,
    BAD_SIZE,
    BAD_TIME,
    CRC_MISMATCH,
    DEFAULT_MAX_PAYLOAD_BYTES,
    TORN_TAIL,
    CorruptRecord,
    Record,
    encode_record,
    iter_records,
    read_record,
)
from .replay import (
    Replayer,
    ReplaySummary,
    WorkqJob,
    WorkqState,
    dry_run,
    replay,
    replay_with_summary,
)
from .segments import (
    DEFAULT_MAX_SEGMENT_BYTES,
    HEADER,
    SegmentWriter,
    check_header,
    iter_commands,
    iter_segment_records,
    list_segments,
    segment_name,
)
from .timefmt import (
    GO_ZERO_TIME_NS,
    ZERO_TIME,
    TimeFormatError,
    decode_instant_ns,
    decode_time_ns,
    encode_time_ns,
    encode_time_parts,
)
from .varint import (
    TruncatedVarint,
    VarintError,
    VarintOverflow,
    decode_uvarint,
    decode_varint,
    encode_uvarint,
    encode_varint,
    zigzag_decode,
    zigzag_encode,
)

# The public names, spelled out so that linters and type-checkers see the re-exports.
__all__ = [
    "BAD_HEADER",
    "BAD_PAYLOAD",
    "BAD_SIZE",
    "BAD_TIME",
    "CMD_ADD",
    "CMD_COMPLETE",
    "CMD_DELETE",
    "CMD_EXPIRE",
    "CMD_FAIL",
    "CMD_SCHEDULE",
    "CMD_START_ATTEMPT",
    "CMD_TIMEOUT_ATTEMPT",
    "COMMAND_NAMES",
    "CRC_MISMATCH",
    "Command",
    "CorruptRecord",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "DEFAULT_MAX_SEGMENT_BYTES",
    "ExportReport",
    "GO_ZERO_TIME_NS",
    "HEADER",
    "PayloadError",
    "Record",
    "ReplaySummary",
    "Replayer",
    "SegmentWriter",
    "TORN_TAIL",
    "TimeFormatError",
    "TruncatedVarint",
    "VarintError",
    "VarintOverflow",
    "WorkqJob",
    "WorkqState",
    "WqAdd",
    "WqComplete",
    "WqDelete",
    "WqExpire",
    "WqFail",
    "WqSchedule",
    "WqStartAttempt",
    "WqTimeoutAttempt",
    "ZERO_TIME",
    "check_header",
    "decode_instant_ns",
    "decode_payload",
    "decode_time_ns",
    "decode_uvarint",
    "decode_varint",
    "dry_run",
    "encode_payload",
    "encode_record",
    "encode_time_ns",
    "encode_time_parts",
    "encode_uvarint",
    "encode_varint",
    "iter_commands",
    "iter_records",
    "iter_segment_records",
    "job_commands",
    "list_segments",
    "read_record",
    "replay",
    "replay_with_summary",
    "segment_name",
    "write_jobs",
    "zigzag_decode",
    "zigzag_encode",
]
