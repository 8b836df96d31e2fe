"""msgpack codecs for the two topics.

Command record (``eventq.commands`` value): a msgpack map with short keys, ``v`` the
schema version (1), ``t`` the command type (``CommandType``), then the command's fields,
then the issuer's optional correlation fields ``o`` and ``q`` and [eventq] its audit
field ``by``, the name of the token that issued it, never the token (docs/security.md,
"Queue-name prefixes").
A job's command names the job by ``i``; a queue's (pause, resume) has the queue's name
``n`` and no ``i``.

State record (``eventq.jobs`` value): ``{"v": 2, "e": event, "j": job or nil}``. Its
offsets (the event's ``o``, the job's ``ver``) are positions (eventq/core/batch.py);
a version 1 record, written when a record held one command, counted them in record
offsets and is read as position ``offset * POSITIONS_PER_OFFSET``. The event map has
``t`` (``EventType``) and the event's fields. A state record must fit a payload and a
result of 1 MiB each once (eventq/limits.py), so each is stored once, in the job: the
job of Added and Imported is the record's job, and the result of Completed and Failed
is the job's (``x`` only in a record without a job). ``encode_job`` writes a job on its
own: ``{"v": 2, "j": job}``.

[eventq] Workflows' records beside the jobs (eventq/core/workflow.py) are maps of their
own: ``encode_registration`` ``{"v": 1, "dp", "c", "dl"}`` and ``encode_input``
``{"v": 1, "ok", "x"}`` (``REGISTRATION_FIELDS``, ``INPUT_FIELDS``).

The fields of every map are data, in the order they are written: ``COMMAND_FIELDS``
(then ``CORRELATION_FIELDS``), ``EVENT_FIELDS`` (after ``EVENT_COMMON_FIELDS``),
``JOB_FIELDS`` and ``SNAPSHOT_FIELDS`` (an import's job) give each field's key, the
attribute it holds, its kind, and what its absence means. The encoders, the decoders,
the keys each map allows and the tables below are all derived from them: a new field
is one row (and its dataclass attribute; the module does not load if either is missing).

Decoding never raises anything but ``CodecError`` (a ``ValueError``): not msgpack, a
wrong schema version, a missing, unknown or mistyped field, an out-of-range value, or a
record that is inconsistent (a job whose id or version differs from its event).

The package, by what it encodes: ``commands`` (command records), ``states`` (state and
job records: events and jobs), ``recurrences`` (a recurrence's record), ``workflow``
(registrations, inputs, links); what they share: ``kinds`` (how a value is held),
``rows`` (the job map and the rows of several tables, a job's options among them,
eventq/core/fields.py), ``compiled`` (a table made reader and writer, a record's
envelope) and ``doc`` (the tables below).
"""

from __future__ import annotations

from eventq.core.codec.commands import (
    COMMAND_FIELDS,
    CORRELATION_FIELDS,
    SCHEMA_VERSION,
    DecodedCommand,
    correlation_of,
    decode_command,
    encode_command,
)
from eventq.core.codec.compiled import TYPE_KEY, VERSION_KEY, _compiled
from eventq.core.codec.doc import tables_text
from eventq.core.codec.kinds import (
    BIN,
    BOOL,
    INT,
    ISSUER,
    LINKS,
    NODE,
    NOTICE_OUTCOME,
    REQUEST_ID,
    STATE,
    STR,
    TAGS,
    UUID_BYTES,
    UUIDS,
    WAITING_STATE,
    Absent,
    CodecError,
    Field,
    Kind,
    Nested,
    Table,
)
from eventq.core.codec.recurrences import (
    DEFINITION_FIELDS,
    DEFINITION_KEY,
    RECURRENCE_FIELDS,
    RECURRENCE_RECORD_VERSION,
    decode_recurrence,
    encode_recurrence,
)
from eventq.core.codec.rows import JOB_FIELDS, JOB_KEYS, SNAPSHOT_FIELDS
from eventq.core.codec.states import (
    EVENT_COMMON_FIELDS,
    EVENT_FIELDS,
    EVENT_KEY,
    EVENT_KEYS,
    JOB_KEY,
    JOB_OF_THE_RECORD,
    POSITIONS_PER_OFFSET,
    STATE_SCHEMA_VERSION,
    decode_job,
    decode_state,
    encode_job,
    encode_state,
)
from eventq.core.codec.workflow import (
    INPUT_FIELDS,
    REGISTRATION_FIELDS,
    WORKFLOW_RECORD_VERSION,
    decode_input,
    decode_links,
    decode_registration,
    encode_input,
    encode_links,
    encode_registration,
)

__all__ = [
    "BIN", "BOOL", "COMMAND_FIELDS", "CORRELATION_FIELDS", "DEFINITION_FIELDS",
    "DEFINITION_KEY", "EVENT_COMMON_FIELDS", "EVENT_FIELDS", "EVENT_KEY", "EVENT_KEYS",
    "INPUT_FIELDS", "INT", "ISSUER", "JOB_FIELDS", "JOB_KEY", "JOB_KEYS",
    "JOB_OF_THE_RECORD", "LINKS", "NODE", "NOTICE_OUTCOME", "POSITIONS_PER_OFFSET",
    "RECURRENCE_FIELDS", "RECURRENCE_RECORD_VERSION", "REGISTRATION_FIELDS", "REQUEST_ID",
    "SCHEMA_VERSION", "SNAPSHOT_FIELDS", "STATE", "STATE_SCHEMA_VERSION", "STR", "TAGS",
    "TYPE_KEY", "UUIDS", "UUID_BYTES", "VERSION_KEY", "WAITING_STATE",
    "WORKFLOW_RECORD_VERSION", "Absent", "CodecError", "DecodedCommand", "Field", "Kind",
    "Nested", "Table", "correlation_of", "decode_command", "decode_input", "decode_job",
    "decode_links", "decode_recurrence", "decode_registration", "decode_state",
    "encode_command", "encode_input", "encode_job", "encode_links", "encode_recurrence",
    "encode_registration", "encode_state", "_compiled",
]  # fmt: skip

if __doc__ is not None:  # None under python -OO
    __doc__ += "\n" + tables_text() + "\n"
