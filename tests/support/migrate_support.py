"""Helpers for the migration tests: run the CLI in-process, build segment files."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from eventq.cmdlog import HEADER, encode_payload, encode_record
from eventq.cmdlog.timefmt import encode_time_ns
from eventq.kafka.logreader import end_offsets, latest_jobs
from eventq.migrate.cli import main

SERVER_FLAGS = ("bootstrap", "commands-topic", "jobs-topic", "app-id", "partitions")

# The vectors of docs/migrate.md, "Records" and "Commands"
SPEC_ID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
SPEC_CREATED_NS = 1_480_586_400 * 10**9  # 2016-12-01T10:00:00Z
SPEC_RECORD_TIME_NS = 1_482_828_625 * 10**9
SPEC_RECORD_A = bytes.fromhex("01" "0000000ecff42251" "00000000" "ffff" "01" "61" "d1221c32")
SPEC_ADD = bytes.fromhex(
    "01" "61a444a0612841c08078cc757d3bd2d8" "04" "70696e67" "e807" "e0d403" "14" "03" "01"
    "01" "61" "01000000000000000000000000ffff" "010000000ecfd1eba000000000ffff"
)
SPEC_COMPLETE = bytes.fromhex("03" "61a444a0612841c08078cc757d3bd2d8" "01" "61")
SPEC_DELETE = bytes.fromhex("05" "61a444a0612841c08078cc757d3bd2d8")


def spec_add(job_id: uuid.UUID = SPEC_ID, created_ns: int = SPEC_CREATED_NS) -> bytes:
    """The spec's add vector with another id and created time (same other fields)."""
    return SPEC_ADD[:1] + job_id.bytes + SPEC_ADD[17:-15] + encode_time_ns(created_ns)


def with_id(payload: bytes, job_id: uuid.UUID) -> bytes:
    return payload[:1] + job_id.bytes + payload[17:]


def write_segment(directory: Path, seq: int, payloads, time_ns: int = SPEC_RECORD_TIME_NS,
                  header: bytes = HEADER) -> tuple[Path, list[int]]:
    """A segment file of raw payloads (bytes or workq commands); returns its path and
    the offset of each record."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{seq:09d}.log"
    data = bytearray(header)
    offsets = []
    for payload in payloads:
        if not isinstance(payload, (bytes, bytearray)):
            payload = encode_payload(payload)
        offsets.append(len(data))
        data += encode_record(time_ns, payload)
    path.write_bytes(bytes(data))
    return path, offsets


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def report(self) -> dict:
        return json.loads(self.out)


def run_cli(capsys, *argv: str) -> CliResult:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def server_flags(server) -> list[str]:
    return [part for key in SERVER_FLAGS for part in (f"--{key}", server.settings[key])]


def commands_end(server) -> int:
    """Total records in the server's commands topic now."""
    return sum(high for _low, high in end_offsets(
        server.bootstrap, server.settings["commands-topic"]).values())  # fmt: skip


def state_jobs(server, ids=None):
    jobs, bad = latest_jobs(server.bootstrap, server.settings["jobs-topic"])
    assert bad.count == 0, bad.examples
    return jobs if ids is None else {i: jobs[i] for i in ids if i in jobs}


def wait_state_jobs(server, predicate, timeout_s: float = 20.0):
    """Poll the state log until ``predicate(jobs)`` holds; return the jobs."""
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = state_jobs(server)
        if predicate(jobs):
            return jobs
        assert time.monotonic() < deadline, "the state log never reached the expected state"
        time.sleep(0.2)
