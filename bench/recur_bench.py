"""Benchmark of recurring jobs (docs/workflows.md, "Recurring jobs"): a recurrence's
firing delay, from a slot's due time to its job being leasable.

Starts a throwaway Kafka broker and `eventq serve`, defines --recurrences recurrences
of --every ms (recurrence r<i> adds to queue q<i>), and keeps one lease waiting on each
queue (a thread and a connection each): a lease returns as soon as the slot's job is
ready, so (lease returned - slot due) is the delay from due time to leasable, in this
machine's clock (the broker's: one host). Each job's id names its slot (the spec's
hash of name, every and n), so the due time is n x every. After --seconds the
recurrences are removed and the command log read: for each slot, its fire's and its
add's broker times (LogAppendTime) split the delay into due -> fire in the log (the
timer) and fire -> add in the log (the fire applied, its add written as a follow-up),
the rest being the add applied and the lease answered.

Also: slots fired against slots due (a slot missed while serving would show), and the
server's CPU per slot. Figures only, never asserted.

    .venv/bin/python bench/recur_bench.py [--recurrences 20] [--every 1000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.client import Client  # noqa: E402
from eventq.client.errors import TimedOut  # noqa: E402
from eventq.core import decode_command  # noqa: E402
from eventq.core.batch import read_record  # noqa: E402
from eventq.core.commands import Add, Fire  # noqa: E402
from eventq.core.recurrence import slot_job_id  # noqa: E402
from eventq.kafka.logreader import read_topic  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from tools.servers import cpu_s  # noqa: E402


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def describe(label: str, values: list[float]) -> str:
    return (f"{label:<28} n={len(values):<5} p50 {percentile(values, 0.5):7.1f} ms   "
            f"p99 {percentile(values, 0.99):7.1f} ms   max {max(values, default=float('nan')):7.1f} ms")


def lease_loop(port: int, index: int, every: int, stop: threading.Event,
               delays: dict[tuple[str, int], float]) -> None:
    name, queue = f"r{index}", f"q{index}"
    slots: dict[str, int] = {}
    with Client(port=port, pool_size=1) as client:
        while not stop.is_set():
            try:
                job = client.lease(queue, wait_timeout_ms=2000)
            except TimedOut:
                continue
            leased_ms = now_ms()
            slot = slots.get(str(job.id))
            if slot is None:  # the slots around now, by id
                for n in range(leased_ms // every - 50, leased_ms // every + 2):
                    slots[str(slot_job_id(name, every, n))] = n
                slot = slots[str(job.id)]
            delays[(name, slot)] = leased_ms - slot * every
            client.delete(job.id)


def from_the_log(bootstrap: str, topic: str, every: int, names: set[str]):
    """(name, slot) -> (fire's broker time, add's broker time), of the fires that fired."""
    fires: dict[str, list[tuple[int, int]]] = {}  # name -> [(broker ms, slot asked)]
    adds: dict[str, int] = {}  # job id -> broker ms
    for record in read_topic(bootstrap, topic):
        for item in read_record(record.value)[1]:
            command = decode_command(item).command
            if isinstance(command, Fire) and command.name in names:
                fires.setdefault(command.name, []).append((record.timestamp_ms, command.slot))
            elif isinstance(command, Add):
                adds.setdefault(str(command.job_id), record.timestamp_ms)
    found = {}
    for name, fired in fires.items():
        for at_ms, _ in fired:
            slot = at_ms // every  # what a fire applied at at_ms fires (if anything)
            add_ms = adds.get(str(slot_job_id(name, every, slot)))
            if add_ms is not None and (name, slot) not in found:
                found[(name, slot)] = (at_ms, add_ms)
    return found


def bench(args, server, bootstrap: str) -> None:
    port = server.port
    names = {f"r{i}" for i in range(args.recurrences)}
    delays: dict[tuple[str, int], float] = {}
    stop = threading.Event()
    threads = [threading.Thread(target=lease_loop, args=(port, i, args.every, stop, delays),
                                daemon=True) for i in range(args.recurrences)]
    for thread in threads:
        thread.start()
    with Client(port=port) as client:
        began_ms = now_ms()
        cpu0 = cpu_s(server.process.pid)
        for i in range(args.recurrences):
            client.recur(f"r{i}", f"q{i}", b"tick", every_ms=args.every, ttr_ms=60_000,
                         ttl_ms=600_000)
        time.sleep(args.seconds)
        for i in range(args.recurrences):
            client.unrecur(f"r{i}")
        ended_ms = now_ms()
        cpu = cpu_s(server.process.pid) - cpu0
    time.sleep(2.5)  # the last slots' leases
    stop.set()
    for thread in threads:
        thread.join(5)
    due = sum(max(0, (ended_ms // args.every) - (began_ms // args.every)) for _ in names)
    values = list(delays.values())
    print(f"recur_bench: {args.recurrences} recurrences of {args.every} ms for "
          f"{args.seconds} s, {server.partitions} partitions")
    print(f"slots leased {len(values)} of about {due} due (each slot once: "
          f"{len(set(delays)) == len(values)})")
    print(describe("due -> leasable", values))
    logged = from_the_log(bootstrap, server.settings["commands-topic"], args.every, names)
    timer = [fire_ms - slot * args.every for (name, slot), (fire_ms, _) in logged.items()]
    follow = [add_ms - fire_ms for (fire_ms, add_ms) in logged.values()]
    rest = [delays[key] - (add_ms - key[1] * args.every)
            for key, (_, add_ms) in logged.items() if key in delays]
    print(describe("due -> fire in the log", timer))
    print(describe("fire -> add in the log", follow))
    print(describe("add in log -> leased", rest))
    print(f"server CPU {cpu:.2f} s over {(ended_ms - began_ms) / 1000:.1f} s: "
          f"{1000 * cpu / max(1, len(values)):.2f} ms per slot (the idle server's share "
          "included)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recurrences", type=int, default=20)
    parser.add_argument("--every", type=int, default=1000, help="ms (at least 1000)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from tools.servers import ServerProcess, test_broker_config

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        broker.start(config)
        server = ServerProcess(config.bootstrap, "recurbench", home / "server",
                               partitions=args.partitions)
        try:
            server.create_topics()
            server.start()
            bench(args, server, config.bootstrap)
        finally:
            server.stop()
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
