"""Benchmark of the Spark jobs: bulk enqueue of N rows, then a snapshot of the state log.

Starts a throwaway Kafka broker and `eventq serve` (or uses --bootstrap/--port of running
ones, with --commands-topic/--jobs-topic), writes N generated rows to parquet, then
prints:
- enqueue: rows/s into the command log (the Spark job, from reading the parquet to the
  last acknowledged Kafka write);
- applied: jobs/s until the server has applied them all (polling `inspect queue` until
  ready-len is N), counted from the start of the enqueue;
- snapshot: time to read the state log, write the live jobs as parquet and digest them,
  and whether that digest equals the server's `inspect digest`;
- with --stats, the time of `eventq spark stats` over the command log.

    .venv/bin/python bench/spark_bench.py [--rows 1000000] [--partitions 8] [--stats]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.client.raw import RawClient as Client  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402


def generate(spark, path: str, rows: int) -> None:
    from pyspark.sql import functions as F

    i = F.col("id")
    spark.range(rows).select(
        i.alias("order_id"),
        F.concat(F.lit('{"order": '), i.cast("string"), F.lit(', "sku": "'),
                 F.substring(F.sha2(i.cast("string"), 256), 1, 16), F.lit('"}')).alias("body"),
        (i % 10).cast("int").alias("prio"),
    ).write.mode("overwrite").parquet(path)


async def ready_len(port: int, queue: str) -> int:
    async with await Client.connect(port=port) as c:
        try:
            return (await c.inspect_queue(queue))["ready-len"]
        except Exception:  # NotFound until the first job is applied
            return 0


async def server_digest(port: int) -> str:
    async with await Client.connect(port=port) as c:
        return await c.digest()


def bench(args, bootstrap: str, port: int, commands: str, jobs: str, home: Path) -> None:
    from eventq.spark import compute_stats, enqueue, snapshot, spark_session
    from eventq.spark.session import SparkOptions

    spark, _ = spark_session(SparkOptions(master=args.master, driver_memory="3g",
                                          app_name="eventq-spark-bench"))
    data = str(home / "input.parquet")
    began = time.monotonic()
    generate(spark, data, args.rows)
    print(f"input: {args.rows:,} rows written to parquet in {time.monotonic() - began:.1f}s",
          flush=True)

    queue = f"bench-{uuid.uuid4().hex[:8]}"
    began = time.monotonic()
    report = enqueue(
        spark.read.parquet(data), bootstrap=bootstrap, topic=commands, name=queue,
        key_columns=["order_id"], payload_column="body", priority_column="prio",
        ttr_ms=60_000, ttl_ms=7 * 24 * 3600 * 1000, rejects=str(home / "rejects"),
    )
    sent_s = time.monotonic() - began
    print(f"enqueue: {report.sent:,} commands in the log in {sent_s:.1f}s = "
          f"{report.sent / sent_s:,.0f} rows/s ({report.rejected} rejected)", flush=True)

    at_sent = asyncio.run(ready_len(port, queue))  # applied while Spark still wrote
    sent_at = time.monotonic()
    last, last_report = 0, time.monotonic()
    while True:
        ready = asyncio.run(ready_len(port, queue))
        if ready >= report.sent:
            break
        if time.monotonic() - last_report > 30:
            print(f"  ... {ready:,} applied after {time.monotonic() - began:.0f}s", flush=True)
            last_report = time.monotonic()
        if ready == last and time.monotonic() - began > args.apply_timeout:
            raise SystemExit(f"the server applied only {ready:,} of {report.sent:,}")
        last = ready
        time.sleep(1)
    applied_s = time.monotonic() - began
    print(f"applied: {report.sent:,} jobs ready {applied_s:.1f}s after the enqueue began = "
          f"{report.sent / applied_s:,.0f} jobs/s end to end", flush=True)
    rest_s = time.monotonic() - sent_at
    print(f"  of which {report.sent - at_sent:,} after Spark finished writing, in "
          f"{rest_s:.1f}s = {(report.sent - at_sent) / rest_s:,.0f} jobs/s (the processor "
          "alone, without Spark on the same cores)", flush=True)

    time.sleep(1)  # the state log follows the applied commands
    began = time.monotonic()
    shot = snapshot(spark, bootstrap=bootstrap, topic=jobs, output=str(home / "snapshot"))
    snap_s = time.monotonic() - began
    equal = shot.digest == asyncio.run(server_digest(port))
    print(f"snapshot: {shot.jobs:,} jobs read, written as parquet and digested in "
          f"{snap_s:.1f}s = {shot.jobs / snap_s:,.0f} jobs/s; digest equals the server's: "
          f"{'yes' if equal else 'NO'}", flush=True)

    if args.stats:
        began = time.monotonic()
        stats = compute_stats(spark, bootstrap=bootstrap, commands_topic=commands,
                              jobs_topic=jobs)
        print(f"stats: {stats.commands:,} commands folded in {time.monotonic() - began:.1f}s",
              flush=True)
    spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--stats", action="store_true", help="also time `spark stats`")
    parser.add_argument("--apply-timeout", type=float, default=3600.0,
                        help="give up when nothing more is applied after this many seconds")
    parser.add_argument("--bootstrap", help="an existing broker (with --port)")
    parser.add_argument("--port", type=int, help="an existing eventq server's port")
    parser.add_argument("--commands-topic", default="eventq.commands")
    parser.add_argument("--jobs-topic", default="eventq.jobs")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        if args.bootstrap and args.port:
            bench(args, args.bootstrap, args.port, args.commands_topic, args.jobs_topic, home)
            return 0
        from tools.servers import ServerProcess, test_broker_config

        config = test_broker_config(home / "kafka")
        config = broker.BrokerConfig(**{**config.__dict__, "heap_mb": 1024})
        broker.start(config)
        server = ServerProcess(config.bootstrap, "sparkbench", home / "server",
                               partitions=args.partitions)
        try:
            server.create_topics()
            server.start()
            print(f"broker {config.bootstrap}, server on port {server.port}, "
                  f"{args.partitions} partitions", flush=True)
            bench(args, config.bootstrap, server.port, server.settings["commands-topic"],
                  server.settings["jobs-topic"], home)
        finally:
            server.stop()
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
