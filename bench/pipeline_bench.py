"""Benchmark of eventq's own code on the request path, in one process: no sockets, no
Kafka client, no faust.

Each simulated client runs add -> lease -> complete cycles (an 8-byte payload, a queue
of its own) through what `eventq serve` runs for them: the parser of its connection
(eventq/protocol), the gateway's dispatch and handlers (eventq/gateway), the engine's
submit (streams/engine.py) and the group-commit writer (streams/command_writer.py), a
command log in lists (streams/memory.py ``MemoryLog``, the producer's acknowledgement at
once) and the processor's ``handle_batch`` over a dict-backed jobs table (``MemoryStore``).
What the broker, aiokafka and the sockets cost is not in the figures: only what eventq's
code (and the event loop under it) costs per command.

Prints, per number of concurrent clients, the commands/s and the CPU per command
(``time.process_time``), the median over ``--rounds``:

    .venv/bin/python bench/pipeline_bench.py [--clients 16,64] [--commands 12000] [--rounds 3]
        [--profile] [--tags N] [--adds-only]

``--tags N`` (docs/workflows.md, "Tags": the cost of tags on the add path) runs every
round twice, interleaved, its adds without tags and with ``-tags=`` of N tags of 16
bytes (the same N for every job, so each tag's index holds every live job), and prints
both figures and their difference. ``--adds-only``: each cycle is one add (no lease, no
complete), so the figure is the add path's alone.

``--profile`` runs once per client count under cProfile and prints the 25 functions
with the most time of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import cProfile
import pstats
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.gateway.dispatch import Gateway  # noqa: E402
from eventq.gateway.handlers import LocalAnswers  # noqa: E402
from eventq.gateway.leasing import Handover, Leasing  # noqa: E402
from eventq.gateway.server import GatewayStats  # noqa: E402
from eventq.protocol import Parser  # noqa: E402
from eventq.state.indexes import JobIndex  # noqa: E402
from eventq.state.livestats import LiveStats  # noqa: E402
from eventq.state.waiters import Waiters  # noqa: E402
from streams.command_writer import CommandWriter  # noqa: E402
from streams.engine import Engine  # noqa: E402
from streams.memory import MemoryDB, MemoryLog, MemoryStore  # noqa: E402
from streams.processor import Processor, wall_clock_ms  # noqa: E402

PARTITIONS = 8  # `eventq serve`'s default
NODE = "pipeline-bench"
WRITE_TIMEOUT_MS = 10_000
PAYLOAD = b"8 bytes!"
COMMANDS_PER_CYCLE = 3  # add, lease, complete
LEASE_WAIT_S = 1  # the lease's wait-timeout (its job is always ready: never waited)
TTR_S, TTL_S = 60, 3600


class _SeekingDB(MemoryDB):
    """A partition's table whose scans seek, as RocksDB's do: its keys kept in order,
    so a scan from a key (every completed job's look for registrations waiting on it,
    streams/processor.py ``_registrations``) costs what it finds, not a sort of the
    whole table as ``MemoryDB``'s (which the test sizes never notice)."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        super().__init__()
        self._keys: list[bytes] = []

    def items(self, from_key=None, read_opt=None):
        keys = self._keys
        for at in range(0 if from_key is None else bisect.bisect_left(keys, from_key),
                        len(keys)):
            yield keys[at], self.data[keys[at]]

    def write(self, records) -> None:
        for key, value in records:
            known = key in self.data
            if value is None and known:
                del self._keys[bisect.bisect_left(self._keys, key)]
            elif value is not None and not known:
                bisect.insort(self._keys, key)
        super().write(records)


class _SeekingStore(MemoryStore):
    def db(self, partition: int) -> MemoryDB:
        db = self.dbs.get(partition)
        if db is None:
            db = self.dbs[partition] = _SeekingDB()
        return db


