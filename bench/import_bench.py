"""Benchmark of `eventq import-cmdlog`: parse + replay, publish, and (optionally) apply.

Generates a workq command log of N records (default 1,000,000: 85% adds, 10% completes
and 5% deletes of earlier jobs, 64-byte payloads, 1-day TTL) with
``eventq.cmdlog.SegmentWriter``, then runs the importer's own code path
(``eventq.migrate.importer.run_import``) and prints:

- records/s read, CRC-checked, decoded and replayed (no Kafka involved);
- live jobs/s mapped to Import commands;
- jobs/s published to the commands topic (produced and acknowledged, acks=all);
- with ``--apply``: jobs/s until applied by a running server (a throwaway
  `eventq serve` started on the bench topics; or pass --commands-topic/--jobs-topic/
  --app-id of a server that already runs on --bootstrap and add --wait).

Without --bootstrap only the parse + replay part runs (a dry run).

    .venv/bin/eventq kafka start --data-dir /tmp/bench-kafka --kafka-port 29092 \\
        --controller-port 29093
    .venv/bin/python bench/import_bench.py --bootstrap 127.0.0.1:29092 [--records N] [--apply]
    .venv/bin/eventq kafka stop --data-dir /tmp/bench-kafka --kafka-port 29092 \\
        --controller-port 29093
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.cmdlog import SegmentWriter, WqAdd, WqComplete, WqDelete  # noqa: E402
from eventq.console.progress import Progress  # noqa: E402
from eventq.migrate.importer import ImportOptions, run_import  # noqa: E402
from eventq.settings import Settings  # noqa: E402

DAY_MS = 86_400_000


def generate(directory: Path, records: int, seed: int = 1) -> dict[str, int]:
    """Write ``records`` records; return the count per type."""
    rng = random.Random(seed)
    now = time.time_ns()
    open_ids: list[uuid.UUID] = []  # added, neither completed nor deleted
    counts = {"add": 0, "complete": 0, "delete": 0}
    payload = bytes(range(64))
    with SegmentWriter(directory) as w:
        for i in range(records):
            roll = rng.random()
            if open_ids and roll >= 0.85:
                j = rng.randrange(len(open_ids))
                job_id = open_ids[j]
                open_ids[j] = open_ids[-1]
                open_ids.pop()
                if roll < 0.95:
                    w.append_command(WqComplete(job_id, b"done"), now)
                    counts["complete"] += 1
                else:
                    w.append_command(WqDelete(job_id), now)
                    counts["delete"] += 1
                continue
            job_id = uuid.UUID(int=rng.getrandbits(128), version=4)
            open_ids.append(job_id)
            w.append_command(
                WqAdd(job_id, f"bench-{i % 16}", 30_000, DAY_MS, i % 7 - 3, 3, 1, payload,
                      None, now - (records - i) * 1000),  # fmt: skip
                now,
            )
            counts["add"] += 1
    return counts


def start_server(settings: Settings, home: Path):
    """A throwaway `eventq serve` on the bench topics; returns the process."""
    from eventq.kafka.topics import ensure_topics

    reports = ensure_topics(settings.kafka_bootstrap, settings.topics)
    assert all(r.ok for r in reports), [r.describe() for r in reports]
    flags = [
        "--bootstrap", settings.kafka_bootstrap, "--commands-topic", settings.commands_topic,
        "--jobs-topic", settings.jobs_topic, "--app-id", settings.app_id,
        "--partitions", str(settings.partitions), "--data-dir", str(home),
        "--listen-port", "0",
    ]  # fmt: skip
    log = open(home / "server.log", "ab")
    process = subprocess.Popen([sys.executable, "-m", "eventq.cli", "serve", *flags],
                               stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    time.sleep(8)  # let it join the group and recover (empty topics)
    if process.poll() is not None:
        raise SystemExit(f"eventq serve exited; see {home / 'server.log'}")
    return process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, help="where to write the log (default: a temp dir)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temp dir (generated log, server data and log)")
    parser.add_argument("--bootstrap", default="", help="Kafka to publish to (else dry run)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--apply", action="store_true",
                        help="start `eventq serve` on the bench topics and wait until applied")
    parser.add_argument("--wait", action="store_true",
                        help="wait for a server already running on the given topics")
    parser.add_argument("--commands-topic")
    parser.add_argument("--jobs-topic")
    parser.add_argument("--app-id")
    parser.add_argument("--wait-timeout", type=float, default=120.0)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="import-bench-"))
    directory = args.dir or work / "cmdlog"
    prefix = f"bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    settings = replace(
        Settings(),
        bootstrap=args.bootstrap,
        partitions=args.partitions,
        commands_topic=args.commands_topic or f"{prefix}.commands",
        jobs_topic=args.jobs_topic or f"{prefix}.jobs",
        bulk_topic="",  # derived again from the commands topic (eventq.settings)
        app_id=args.app_id or f"{prefix}-app",
    )
    server = None
    try:
        if directory.exists() and any(directory.iterdir()):
            print(f"using the existing log in {directory}")
            generated = None
        else:
            began = time.monotonic()
            generated = generate(directory, args.records)
            seconds = time.monotonic() - began
            print(f"generated {args.records:,} records ({generated}) in {seconds:.1f}s "
                  f"({args.records / seconds:,.0f} records/s written)")  # fmt: skip
        size = sum(f.stat().st_size for f in directory.iterdir())
        print(f"log: {directory}, {size / 1e6:,.1f} MB")

        dry = not args.bootstrap
        wait = bool(args.apply or args.wait)
        if not dry and not args.commands_topic:
            from eventq.kafka.topics import ensure_topics

            ensure_topics(settings.kafka_bootstrap, settings.topics)
        if args.apply:
            server = start_server(settings, work)
        options = ImportOptions(str(directory), dry_run=dry, wait=wait,
                                wait_timeout_s=args.wait_timeout)  # fmt: skip
        report = run_import(settings, options, Progress())
        print()
        print("\n".join(report.lines()))
        print()
        print("figures:")
        print(f"  parse + replay : {report.records:,} records in {report.read_seconds:.2f}s "
              f"= {report.records_per_s():,.0f} records/s")  # fmt: skip
        live = report.to_publish
        if report.plan_seconds:
            print(f"  map to Import  : {live:,} jobs in {report.plan_seconds:.2f}s "
                  f"= {live / report.plan_seconds:,.0f} jobs/s")  # fmt: skip
        if not dry:
            print(f"  publish (acked): {report.published:,} jobs in "
                  f"{report.publish_seconds:.2f}s = {report.jobs_per_s():,.0f} jobs/s "
                  f"({report.partitions} partitions, failed {report.failed})")  # fmt: skip
            total = report.read_seconds + report.plan_seconds + report.publish_seconds
            print(f"  log -> Kafka   : {total:.2f}s = {report.records / total:,.0f} records/s,"
                  f" {report.published / total:,.0f} jobs/s end to end")  # fmt: skip
        if report.waited:
            applied = report.imported + report.already_present
            print(f"  until applied  : {applied:,} jobs {report.wait_seconds:.2f}s after the "
                  f"last ack (not applied: {report.not_applied:,})")  # fmt: skip
            whole = total + report.wait_seconds
            print(f"  log -> applied : {whole:.2f}s = {applied / whole:,.0f} jobs/s")
        return 0 if report.ok else 1
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)  # never the --dir given


if __name__ == "__main__":
    sys.exit(main())
