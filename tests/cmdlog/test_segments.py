from __future__ import annotations

import os
import uuid

import pytest

from eventq.cmdlog import (
    BAD_HEADER,
    BAD_PAYLOAD,
    BAD_TIME,
    CRC_MISMATCH,
    HEADER,
    TORN_TAIL,
    CorruptRecord,
    SegmentWriter,
    WqComplete,
    WqDelete,
    check_header,
    encode_payload,
    encode_record,
    iter_commands,
    iter_segment_records,
    list_segments,
    segment_name,
)
from support.cmdlog_strategies import add

T0 = 1_700_000_000 * 10**9


def write_segment(path, cmds, *, t0=T0, header=HEADER):
    """Write a segment file by hand; return the file offset of each record."""
    offsets = []
    data = bytearray(header)
    for i, cmd in enumerate(cmds):
        offsets.append(len(data))
        payload = cmd if isinstance(cmd, bytes) else encode_payload(cmd)
        data += encode_record(t0 + i, payload)
    with open(path, "wb") as f:
        f.write(data)
    return offsets


def cmds(n, tag=0):
    return [WqDelete(uuid.UUID(int=tag * 1000 + i)) for i in range(n)]


def collect(dirpath, **kw):
    reports = []
    if kw.get("on_corrupt") == "skip":
        kw["report"] = reports.append
    out = [(os.path.basename(p), off, c) for p, off, _t, c in iter_commands(dirpath, **kw)]
    return out, reports


# --- listing -----------------------------------------------------------------


def test_list_segments_numeric_order_gaps_and_ignored_names(tmp_path):
    for name in [
        "000000010.log",
        "000000002.log",
        "000000007.log",
        "000000002.log.rw",  # unfinished cleaner rewrite
        "000000011.log.rw",
        "00000001.log",  # 8 digits
        "0000000001.log",  # 10 digits
        "000000003.LOG",
        "00000000a.log",
        "read.lock",
        "append.lock",
        "notes.txt",
    ]:
        (tmp_path / name).write_bytes(HEADER)
    (tmp_path / "000000004.log").mkdir()  # not a file
    assert list_segments(tmp_path) == [
        (2, str(tmp_path / "000000002.log")),
        (7, str(tmp_path / "000000007.log")),
        (10, str(tmp_path / "000000010.log")),
    ]


def test_list_segments_empty_dir(tmp_path):
    assert list_segments(tmp_path) == []
    assert list(iter_commands(tmp_path)) == []


def test_segment_name():
    assert segment_name(1) == "000000001.log"
    assert segment_name(999_999_999) == "999999999.log"
    with pytest.raises(ValueError):
        segment_name(1_000_000_000)


# --- reading good directories -------------------------------------------------


def test_directory_with_gaps_and_rw_file_reads_in_order(tmp_path):
    o3 = write_segment(tmp_path / "000000003.log", cmds(2, 3))
    o12 = write_segment(tmp_path / "000000012.log", cmds(3, 12))
    o1 = write_segment(tmp_path / "000000001.log", cmds(1, 1))
    (tmp_path / "000000003.log.rw").write_bytes(b"garbage, not even a header")
    (tmp_path / "000000013.log.rw").write_bytes(HEADER + b"\x01garbage")
    out, _ = collect(tmp_path)
    assert out == (
        [("000000001.log", o1[0], cmds(1, 1)[0])]
        + [("000000003.log", o, c) for o, c in zip(o3, cmds(2, 3))]
        + [("000000012.log", o, c) for o, c in zip(o12, cmds(3, 12))]
    )
    assert o3 == [8, 8 + 37]  # header, then 15 + 1 + 17 + 4 bytes per delete record


def test_yields_full_path_and_record_time(tmp_path):
    write_segment(tmp_path / "000000001.log", cmds(2), t0=T0)
    got = list(iter_commands(str(tmp_path)))
    assert [(p, off, t) for p, off, t, _ in got] == [
        (os.path.join(str(tmp_path), "000000001.log"), 8, T0),
        (os.path.join(str(tmp_path), "000000001.log"), 45, T0 + 1),
    ]