class _Fetched:
    """A record as the command log's reader hands it to ``handle_batch``
    (streams/faust/command_fetch.py: aiokafka's ConsumerRecord, ``timestamp`` in ms)."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "key", "value")

    def __init__(self, message) -> None:
        self.topic = message.topic
        self.partition = message.partition
        self.offset = message.offset
        self.timestamp = message.timestamp_ms
        self.key = message.key
        self.value = message.value


class _Broker:
    """The command log and its reader: a record is in the log as soon as it is sent (the
    log's clock is the wall clock, as LogAppendTime is), and the reader hands each
    partition's new records to the processor as one fetch, as the process's own
    consumer does (docs/architecture.md, "Batches")."""

    def __init__(self, log: MemoryLog, processor: Processor) -> None:
        self._log = log
        self._processor = processor
        self._read = [0] * log.partitions
        self._new: set[int] = set()
        self._arrived = asyncio.Event()

    async def send_and_wait(self, topic, value, key, partition):
        self._log.now_ms = wall_clock_ms()
        message = self._log.append(partition, value, key)
        self._new.add(partition)
        self._arrived.set()
        return message  # its ``offset``, as aiokafka's RecordMetadata

    async def fetch(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            new, self._new = self._new, set()
            for partition in sorted(new):
                records = self._log.records(partition, self._read[partition])
                self._read[partition] += len(records)
                await self._processor.handle_batch(partition, [_Fetched(m) for m in records])


class Pipeline:
    """One `eventq serve` without its sockets: the gateway over the engine over the
    memory log and the processor."""

    def __init__(self) -> None:
        self.log = MemoryLog(PARTITIONS, start_ms=wall_clock_ms())
        store = _SeekingStore(PARTITIONS)
        index, waiters = JobIndex(), Waiters()
        for partition in range(PARTITIONS):
            index.rebuild(partition, store.slims_in(partition), self.log.now_ms,
                          store.paused_in(partition), store.registrations_in(partition))
        processor = Processor(store, index, waiters, NODE, lambda deadline: None,
                              store.persist, stats=LiveStats())
        processor.resumed_at({p: 0 for p in range(PARTITIONS)})
        self.broker = _Broker(self.log, processor)
        self.engine = Engine(commands_topic=self.log.topic, partitions=PARTITIONS,
                             write_timeout_ms=WRITE_TIMEOUT_MS, index=index, store=store,
                             waiters=waiters, node=NODE)
        self.engine.writer = CommandWriter(lambda: self.broker, self.log.topic, PARTITIONS,
                                           applied=processor.applied)
        self.engine.ready.set()
        stats = GatewayStats(lambda: processor.counters.evicted)
        leasing = Leasing(self.engine, stats, wall_clock_ms)
        self.gateway = Gateway(LocalAnswers(self.engine, stats, leasing, wall_clock_ms), leasing)


async def _ask(gateway: Gateway, parser: Parser, request: bytes) -> bytes:
    """One request as a connection answers it: parsed from its bytes, dispatched, and
    the reply's bytes (eventq/gateway/server.py ``_converse``)."""
    parser.feed(request)
    reply = await gateway.handle(parser.next_event(), False)
    return reply.reply if isinstance(reply, Handover) else reply


def tags_flag(count: int) -> bytes:
    """`` -tags=`` of ``count`` tags of 16 bytes (nothing for 0)."""
    if not count:
        return b""
    return b" -tags=" + b",".join(b"tag-%012d" % n for n in range(count))


async def _client(gateway: Gateway, queue: str, cycles: int, tags: int = 0,
                  adds_only: bool = False) -> None:
    parser = Parser(now_ms=wall_clock_ms)
    lease = f"lease {queue} {LEASE_WAIT_S}\r\n".encode()
    flag = tags_flag(tags)
    for _ in range(cycles):
        job = str(uuid.uuid4()).encode()
        add = b"add %s %s %d %d %d%s\r\n%s\r\n" % (job, queue.encode(), TTR_S, TTL_S,
                                                  len(PAYLOAD), flag, PAYLOAD)
        if adds_only:
            reply = await _ask(gateway, parser, add)
            if reply != b"+OK\r\n":
                raise AssertionError(f"unexpected reply {reply!r} for job {job!r}")
            continue
        replies = [await _ask(gateway, parser, add), await _ask(gateway, parser, lease)]
        leased = replies[1].split(b"\r\n")[1].split(b" ")[0]
        complete = b"complete %s %d\r\n%s\r\n" % (leased, len(PAYLOAD), PAYLOAD)
        replies.append(await _ask(gateway, parser, complete))
        if leased != job or replies[0] != b"+OK\r\n" or replies[2] != b"+OK\r\n":
            raise AssertionError(f"unexpected replies {replies!r} for job {job!r}")


async def run(clients: int, cycles: int, tags: int = 0,
              adds_only: bool = False) -> tuple[float, float]:
    """(commands/s, CPU µs per command) of ``clients`` clients doing ``cycles`` each,
    their adds with ``tags`` tags."""
    pipeline = Pipeline()
    fetcher = asyncio.ensure_future(pipeline.broker.fetch())
    try:
        cpu, began = time.process_time(), time.perf_counter()
        await asyncio.gather(*(_client(pipeline.gateway, f"q{n}", cycles, tags, adds_only)
                               for n in range(clients)))
        cpu, elapsed = time.process_time() - cpu, time.perf_counter() - began
    finally:
        fetcher.cancel()
        await pipeline.engine.writer.stop()
    commands = clients * cycles * (1 if adds_only else COMMANDS_PER_CYCLE)
    return commands / elapsed, cpu * 1e6 / commands


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__,
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_argument("--clients", default="16,64",
                         help="comma-separated numbers of concurrent clients")
    options.add_argument("--commands", type=int, default=12_000,
                         help="commands a round, shared out among the clients")
    options.add_argument("--rounds", type=int, default=3, help="the median of this many")
    options.add_argument("--profile", action="store_true",
                         help="one round per client count under cProfile: the top 25")
    options.add_argument("--tags", type=int, default=0, metavar="N",
                         help="also run each round with N tags (1-16) on every add, "
                         "interleaved, and print both")
    options.add_argument("--adds-only", action="store_true",
                         help="each cycle is one add: the add path's figure alone")
    args = options.parse_args()
    client_counts = [int(n) for n in args.clients.split(",")]
    per_cycle = 1 if args.adds_only else COMMANDS_PER_CYCLE
    cycles = {n: max(1, args.commands // (per_cycle * n)) for n in client_counts}
    if args.tags:
        return compare_tags(client_counts, cycles, args.tags, args.rounds, args.adds_only)
    if args.profile:
        for clients in client_counts:
            profile = cProfile.Profile()
            profile.runcall(asyncio.run, run(clients, cycles[clients]))
            print(f"--- {clients} clients: top 25 by own time")
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return 0
    print(f"{'clients':>7} {'commands/s':>11} {'CPU us/command':>15}  (median of "
          f"{args.rounds}; rounds)", flush=True)
    for clients in client_counts:
        rounds = [asyncio.run(run(clients, cycles[clients])) for _ in range(args.rounds)]
        rate = statistics.median(r[0] for r in rounds)
        cpu_us = statistics.median(r[1] for r in rounds)
        each = " ".join(f"{r[1]:.1f}" for r in rounds)
        print(f"{clients:>7} {rate:>11,.0f} {cpu_us:>15.1f}  ({each})", flush=True)
    return 0


def compare_tags(client_counts: list[int], cycles: dict[int, int], tags: int, rounds: int,
                 adds_only: bool) -> int:
    """Each round without tags, then with ``tags`` tags: the medians side by side."""
    what = "add" if adds_only else "add/lease/complete"
    print(f"{what} cycles, adds with 0 and with {tags} tags; median of {rounds} interleaved "
          "rounds", flush=True)
    print(f"{'clients':>7} {'tags':>4} {'commands/s':>11} {'CPU us/command':>15}  (rounds)",
          flush=True)
    for clients in client_counts:
        results: dict[int, list[tuple[float, float]]] = {0: [], tags: []}
        for _ in range(rounds):
            for count in (0, tags):
                results[count].append(asyncio.run(run(clients, cycles[clients], count,
                                                      adds_only)))
        medians = {}
        for count, measured in results.items():
            rate = statistics.median(r[0] for r in measured)
            medians[count] = statistics.median(r[1] for r in measured)
            each = " ".join(f"{r[1]:.1f}" for r in measured)
            print(f"{clients:>7} {count:>4} {rate:>11,.0f} {medians[count]:>15.1f}  ({each})",
                  flush=True)
        cost = medians[tags] - medians[0]
        print(f"{clients:>7} tags cost {cost:+.1f} us per command "
              f"({cost / medians[0]:+.1%})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
