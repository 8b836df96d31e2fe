"""The command producers alone: aiokafka's (faust's, as eventq configures it) against
librdkafka's (eventq/kafka/command_producer.py), on one real broker, under uvloop as
the server runs.

Each sender writes one small record to its partition and waits for the acknowledgement,
again and again (a command writer's lane at its busiest); senders are spread over the
partitions. Prints, per producer and number of senders: acknowledged records/s, p50 and
p99 of the acknowledgement, this process's CPU per record (all threads), and for
librdkafka how many delivery reports each wake-up of the loop carried.

    .venv/bin/python bench/command_producer_bench.py [--seconds 5] [--senders 1,8,64]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.kafka.command_producer import CommandProducer  # noqa: E402
from eventq.kafka.topics import commands_topic, ensure_topics  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402

PARTITIONS = 8
VALUE = b"\x80" + b"c" * 120  # about a command's size


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


async def aiokafka_producer(bootstrap: str):
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                enable_idempotence=True, linger_ms=0)
    await producer.start()
    return producer, producer.stop


async def librdkafka_producer(bootstrap: str):
    producer = CommandProducer(bootstrap)
    await producer.start()
    return producer, producer.stop


async def load(make, bootstrap: str, topic: str, senders: int, seconds: float):
    producer, stop = await make(bootstrap)
    for partition in range(PARTITIONS):  # connections and metadata, before the clock
        await producer.send_and_wait(topic, value=VALUE, key=None, partition=partition)
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds

    async def sender(partition: int) -> None:
        while time.monotonic() < stop_at:
            began = time.perf_counter()
            await producer.send_and_wait(topic, value=VALUE, key=None, partition=partition)
            latencies.append((time.perf_counter() - began) * 1000)

    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(sender(i % PARTITIONS) for i in range(senders)))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    per_wakeup = ""
    if isinstance(producer, CommandProducer):
        per_wakeup = f"{producer.deliveries / max(1, producer.wakeups):.2f}"
    await stop()
    return len(latencies) / wall, latencies, cpu * 1e6 / max(1, len(latencies)), per_wakeup


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--senders", default="1,8,64")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    import uvloop

    from tools.servers import test_broker_config

    makers = {"aiokafka": aiokafka_producer, "librdkafka": librdkafka_producer}
    with tempfile.TemporaryDirectory() as tmp:
        config = test_broker_config(Path(tmp) / "kafka")
        broker.start(config)
        try:
            [report] = ensure_topics(config.bootstrap,
                                     [commands_topic("bench.commands", PARTITIONS)])
            assert report.ok, report.describe()
            print(f"{'producer':>10} {'senders':>7} {'acks/s':>8} {'p50 ms':>7} "
                  f"{'p99 ms':>7} {'CPU us':>7} {'reports/wake-up':>15}", flush=True)
            for _ in range(args.rounds):
                for senders in [int(s) for s in args.senders.split(",")]:
                    for name, make in makers.items():
                        rate, latencies, cpu_us, per_wakeup = uvloop.run(
                            load(make, config.bootstrap, "bench.commands", senders,
                                 args.seconds))
                        print(f"{name:>10} {senders:>7} {rate:>8.0f} "
                              f"{percentile(latencies, .5):>7.2f} "
                              f"{percentile(latencies, .99):>7.2f} {cpu_us:>7.0f} "
                              f"{per_wakeup:>15}", flush=True)
        finally:
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
