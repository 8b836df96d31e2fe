"""The codec's field tables as text, for its docstring (``help(eventq.core.codec)``):
made of the tables themselves, so the two cannot disagree.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from eventq.core.codec.commands import COMMAND_FIELDS, CORRELATION_FIELDS, SCHEMA_VERSION
from eventq.core.codec.kinds import INT, Absent, Field, Kind, Nested, Table
from eventq.core.codec.rows import JOB_FIELDS, SNAPSHOT_FIELDS
from eventq.core.codec.states import EVENT_COMMON_FIELDS, EVENT_FIELDS, JOB_OF_THE_RECORD
from eventq.core.events import EVENT_CLASSES

_TABLE_WIDTH = 88


def _describe(f: Field | Nested) -> str:
    """A field as the docstring's tables show it: attribute (kind), and its absence."""
    if isinstance(f, Nested):
        return f"{f.what} (map, below)"
    text = f"{f.attr} ({f.kind.name})" + (f", {f.note}" if f.note else "")
    if f.absent is Absent.IN_JOB:
        return text + ", only in a record without a job (absent: the job's)"
    if f.absent is Absent.REQUIRED:
        return text + (", nil for None" if f.nil else "")
    return text + f", optional (absent{' or nil' if f.nil else ''}: {f.absent!r})"


def _type_name(t: Enum) -> str:
    return t.name.lower().replace("_", "-")


def _where(present: list[str], every: list[str]) -> str:
    """Which record types have a row: the short way of saying it."""
    missing = [name for name in every if name not in present]
    if not missing:
        return "all"
    return f"all but {', '.join(missing)}" if len(missing) < len(present) else ", ".join(present)


def _rows(tables: Mapping[Any, Table], head: Table, tail: Table) -> list[tuple[str, str, str]]:
    """(key, field, where) of the fields of every table, ``head`` and ``tail`` those of
    all: in the order they are first written, a field written alike by several record
    types in one row."""
    every = [_type_name(t) for t in tables]
    seen: dict[tuple[str, str], list[str]] = {}
    for part in (lambda table: head, lambda table: table, lambda table: tail):
        for t, table in tables.items():
            for f in part(table):
                seen.setdefault((f.key, _describe(f)), []).append(_type_name(t))
    return [(key, text, _where(present, every)) for (key, text), present in seen.items()]


def _text_table(heads: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """An RST simple table; the last two columns wrap (their lines continue the row)."""
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    room = _TABLE_WIDTH - sum(widths[:-2]) - 2 * (len(heads) - 1)
    if len(heads) > 1:
        widths[-2] = min(widths[-2], room * 3 // 5)
    widths[-1] = min(widths[-1], _TABLE_WIDTH - sum(widths[:-1]) - 2 * (len(heads) - 1))
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip(), rule]
    for row in rows:
        cells = [textwrap.wrap(c, w) or [""] for c, w in zip(row, widths)]
        for n in range(max(map(len, cells))):
            parts = [c[n] if n < len(c) else "" for c in cells]
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths)).rstrip())
    return "\n".join([*lines, rule])


def tables_text() -> str:
    """The docstring's tables of every record's fields, made of the field tables."""
    version = Field("v", "schema version", Kind(str(SCHEMA_VERSION), INT.read))
    command_type = Field("t", "type", Kind("CommandType", INT.read))
    event_type = Field("t", "type", Kind("EventType", INT.read))
    left_out = [f.key for f in JOB_FIELDS if f not in SNAPSHOT_FIELDS]
    commands = _rows(COMMAND_FIELDS, (version, command_type), CORRELATION_FIELDS)
    events = _rows(EVENT_FIELDS, (event_type,) + EVENT_COMMON_FIELDS, ())
    jobs = [(f.key, _describe(f)) for f in JOB_FIELDS]
    job_events = " and ".join(EVENT_CLASSES[t].__name__ for t in sorted(JOB_OF_THE_RECORD))
    return "\n\n".join([
        "Command record fields (``COMMAND_FIELDS``, ``CORRELATION_FIELDS``):",
        _text_table(("key", "field", "in"), commands),
        textwrap.fill(
            "Event map fields (``EVENT_COMMON_FIELDS``, ``EVENT_FIELDS``); the event's "
            f"job, of {job_events}, is the record's job:", _TABLE_WIDTH,
        ),
        _text_table(("key", "field", "in"), events),
        textwrap.fill(
            "Job map fields (``JOB_FIELDS``); an import's snapshot (``SNAPSHOT_FIELDS``) "
            f"is the job map without {' and '.join(f'``{k}``' for k in left_out)}:",
            _TABLE_WIDTH,
        ),
        _text_table(("key", "field"), jobs),
    ])  # fmt: skip