def test_header_only_file_is_empty_and_clean(tmp_path):
    (tmp_path / "000000001.log").write_bytes(HEADER)
    write_segment(tmp_path / "000000002.log", cmds(1))
    out, reports = collect(tmp_path, on_corrupt="skip")
    assert [c for _, _, c in out] == cmds(1) and reports == []
    assert list(iter_segment_records(tmp_path / "000000001.log")) == []


def test_iter_segment_records_gives_raw_payloads(tmp_path):
    offs = write_segment(tmp_path / "000000001.log", cmds(2))
    got = list(iter_segment_records(tmp_path / "000000001.log"))
    assert got == [(offs[i], T0 + i, encode_payload(c)) for i, c in enumerate(cmds(2))]


# --- header ------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        bytes.fromhex("7771777100000002"),  # version 2
        bytes.fromhex("0000000000000000"),
        b"wqwq\x01\x00\x00\x00",  # little-endian version
    ],
)
def test_bad_header_stop(tmp_path, header):
    write_segment(tmp_path / "000000001.log", cmds(1), header=header)
    with pytest.raises(CorruptRecord) as ei:
        list(iter_commands(tmp_path))
    e = ei.value
    assert (e.path, e.offset, e.kind) == (str(tmp_path / "000000001.log"), 0, BAD_HEADER)


def test_bad_header_skip_reports_and_continues_with_next_file(tmp_path):
    write_segment(tmp_path / "000000001.log", cmds(2, 1), header=b"WQWQ\x00\x00\x00\x01")
    o2 = write_segment(tmp_path / "000000002.log", cmds(2, 2))
    out, reports = collect(tmp_path, on_corrupt="skip")
    assert out == [("000000002.log", o, c) for o, c in zip(o2, cmds(2, 2))]
    assert [(os.path.basename(r.path), r.offset, r.kind) for r in reports] == [
        ("000000001.log", 0, BAD_HEADER)
    ]


@pytest.mark.parametrize("content", [b"", b"wqw", HEADER[:7]])
def test_file_shorter_than_header_is_bad_header(tmp_path, content):
    (tmp_path / "000000001.log").write_bytes(content)
    with pytest.raises(CorruptRecord) as ei:
        list(iter_commands(tmp_path))
    assert (ei.value.offset, ei.value.kind) == (0, BAD_HEADER)


def test_check_header():
    check_header(HEADER + b"anything")
    with pytest.raises(CorruptRecord, match="expected 7771777100000001"):
        check_header(b"wqwq\x00\x00\x00\x00", "f")


# --- torn tail ---------------------------------------------------------------


def test_torn_tail_stop_reports_exact_file_and_offset(tmp_path):
    o1 = write_segment(tmp_path / "000000001.log", cmds(3, 1))
    path2 = tmp_path / "000000002.log"
    o2 = write_segment(path2, cmds(3, 2))
    data = path2.read_bytes()
    path2.write_bytes(data[: o2[2] + 20])  # cut in the middle of the last record
    got = []
    with pytest.raises(CorruptRecord) as ei:
        for p, off, _t, c in iter_commands(tmp_path):
            got.append((os.path.basename(p), off, c))
    e = ei.value
    assert (e.path, e.offset, e.kind, e.resume_offset) == (str(path2), o2[2], TORN_TAIL, None)
    assert got == [("000000001.log", o, c) for o, c in zip(o1, cmds(3, 1))] + [
        ("000000002.log", o, c) for o, c in zip(o2[:2], cmds(3, 2)[:2])
    ]


