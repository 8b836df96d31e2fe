"""Arrow record batches of the row functions Spark runs with ``mapInArrow``: pure, no
Spark, no I/O (pyarrow is imported when a batch is built, on the executor).

A row function's output is declared once, as the Spark DDL that ``mapInArrow`` takes
(``"key binary, value binary, partition int"``), and its Arrow schema is read from that
DDL, so the two never disagree. Arrow keeps nullable 64-bit integers exact, where pandas
would turn them into floats.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# Between a DDL's columns: a comma outside parentheses (``decimal(20,0)`` is one type).
_COLUMN_SEPARATOR = re.compile(r",\s*(?![^()]*\))")


def ddl_columns(ddl: str) -> tuple[tuple[str, str], ...]:
    """(name, Spark type) of each column of ``ddl``, in order."""
    columns = []
    for part in _COLUMN_SEPARATOR.split(ddl):
        name, kind = part.strip().split(" ", 1)
        columns.append((name, kind.strip()))
    return tuple(columns)


def arrow_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of the Spark DDL ``ddl`` (the types the row functions write)."""
    import pyarrow as pa

    kinds = {
        "string": pa.string(), "binary": pa.binary(), "bigint": pa.int64(), "int": pa.int32(),
        "boolean": pa.bool_(), "decimal(20,0)": pa.decimal128(20, 0),
        "array<string>": pa.list_(pa.string()),
    }  # fmt: skip
    return pa.schema([pa.field(name, kinds[kind]) for name, kind in ddl_columns(ddl)])


def record_batch(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """``rows`` as one record batch of ``schema`` (a column a row lacks: null)."""
    import pyarrow as pa

    columns = {field.name: [row.get(field.name) for row in rows] for field in schema}
    return pa.RecordBatch.from_pydict(columns, schema=schema)
