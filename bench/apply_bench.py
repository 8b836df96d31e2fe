"""Benchmark of the processor alone: how fast `eventq serve` applies batch records.

Starts a throwaway Kafka broker and `eventq serve`, builds N add commands in batch
records (eventq/core/batch.py: grouped per partition as Spark's enqueue groups them),
writes them straight to the command log, and prints the jobs/s from the first write to
the last job ready, and the server's CPU per applied command. Nothing else runs on the
machine's cores meanwhile (unlike bench/spark_bench.py, where Spark writes while the
server applies).

    .venv/bin/python bench/apply_bench.py [--jobs 200000] [--partitions 8] [--profile F]
        [--metrics-off --rounds 2]
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
sys.path.insert(0, str(ROOT / "bench"))

from eventq.client.raw import RawClient as Client  # noqa: E402
from eventq.core import Add, encode_command  # noqa: E402
from eventq.core.batch import BatchBuilder  # noqa: E402
from eventq.core.partitioner import partition_for_key  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from tools.servers import cpu_s  # noqa: E402


def batch_records(jobs: int, partitions: int, queue: str) -> list[tuple[int, bytes]]:
    builders = {p: BatchBuilder() for p in range(partitions)}
    records = []
    for _ in range(jobs):
        job = uuid.uuid4()
        partition = partition_for_key(str(job).encode(), partitions)
        data = encode_command(Add(job, queue, 60_000, 3_600_000, b"x" * 100))
        builder = builders[partition]
        if not builder.fits(data):
            records.append((partition, builder.take()))
        builder.add(data)
    records += [(p, b.take()) for p, b in builders.items() if b.commands]
    return records


async def wait_ready(port: int, queue: str, jobs: int) -> None:
    async with await Client.connect(port=port) as c:
        while int((await c.inspect_queue(queue))["ready-len"]) < jobs:
            await asyncio.sleep(0.2)


def apply_once(server, config, args, label, start_profile, summarize_profile) -> None:
    from confluent_kafka import Producer

    server.create_topics()
    server.start()
    records = batch_records(args.jobs, args.partitions, "bulk")
    print(f"{label}: {args.jobs:,} adds in {len(records):,} batch records, "
          f"{args.partitions} partitions", flush=True)
    producer = Producer({"bootstrap.servers": config.bootstrap, "linger.ms": 10,
                         "message.max.bytes": 4 << 20})
    spy = start_profile(server.process.pid, 8, args.profile) if args.profile else None
    cpu_before, began = cpu_s(server.process.pid), time.monotonic()
    for partition, value in records:
        producer.produce(server.settings["commands-topic"], value=value, partition=partition)
    producer.flush()
    asyncio.run(wait_ready(server.port, "bulk", args.jobs))
    elapsed = time.monotonic() - began
    cpu_us = (cpu_s(server.process.pid) - cpu_before) * 1e6 / args.jobs
    print(f"{label}: applied {args.jobs:,} jobs in {elapsed:.1f}s = "
          f"{args.jobs / elapsed:,.0f} jobs/s; server CPU {cpu_us:.1f} us per command",
          flush=True)
    if spy is not None:
        spy.wait()
        print(summarize_profile(args.profile))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--profile", type=Path, help="py-spy the server into this file")
    parser.add_argument("--metrics-off", action="store_true",
                        help="also apply with --http-port off (no metrics, no live statistics)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every variant this many times, interleaved")
    args = parser.parse_args()

    from gateway_bench import start_profile, summarize_profile

    from tools.servers import ServerProcess, test_broker_config

    variants = [("metrics on", {})]
    if args.metrics_off:
        variants.insert(0, ("metrics off", {"http_port": "off"}))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        broker.start(config)
        try:
            for number, (label, extra) in enumerate(variants * args.rounds):
                server = ServerProcess(config.bootstrap, f"apply{number}",
                                       home / f"server{number}", partitions=args.partitions,
                                       **extra)
                try:
                    apply_once(server, config, args, label, start_profile, summarize_profile)
                finally:
                    server.stop()
        finally:
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