def test_torn_tail_skip_skips_rest_of_that_file_only(tmp_path):
    path1 = tmp_path / "000000001.log"
    o1 = write_segment(path1, cmds(3, 1))
    path1.write_bytes(path1.read_bytes()[: o1[1] + 3])  # cut inside the 2nd record
    o5 = write_segment(tmp_path / "000000005.log", cmds(2, 5))
    out, reports = collect(tmp_path, on_corrupt="skip")
    assert out == [("000000001.log", o1[0], cmds(3, 1)[0])] + [
        ("000000005.log", o, c) for o, c in zip(o5, cmds(2, 5))
    ]
    assert [(r.path, r.offset, r.kind) for r in reports] == [(str(path1), o1[1], TORN_TAIL)]


# --- flipped bit -------------------------------------------------------------


def flip_bit_in_record(path, record_offset, delta=20, bit=3):
    raw = bytearray(path.read_bytes())
    raw[record_offset + delta] ^= 1 << bit  # inside the payload (past time and size)
    path.write_bytes(bytes(raw))


def test_flipped_bit_middle_record_stop(tmp_path):
    path = tmp_path / "000000001.log"
    offs = write_segment(path, cmds(5))
    flip_bit_in_record(path, offs[2])
    got = []
    with pytest.raises(CorruptRecord) as ei:
        for _p, off, _t, c in iter_commands(tmp_path, on_corrupt="stop"):
            got.append((off, c))
    e = ei.value
    assert (e.path, e.offset, e.kind, e.resume_offset) == (str(path), offs[2], CRC_MISMATCH, offs[3])
    assert got == list(zip(offs[:2], cmds(5)[:2]))


def test_flipped_bit_middle_record_skip_continues_at_next_record(tmp_path):
    path = tmp_path / "000000001.log"
    offs = write_segment(path, cmds(5))
    flip_bit_in_record(path, offs[2])
    o2 = write_segment(tmp_path / "000000002.log", cmds(1, 2))
    out, reports = collect(tmp_path, on_corrupt="skip")
    want = [c for i, c in enumerate(cmds(5)) if i != 2]
    assert out == [("000000001.log", o, c) for o, c in zip(offs[:2] + offs[3:], want)] + [
        ("000000002.log", o2[0], cmds(1, 2)[0])
    ]
    assert [(r.path, r.offset, r.kind) for r in reports] == [(str(path), offs[2], CRC_MISMATCH)]


def test_two_bad_records_both_reported(tmp_path):
    path = tmp_path / "000000001.log"
    offs = write_segment(path, cmds(6))
    flip_bit_in_record(path, offs[1])
    flip_bit_in_record(path, offs[4], delta=35)  # in the CRC
    out, reports = collect(tmp_path, on_corrupt="skip")
    assert [c for _, _, c in out] == [c for i, c in enumerate(cmds(6)) if i not in (1, 4)]
    assert [(r.offset, r.kind) for r in reports] == [(offs[1], CRC_MISMATCH), (offs[4], CRC_MISMATCH)]


def test_crc_valid_but_undecodable_payload_is_bad_payload(tmp_path):
    path = tmp_path / "000000001.log"
    good = cmds(2)
    offs = write_segment(path, [good[0], b"\x09" + bytes(16), encode_payload(good[1]) + b"!", good[1]])
    with pytest.raises(CorruptRecord) as ei:
        list(iter_commands(tmp_path))
    assert (ei.value.offset, ei.value.kind) == (offs[1], BAD_PAYLOAD)
    assert "unknown command type 9" in ei.value.reason
    out, reports = collect(tmp_path, on_corrupt="skip")
    assert [(off, c) for _, off, c in out] == [(offs[0], good[0]), (offs[3], good[1])]
    assert [(r.offset, r.kind) for r in reports] == [(offs[1], BAD_PAYLOAD), (offs[2], BAD_PAYLOAD)]
    assert "left over" in reports[1].reason


