"""The codec's machinery: a table compiled into what writes and reads its maps, the map
helpers those use, and a record's envelope (msgpack, schema version, guarded decode).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, TypeAlias

import msgpack

from eventq.core.codec.kinds import (
    INT,
    Absent,
    CodecError,
    Field,
    Nested,
    Table,
    _missing,
    _Unchecked,
)
from eventq.core.job import Job, make_job

# The keys around the field tables: every record's schema version, and the type of a
# command or event.
VERSION_KEY = "v"
TYPE_KEY = "t"

# ------------------------------------------------------------------- map helpers

_NOT_THERE = object()  # what ``dict.get`` gives for a missing key (nil is None)


def _map(v: object, what: str) -> dict[str, Any]:
    if type(v) is not dict:
        raise CodecError(f"{what} must be a msgpack map, got {type(v).__name__}")
    return v


def _check_keys(m: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    if not m.keys() <= allowed:
        extra = sorted(map(str, m.keys() - allowed))
        raise CodecError(f"unknown field(s) in {what}: {', '.join(extra)}")


def _int(m: dict[str, Any], key: str) -> int:
    try:
        v = m[key]
    except KeyError:
        raise _missing(key) from None
    return INT.read(key, v) if type(v) is not int else v


def _keys(table: Table) -> frozenset[str]:
    return frozenset(f.key for f in table)


Lacking: TypeAlias = Callable[[Field], str]


def _lacking(f: Field) -> str:
    """Why a map without field ``f`` (``Absent.IN_JOB``) cannot be read without a job."""
    return f"a record needs its {f.attr} or the record's job"


def _slow_read(f: Field, lacking: Lacking) -> Callable[[Any, Job | None], Any]:
    """Field ``f``'s value when its msgpack value ``v`` is not simply of the kind's
    ``plain`` type: absent (``_NOT_THERE``), nil, or one that ``read`` checks (and
    converts, or refuses). ``lacking``: the message of an ``Absent.IN_JOB`` field
    missing from a record without a job."""
    key, attr, read, absent, nil = f.key, f.attr, f.kind.read, f.absent, f.nil
    missing_job = lacking(f) if absent is Absent.IN_JOB else ""

    def slow_read(v: Any, job: Job | None) -> Any:  # job: the record's, for an event
        if v is _NOT_THERE:
            if absent is Absent.REQUIRED:
                raise _missing(key)
            if absent is not Absent.IN_JOB:
                return absent
            # Not in a record with a job, nor in one written before the job held it.
            if job is None or getattr(job, attr) is None:
                raise CodecError(missing_job)
            return getattr(job, attr)
        return None if v is None and nil else read(key, v)

    return slow_read


def _inner_map(n: Nested) -> Callable[[Any], dict[str, Any]]:
    key, what, allowed = n.key, n.what, _keys(n.fields)

    def inner_map(v: Any) -> dict[str, Any]:
        if v is _NOT_THERE:
            raise _missing(key)
        inner = _map(v, what)
        _check_keys(inner, allowed, what)
        return inner

    return inner_map


# ------------------------------------------------------------ compiled tables
# Each table is compiled once, when the module loads, into a reader and a writer made as
# Python source (as ``dataclasses`` makes ``__init__``; a function's ``__source__`` shows
# it). A field then costs what a hand-written line did, a dict lookup and a type test: a
# loop over the table's fields cost a call per field, 20% more per record, and the codec
# is on the processor's hot path.

_Read: TypeAlias = Callable[[dict[str, Any], Any], Any]
_Write: TypeAlias = Callable[[Any, Job | None, dict[str, Any]], None]


class _Source:
    """The lines of one generated function, and the objects they name."""

    def __init__(self, name: str, params: str) -> None:
        self.function_name = name
        self.lines = [f"def {name}({params}):"]
        self.names: dict[str, object] = {"_NOT_THERE": _NOT_THERE}
        self.locals = 0

    def name(self, obj: object) -> str:
        """A name the source can use for ``obj``."""
        name = f"_{len(self.names)}"
        self.names[name] = obj
        return name

    def local(self, prefix: str) -> str:
        self.locals += 1
        return f"{prefix}{self.locals}"

    def add(self, *lines: str, indent: int = 1) -> None:
        self.lines += ["    " * indent + line for line in lines]

    def function(self, label: str) -> Callable[..., Any]:
        """The function the lines define (``label`` is its file name in tracebacks)."""
        text = "\n".join(self.lines)
        namespace: dict[str, Any] = dict(self.names)
        exec(compile(text, f"<eventq.core.codec: {label}>", "exec"), namespace)
        function = namespace[self.function_name]
        function.__source__ = text  # for whoever debugs a table
        return function  # type: ignore[no-any-return]  # exec's namespace holds Any


def _plain_name(src: _Source, plain: type) -> str:
    """How the source names a kind's plain type (a builtin by its name: readable)."""
    return plain.__name__ if getattr(builtins, plain.__name__, None) is plain else src.name(plain)


