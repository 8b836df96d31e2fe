"""Benchmark of the request path: add -> lease -> complete cycles through a real server.

Starts a throwaway Kafka broker and `eventq serve`, then prints, for each number of
concurrent clients (each client: add, lease, complete, again and again):
- cycles/s;
- p50/p99 latency per command (add, lease and complete together) and of add alone;
- the server's CPU per command (its process CPU time / commands).
Then the server's resident memory with --queued jobs waiting.

With ``--before REF`` the same load first runs against the code of git revision REF
(checked out in a temporary worktree, same broker, same run), so a change is measured
before and after on the same machine at the same moment:

    .venv/bin/python bench/gateway_bench.py [--seconds 10] [--before 47eb000]

``--partitions 2,4,8,16`` measures this checkout once per partition count (each on topics
of its own), and ``--processes 1,2`` once per number of `eventq serve` processes sharing
one group (docs/architecture.md, "Scaling out"): every client connects to the first
process, so forwarding to the others is in the figure, and CPU per command is all the
processes' CPU together. Variants are interleaved with ``--rounds``.

``--also SETTING=VALUE`` measures this checkout a second time with that setting (e.g.
``--also write-timeout-ms=10000``), interleaved, so two choices of one code are compared
the same way. After each server stops, its own account of what it wrote is printed
(commands per record, records applied, changelog transactions).

``--security`` measures the cost of TLS and tokens on the hot path
(docs/security.md, "Where tokens and certificates come from"), interleaved with the
plain variant: tokens only, TLS only, and both (a tokens file and a CA-signed
certificate made in the run's temporary directory; every load client connects over TLS
trusting that CA and/or sends ``auth`` with a producer,worker token first, so each
request passes the role check). Give ``--security tls+tokens`` (or a comma-separated
subset of ``tokens,tls,tls+tokens``) for fewer variants.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.client.raw import RawClient as Client  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from eventq.settings import Settings  # noqa: E402
from tools.revision import remove_worktree, worktree  # noqa: E402
from tools.servers import cpu_s, rss_mib  # noqa: E402

SECURITY_VARIANTS = ("tokens", "tls", "tls+tokens")


class ClientSide:
    """How the load clients connect: TLS context and token (None: plain, no auth)."""

    def __init__(self, tls: ssl.SSLContext | None = None, token: str | None = None) -> None:
        self.tls = tls
        self.token = token

    async def connect(self, port: int) -> Client:
        return await Client.connect(port=port, tls=self.tls, token=self.token)


PLAIN = ClientSide()


class Security:
    """The files of --security, made once per run: certificates from tools/tls_files.py
    (a CA and a server certificate for 127.0.0.1) and a tokens file whose admin token
    the readiness probe uses and whose producer,worker token the load uses."""

    def __init__(self, home: Path) -> None:
        from tools.tls_files import make_tls_files

        self.files = make_tls_files(home / "tls")
        self.admin, self.load_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.tokens_file = home / "tokens"
        self.tokens_file.write_text(f"{self.admin} admin\n{self.load_token} producer,worker\n")

    def settings(self, variant: str) -> dict[str, str]:
        settings = {}
        if "tokens" in variant:
            settings["tokens_file"] = str(self.tokens_file)
        if "tls" in variant:
            settings["tls_cert"] = self.files.pem("server")
            settings["tls_key"] = self.files.key("server")
        return settings

    def client(self, variant: str) -> ClientSide:
        from eventq.client import tls_context

        return ClientSide(tls_context(self.files.pem("ca")) if "tls" in variant else None,
                          self.load_token if "tokens" in variant else None)

    def ready(self, server, variant: str) -> None:
        """The readiness probe of ``server`` speaks as the load does."""
        side = self.client(variant)
        server.ready_tls = side.tls
        server.ready_auth = b"auth %s\r\n" % self.admin.encode() if side.token else b""


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def cycles(port: int, clients: int, seconds: float, queue: str,
                 side: ClientSide = PLAIN):
    """Run the cycle with ``clients`` connections; (cycles/s, per-command ms, add ms)."""
    command_ms: list[float] = []
    add_ms: list[float] = []
    done = 0
    connections = [await side.connect(port) for _ in range(clients)]
    stop_at = time.monotonic() + seconds

    async def one_client(c: Client) -> None:
        nonlocal done
        while time.monotonic() < stop_at:
            job = uuid.uuid4()
            t0 = time.perf_counter()
            await c.add(job, queue, 60000, 600000, b"payload")
            t1 = time.perf_counter()
            leased = await c.lease(queue, 5000)
            t2 = time.perf_counter()
            await c.complete(leased.id, b"ok")
            t3 = time.perf_counter()
            add_ms.append((t1 - t0) * 1000)
            command_ms.extend(((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000))
            done += 1

    began = time.monotonic()
    await asyncio.gather(*(one_client(c) for c in connections))
    elapsed = time.monotonic() - began
    for c in connections:
        await c.close()
    return done / elapsed, command_ms, add_ms


async def fill(port: int, count: int, queue: str, connections: int = 16,
               side: ClientSide = PLAIN) -> float:
    """Queue `count` jobs with pipelined adds; returns jobs/s."""
    per = count // connections
    began = time.monotonic()

    async def writer(n: int) -> None:
        async with await side.connect(port) as c:
            window = 200
            for start in range(0, n, window):
                batch = min(window, n - start)
                for _ in range(batch):
                    c.send(["add", str(uuid.uuid4()), queue, "60000", "3600000", "16"],
                           b"x" * 16)
                for _ in range(batch):
                    await c._status()

    await asyncio.gather(*(writer(per) for _ in range(connections)))
    return per * connections / (time.monotonic() - began)


HEADER = (f"{'clients':>7} {'cycles/s':>9} {'cmd p50':>8} {'cmd p99':>8} {'add p50':>8} "
          f"{'add p99':>8} {'CPU/cmd':>8}  {'cores: server broker client'}  "
          "(ms; CPU per command in us)")


def start_profile(pid: int, seconds: float, path: Path, native: bool = False) -> subprocess.Popen:
    """py-spy samples the server while the load runs (collapsed stacks, --idle off)."""
    spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen(
        [str(spy), "record", "--pid", str(pid), "--duration", str(int(seconds)),
         "--rate", "250", "--gil", "--format", "raw", "--output", str(path),
         # py-spy unwinds C frames only while the process is paused (it wrote nothing
         # with --native --nonblocking), and pausing slows the server a lot.
         *(["--native"] if native else ["--nonblocking"])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def summarize_profile(path: Path, top: int = 25) -> str:
    """The functions where the server's samples sit, by share of all samples: ``self``
    (the frame itself was running) and ``total`` (anywhere on the stack)."""
    from collections import Counter

    own, inclusive, total = Counter(), Counter(), 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue  # (py-spy's own messages)
        n = int(count)
        total += n
        frames = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0].rsplit("/", 1)[-1]
                  + ")" if " (" in f else f for f in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    lines = [f"profile {path.name}: {total} samples; share of samples: self / total"]
    for frame, n in inclusive.most_common(top):
        lines.append(f"  {100 * own[frame] / total:5.1f}% {100 * n / total:5.1f}%  {frame}")
    lines.append("  top by self:")
    for frame, n in own.most_common(top):
        lines.append(f"  {100 * n / total:5.1f}% {100 * inclusive[frame] / total:5.1f}%  {frame}")
    return "\n".join(lines)


def servers_cpu_s(servers) -> float:
    return sum(cpu_s(server.process.pid) for server in servers)


def measure(servers, concurrency: list[int], seconds: float, queued: int, label: str,
            profile_dir: Path | None = None, broker_pid: int | None = None,
            native: bool = False, side: ClientSide = PLAIN) -> list[tuple[int, float, float]]:
    """The load against ``servers[0]`` (the others serve through it by forwarding);
    (clients, cycles/s, server CPU per command in us) of each concurrency."""
    figures = []
    server = servers[0]
    pids = ", ".join(str(s.process.pid) for s in servers)
    print(f"--- {label}: server pid {pids}, RSS at start "
          f"{sum(rss_mib(s.process.pid) for s in servers):.0f} MiB", flush=True)
    print(HEADER, flush=True)
    asyncio.run(cycles(server.port, 16, 5, "warm-up", side))  # the broker's JIT, caches
    for clients in concurrency:
        cpu_before = servers_cpu_s(servers)
        broker_before = cpu_s(broker_pid) if broker_pid else 0.0
        client_before, wall_before = time.process_time(), time.monotonic()
        spy = None
        if profile_dir is not None:
            spy = start_profile(server.process.pid, seconds - 1,
                                profile_dir / f"{label.replace(' ', '-')}-{clients}.txt",
                                native)
        rate, command_ms, add_ms = asyncio.run(
            cycles(server.port, clients, seconds, f"cycle{clients}", side)
        )
        wall = time.monotonic() - wall_before
        server_cpu = servers_cpu_s(servers) - cpu_before
        broker_cpu = (cpu_s(broker_pid) - broker_before) if broker_pid else float("nan")
        client_cpu = time.process_time() - client_before
        cpu_us = server_cpu * 1e6 / max(1, len(command_ms))
        print(f"{clients:>7} {rate:>9.0f} {percentile(command_ms, .5):>8.2f} "
              f"{percentile(command_ms, .99):>8.2f} {percentile(add_ms, .5):>8.2f} "
              f"{percentile(add_ms, .99):>8.2f} {cpu_us:>8.0f}  "
              f"{server_cpu / wall:>6.2f} {broker_cpu / wall:>6.2f} {client_cpu / wall:>6.2f}",
              flush=True)
        figures.append((clients, rate, cpu_us))
        if spy is not None:
            spy.wait()
    if queued:
        rate = asyncio.run(fill(server.port, queued, "resident", side=side))
        time.sleep(2)
        print(f"queued {queued:,} jobs at {rate:,.0f} adds/s (pipelined, 16 conns); "
              f"server RSS {sum(rss_mib(s.process.pid) for s in servers):.0f} MiB",
              flush=True)
    return figures


def side_by_side(figures: dict[str, list[list[tuple[int, float, float]]]]) -> str:
    """Every variant's cycles/s and CPU per command at each concurrency, the mean of its
    rounds, in one table (the last variant, the plain one, is the reference)."""
    labels = list(figures)
    reference = labels[-1]
    lines = ["side by side (mean of rounds): cycles/s, server CPU per command (us), "
             f"and cycles/s relative to {reference!r}"]
    lines.append(f"{'clients':>7}  " + "  ".join(f"{label[-28:]:>28}" for label in labels))

    def mean(label: str, index: int, column: int) -> float:
        values = [rounds[index][column] for rounds in figures[label]]
        return sum(values) / len(values)

    for index, (clients, _, _) in enumerate(figures[reference][0]):
        cells = []
        for label in labels:
            rate, cpu = mean(label, index, 1), mean(label, index, 2)
            ratio = rate / max(mean(reference, index, 1), 1e-9)
            cells.append(f"{f'{rate:,.0f}/s {cpu:,.0f}us x{ratio:.2f}':>28}")
        lines.append(f"{clients:>7}  " + "  ".join(cells))
    return "\n".join(lines)


def label_of(partitions: int, processes: int) -> str:
    return (f"this checkout, {partitions} partitions"
            + (f", {processes} processes" if processes > 1 else ""))


SERVER_ACCOUNTS = ("wrote ",)  # its last line, at stop


def server_account(server) -> str:
    """The stopped server's own lines about what it wrote (eventq/run/serve.py on_stop)."""
    return "\n".join(line for line in server.log_tail(200).splitlines()
                     if any(text in line for text in SERVER_ACCOUNTS))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--concurrency", default="1,16,64,256")
    parser.add_argument("--partitions", default=str(Settings().partitions),
                        help="partition counts, comma-separated: one variant each "
                        "(default: make run's)")
    parser.add_argument("--processes", default="1",
                        help="numbers of eventq processes, comma-separated: one variant each")
    parser.add_argument("--before", metavar="REF", help="also measure git revision REF first")
    parser.add_argument("--metrics-off", action="store_true",
                        help="also measure this checkout with --http-port off (no metrics, "
                        "no live statistics), alternating with metrics on")
    parser.add_argument("--also", metavar="SETTING=VALUE", action="append", default=[],
                        help="also measure this checkout with this setting (e.g. "
                        "write-timeout-ms=10000), interleaved; may be repeated")
    parser.add_argument("--security", nargs="?", const=",".join(SECURITY_VARIANTS),
                        metavar="VARIANTS",
                        help="also measure with tokens, TLS, and both (or the comma-separated "
                        f"subset of {','.join(SECURITY_VARIANTS)} given), interleaved")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every variant this many times, interleaved")
    parser.add_argument("--profile", metavar="DIR", type=Path,
                        help="py-spy the server during each load; summaries printed at the end")
    parser.add_argument("--native", action="store_true",
                        help="py-spy --native (C frames; pauses the server to sample)")
    args = parser.parse_args()
    concurrency = [int(c) for c in args.concurrency.split(",")]
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    from tools.servers import ServerProcess, test_broker_config

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        config = broker.BrokerConfig(**{**config.__dict__, "heap_mb": 1024})
        broker_pid = broker.start(config).pid
        partition_counts = [int(n) for n in args.partitions.split(",")]
        process_counts = [int(n) for n in args.processes.split(",")]
        runs = [(label_of(partitions, processes), None, "after",
                 {"partitions": partitions, "processes": processes})
                for partitions in partition_counts for processes in process_counts]
        if args.metrics_off:
            runs.insert(0, ("metrics off", None, "off", {"http_port": "off"}))
        security = None
        if args.security:
            security = Security(home)
            for variant in reversed(args.security.split(",")):
                if variant not in SECURITY_VARIANTS:
                    parser.error(f"--security: {variant!r} is none of {SECURITY_VARIANTS}")
                runs.insert(0, (f"this checkout, {variant}", None,
                                variant.replace("+", "-"), {"security": variant}))
        for also in args.also:
            setting, _, value = also.partition("=")
            runs.insert(0, (f"this checkout, {also}", None, "also", {setting: value}))
        if args.before:
            runs.insert(0, (f"git {args.before}", worktree(args.before, home), "before", {}))
        runs = runs * args.rounds
        figures: dict[str, list[list[tuple[int, float, float]]]] = {}
        try:
            for number, (label, source, prefix, extra) in enumerate(runs):
                prefix = f"{prefix}{number}"
                extra = {"partitions": partition_counts[0], "processes": 1, **extra}
                processes = extra.pop("processes")
                variant = extra.pop("security", None)
                if variant is not None:
                    extra.update(security.settings(variant))
                servers = [ServerProcess(config.bootstrap, prefix, home / f"{prefix}-{index}",
                                         source=source, **extra)
                           for index in range(processes)]
                side = PLAIN
                if variant is not None:
                    side = security.client(variant)
                    for server in servers:
                        security.ready(server, variant)
                try:
                    servers[0].create_topics()
                    for server in servers:
                        server.launch()
                    for server in servers:
                        server.wait_ready(time.monotonic() + 120)
                    figures.setdefault(label, []).append(measure(
                        servers, concurrency, args.seconds, args.queued, label,
                        args.profile, broker_pid, args.native, side))
                finally:
                    for server in servers:
                        server.stop()
                for server in servers:
                    print(server_account(server), flush=True)
            if len(figures) > 1:
                print(side_by_side(figures), flush=True)
        finally:
            broker.stop(config)
            for source in {source for _, source, _, _ in runs if source is not None}:
                remove_worktree(source)
    if args.profile:
        for path in sorted(args.profile.glob("*.txt")):
            if path.stat().st_size:
                print(summarize_profile(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