def test_zero_filled_tail_is_one_report_and_skips_rest_of_file(tmp_path):
    path = tmp_path / "000000001.log"
    offs = write_segment(path, cmds(2))
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00" * 4096)
    out, reports = collect(tmp_path, on_corrupt="skip")
    assert [c for _, _, c in out] == cmds(2)
    assert [(r.offset, r.kind) for r in reports] == [(size, BAD_TIME)]
    assert offs  # written


def test_policy_arguments_checked(tmp_path):
    with pytest.raises(ValueError, match="report"):
        list(iter_commands(tmp_path, on_corrupt="skip"))
    with pytest.raises(ValueError, match="on_corrupt"):
        list(iter_commands(tmp_path, on_corrupt="ignore"))


# --- writer ------------------------------------------------------------------


def test_writer_round_trip(tmp_path):
    jobs = [add(uuid.UUID(int=i)) for i in range(10)]
    d = tmp_path / "log"
    with SegmentWriter(d) as w:
        for i, c in enumerate(jobs):
            path, off = w.append_command(c, T0 + i)
        w.append_command(WqComplete(jobs[0].id, b"ok"), T0 + 99)
    assert w.paths == [str(d / "000000001.log")]
    assert (d / "000000001.log").read_bytes()[:8] == HEADER
    got = list(iter_commands(d))
    assert [c for *_, c in got] == jobs + [WqComplete(jobs[0].id, b"ok")]
    assert [t for _, _, t, _ in got] == [T0 + i for i in range(10)] + [T0 + 99]
    assert got[-1][1] == off + len(encode_record(0, encode_payload(jobs[-1])))


def test_writer_rolls_to_next_sequence_within_max(tmp_path):
    rec_len = len(encode_record(T0, encode_payload(cmds(1)[0])))  # 37
    max_bytes = 8 + 3 * rec_len + 10  # three records per file
    with SegmentWriter(tmp_path, max_segment_bytes=max_bytes) as w:
        for i, c in enumerate(cmds(10)):
            w.append_command(c, T0 + i)
    names = [os.path.basename(p) for _, p in list_segments(tmp_path)]
    assert names == ["000000001.log", "000000002.log", "000000003.log", "000000004.log"]
    assert w.paths == [p for _, p in list_segments(tmp_path)]
    sizes = [os.path.getsize(p) for p in w.paths]
    assert sizes == [8 + 3 * rec_len] * 3 + [8 + rec_len]
    assert all(s <= max_bytes for s in sizes)
    assert [c for *_, c in iter_commands(tmp_path)] == cmds(10)


def test_writer_oversized_record_gets_its_own_file(tmp_path):
    with SegmentWriter(tmp_path, max_segment_bytes=50) as w:
        w.append(b"x" * 100, T0)
        w.append(b"y" * 100, T0)
    assert len(w.paths) == 2
    assert [p for _, _, p in iter_segment_records(w.paths[1])] == [b"y" * 100]


def test_writer_starts_after_existing_segments(tmp_path):
    write_segment(tmp_path / "000000007.log", cmds(1))
    with SegmentWriter(tmp_path) as w:
        path, off = w.append_command(cmds(1, 9)[0], T0)
    assert (path, off) == (str(tmp_path / "000000008.log"), 8)
    assert [c for *_, c in iter_commands(tmp_path)] == cmds(1) + cmds(1, 9)


def test_writer_without_records_creates_no_file(tmp_path):
    with SegmentWriter(tmp_path):
        pass
    assert os.listdir(tmp_path) == []


def test_writer_refuses_after_close_and_oversized_payload(tmp_path):
    w = SegmentWriter(tmp_path, max_payload_bytes=10)
    with pytest.raises(ValueError, match="exceeds"):
        w.append(b"x" * 11)
    w.close()
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.append(b"x")


def test_writer_default_time_is_now(tmp_path):
    import time

    before = time.time_ns()
    with SegmentWriter(tmp_path) as w:
        w.append(b"p")
    (_, t, p), = iter_segment_records(w.paths[0])
    assert before <= t <= time.time_ns() and p == b"p"