def _read_fields(
    src: _Source, table: Table, m: str, into: list[tuple[str, str]], lacking: Lacking
) -> None:
    """Lines reading ``table``'s fields from map ``m`` in order: the first malformed
    field is the one reported. ``into`` collects (attribute, local variable)."""
    for f in table:
        if isinstance(f, Nested):
            inner = src.local("m")
            src.add(f"{inner} = {src.name(_inner_map(f))}({m}.get({f.key!r}, _NOT_THERE))")
            _read_fields(src, f.fields, inner, into, lacking)
            continue
        value, slow = src.local("a"), f"{src.name(_slow_read(f, lacking))}(v, given)"
        # The common case is one test: a value of the kind's plain type (or nil, when
        # nil is None) is the attribute's value as it is. A kind without a plain type
        # reads every value that is there.
        if f.kind.plain is _Unchecked:
            read = f"{src.name(f.kind.read)}({f.key!r}, v)"
            tests, otherwise = [], f"{read} if v is not _NOT_THERE else {slow}"
        else:
            tests, otherwise = [f"type(v) is {_plain_name(src, f.kind.plain)}"], slow
        tests += ["v is None"] if f.nil else []
        src.add(
            f"v = {m}.get({f.key!r}, _NOT_THERE)",
            f"{value} = " + (f"v if {' or '.join(tests)} else {otherwise}" if tests else otherwise),
        )
        into.append((f.attr, value))


def _reader(
    table: Table, build: Callable[..., Any], given: str | None, label: str, lacking: Lacking
) -> _Read:
    """What builds the object a map holds: ``build`` called with its attributes by name
    (``make_job``: with one mapping of them), the attribute ``given`` (if any) being
    what the reader is given besides the map (an event's job: the record's)."""
    src, values = _Source("read", "m, given"), []  # type: ignore[var-annotated]  # (value, name) pairs
    _read_fields(src, table, "m", values, lacking)
    values += [(given, "given")] if given is not None else []
    if build is make_job:
        arguments = "{" + ", ".join(f"{a!r}: {v}" for a, v in values) + "}"
    else:
        arguments = ", ".join(f"{a}={v}" for a, v in values)
    src.add(f"return {src.name(build)}({arguments})")
    return src.function(label)


def _msgpack_value(src: _Source, f: Field, v: str) -> str:
    """The expression of field ``f``'s msgpack value, its attribute's value being ``v``."""
    if f.kind.write is None:
        return v
    written = f"{src.name(f.kind.write)}({v})"
    return f"None if {v} is None else {written}" if f.nil and f.absent is not None else written


def _write_fields(src: _Source, table: Table, m: str) -> None:
    """Lines writing ``table``'s fields of object ``o`` into map ``m``, in order."""
    for f in table:
        if isinstance(f, Nested):
            inner = src.local("m")
            src.add(f"{m}[{f.key!r}] = {inner} = {{}}")
            _write_fields(src, f.fields, inner)
            continue
        assert f.attr.isidentifier(), f
        store = f"{m}[{f.key!r}] = "
        if f.absent is Absent.REQUIRED:
            src.add(store + _msgpack_value(src, f, f"o.{f.attr}"))
        elif f.absent is Absent.IN_JOB:  # the record's job holds it
            src.add("if job is None:", "    " + store + _msgpack_value(src, f, f"o.{f.attr}"))
        else:  # left out when it is the default: the bytes records had before the field
            literal = type(f.absent) in (int, str, bytes, bool)  # readable in the source
            default = repr(f.absent) if literal else src.name(f.absent)
            src.add(
                f"v = o.{f.attr}",
                "if v is not None:" if f.absent is None else f"if v != {default}:",
                "    " + store + _msgpack_value(src, f, "v"),
            )


def _writer(table: Table, label: str) -> _Write:
    """What writes ``table``'s fields of an object into a map (after what it holds)."""
    src = _Source("write", "o, job, m")
    _write_fields(src, table, "m")
    return src.function(label)


# -------------------------------------------------------------------- record codecs


@dataclass(frozen=True, slots=True)
class _Codec:
    """A record type's table, compiled once: its dataclass, the keys its map may have,
    what writes an object's fields into a map, and what reads a map into an object."""

    cls: type
    keys: frozenset[str]
    write: _Write
    read: _Read


def _attrs(table: Iterable[Field | Nested]) -> set[str]:
    return {a for f in table for a in (_attrs(f.fields) if isinstance(f, Nested) else [f.attr])}


def _compiled(
    cls: type, table: Table, around: frozenset[str], given: str | None = None,
    build: Callable[..., Any] | None = None, lacking: Lacking = _lacking,
) -> _Codec:
    """``around``: the other keys of the map (a record's header and trailer); ``given``:
    the attribute of ``cls`` that the map does not hold, given to the reader;
    ``lacking``: what a record without a job and without an ``Absent.IN_JOB`` field
    lacks (``_slow_read``)."""
    # An attribute without a field, or a field of no attribute: the table is wrong.
    not_in_map = {given} if given is not None else set()
    if _attrs(table) | not_in_map != {f.name for f in dataclass_fields(cls)}:
        raise AssertionError(f"the fields of {cls.__name__} and its table differ")
    return _Codec(
        cls, around | _keys(table), _writer(table, cls.__name__),
        _reader(table, build or cls, given, cls.__name__, lacking),
    )  # fmt: skip


# ------------------------------------------------------------------------ records


def _unpack(data: object, versions: frozenset[int]) -> dict[str, Any]:
    """The map of a record whose schema version is one of ``versions``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"a record must be bytes, got {type(data).__name__}")
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CodecError(f"not a msgpack record: {exc}") from None
    m = _map(obj, "a record")
    v = m.get(VERSION_KEY)
    if type(v) is not int or v not in versions:
        expected = " or ".join(str(x) for x in sorted(versions))
        raise CodecError(f"unsupported schema version {v!r} (expected {expected})")
    return m


def _pack(m: dict[str, Any]) -> bytes:
    return msgpack.packb(m, use_bin_type=True)  # type: ignore[no-any-return]  # msgpack is untyped


def _guarded(what: str, fn: Callable[[Any], Any], data: object) -> Any:
    """Run a decoder; any error but CodecError becomes one (decoders never leak others)."""
    try:
        return fn(data)
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(f"invalid {what}: {exc}") from None

