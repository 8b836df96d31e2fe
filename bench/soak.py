"""Soak: `make run`'s server under light mixed load for longer than every timer in it.

Starts `eventq up` with `make run`'s defaults (its partitions, the dashboard and metrics
on; only the ports and the data directory are its own), drives a light mixed load from
this process (adds, leases, completes, fails, TTR expiries, TTL expiries, schedules,
runs, results, deletes, inspects, dashboard and /metrics reads), samples the server's
memory and open files, then stops it with Ctrl-C and reads its log (docs/architecture.md,
"Logging"):

- no ERROR and no WARNING line in the log of normal operation (INFO is for normal
  events, WARNING for something an operator should look at, ERROR for something broken),
  and no traceback, from the start to the stop;
- memory and open files flat: after the warm-up, the last samples' resident memory grew
  by at most ``RSS_GROWTH_LIMIT_MIB`` and the open files by at most ``FDS_GROWTH_LIMIT``;
- every request answered (an error reply is an answer; ``-SERVER-ERROR`` is not normal);
- the stop is clean (exit status 0).

It must outlast faust's stall detectors (``stream_processing_timeout`` and
``broker_commit_livelock_soft_timeout``: 300 s) and Kafka's 5-minute log-retention
check: 6 minutes at least. Prints a line every ``REPORT_EVERY_S`` and a summary;
exits 1 if any check failed. ``--json`` writes the figures for a test to read.

    .venv/bin/python bench/soak.py --minutes 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from eventq.client.raw import RawClient  # noqa: E402
from eventq.errors import EventqError, ServerError  # noqa: E402
from eventq.run import die_with_parent  # noqa: E402

START_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 90.0
REPORT_EVERY_S = 30.0
SAMPLE_EVERY_S = 5.0
WARM_UP_FRACTION = 0.25  # memory and files are compared from here to the end
RSS_GROWTH_LIMIT_MIB = 40.0
FDS_GROWTH_LIMIT = 8
REPLY_MARGIN_S = 30.0  # a request unanswered this long past its own wait is unanswered
# Lines of a normal run's log that say something is wrong.
ALARM = re.compile(r"\[(WARNING|ERROR|CRITICAL)\]|Traceback \(most recent call last\)")


@dataclass
class Tally:
    requests: int = 0
    answered: int = 0
    unanswered: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    by_verb: dict[str, int] = field(default_factory=dict)

    def count(self, verb: str) -> None:
        self.requests += 1
        self.by_verb[verb] = self.by_verb.get(verb, 0) + 1


@dataclass
class Sample:
    at_s: float
    rss_mib: float
    fds: int


class Load:
    """Light mixed load, a few requests a second of each kind, each on its own
    connection's actor so that a blocking lease does not hold the others."""

    def __init__(self, port: int, http: str, tally: Tally) -> None:
        self.port = port
        self.http = http
        self.tally = tally
        self.stopping = asyncio.Event()

    async def ask(self, client: RawClient, verb: str, call, wait_s: float = 0.0):
        """One request: answered (a value or an error reply) or recorded unanswered."""
        self.tally.count(verb)
        try:
            value = await asyncio.wait_for(call, wait_s + REPLY_MARGIN_S)
        except ServerError as error:
            self.tally.answered += 1
            self.tally.server_errors.append(f"{verb}: {error}")
            return error
        except EventqError as error:  # -TIMED-OUT, -NOT-FOUND: answers
            self.tally.answered += 1
            return error
        except (asyncio.TimeoutError, OSError, asyncio.IncompleteReadError) as error:
            self.tally.unanswered.append(f"{verb}: {type(error).__name__} {error}")
            raise
        self.tally.answered += 1
        return value

    async def actor(self, step, pause_s: float) -> None:
        while not self.stopping.is_set():
            try:
                async with await RawClient.connect(port=self.port) as client:
                    while not self.stopping.is_set():
                        await step(client)
                        await self.pause(pause_s)
            except (asyncio.TimeoutError, OSError, asyncio.IncompleteReadError):
                await self.pause(1.0)  # counted as unanswered; a new connection

    async def pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    # -- the actors' steps -------------------------------------------------------------

    async def produce(self, client: RawClient) -> None:
        await self.ask(client, "add", client.add(uuid.uuid4(), "soak", 5000, 600_000, b"work"))

    async def work(self, client: RawClient) -> None:
        leased = await self.ask(client, "lease", client.lease(["soak", "soak-late"], 1000), 1.0)
        if isinstance(leased, EventqError):
            return
        if random.random() < 0.1:
            await self.ask(client, "fail", client.fail(leased.id, b"no"))
        else:
            await self.ask(client, "complete", client.complete(leased.id, b"done"))

    async def abandon(self, client: RawClient) -> None:
        """A worker that leases and vanishes: the job's TTR expires (the timer's
        command), it is retried and then dropped after its attempts."""
        await self.ask(client, "add", client.add(uuid.uuid4(), "soak-ttr", 1000, 600_000,
                                                 b"lost", max_attempts=2))
        await self.ask(client, "lease", client.lease("soak-ttr", 1000), 1.0)

    async def expire(self, client: RawClient) -> None:
        """Jobs nobody leases, expiring by their TTL (the timer's other command)."""
        await self.ask(client, "add", client.add(uuid.uuid4(), "soak-ttl", 1000, 2000, b"old"))

    async def schedule(self, client: RawClient) -> None:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 5))
        await self.ask(client, "schedule", client.schedule(
            uuid.uuid4(), "soak-late", 5000, 600_000, at, b"later"))

    async def run_and_result(self, client: RawClient) -> None:
        job_id = uuid.uuid4()
        await self.ask(client, "add", client.add(job_id, "soak", 5000, 600_000, b"r"))
        await self.ask(client, "result", client.result(job_id, 3000), 3.0)
        await self.ask(client, "run", client.run(uuid.uuid4(), "soak", 5000, 2000, b"x"), 2.0)

    async def inspect(self, client: RawClient) -> None:
        await self.ask(client, "inspect queues", client.inspect_queues())
        await self.ask(client, "inspect server", client.inspect_server())
        await self.ask(client, "inspect queue", client.inspect_queue("soak"))
        job_id = uuid.uuid4()
        await self.ask(client, "add", client.add(job_id, "soak-del", 5000, 600_000, b"d"))
        await self.ask(client, "inspect job", client.inspect_job(job_id))
        await self.ask(client, "delete", client.delete(job_id))

    async def web(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopping.is_set():
            for path in ("/", "/metrics", "/queues/soak"):
                self.tally.count(f"GET {path}")
                try:
                    await loop.run_in_executor(None, fetch, self.http + path)
                    self.tally.answered += 1
                except OSError as error:
                    if getattr(error, "code", 0) and error.code < 500:  # an HTTP answer
                        self.tally.answered += 1
                    else:
                        self.tally.unanswered.append(f"GET {path}: {error}")
            await self.pause(10.0)

    async def run(self, seconds: float) -> None:
        actors = [
            self.actor(self.produce, 0.1),
            self.actor(self.work, 0.05),
            self.actor(self.work, 0.05),
            self.actor(self.abandon, 10.0),
            self.actor(self.expire, 2.0),
            self.actor(self.schedule, 2.0),
            self.actor(self.run_and_result, 1.0),
            self.actor(self.inspect, 3.0),
            self.web(),
        ]
        tasks = [asyncio.ensure_future(actor) for actor in actors]
        await self.pause(seconds)
        self.stopping.set()
        await asyncio.wait(tasks, timeout=REPLY_MARGIN_S + 5)
        for task in tasks:
            task.cancel()


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=REPLY_MARGIN_S) as response:
        return response.read()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the server process ----------------------------------------------------------------

def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc: ``eventq up`` -> serve, broker)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def is_eventq_server(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"serve" in command and not any(b"java" in part for part in command[:1])


def sample(pids: list[int], at_s: float) -> Sample:
    rss_kib, fds = 0, 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rss_kib += int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, AttributeError):
            pass
    return Sample(round(at_s, 1), round(rss_kib / 1024, 1), fds)


def start_up(data_dir: Path, log_path: Path, port: int, http_port: int) -> subprocess.Popen:
    flags = ["--data-dir", str(data_dir), "--listen-port", str(port),
             "--kafka-port", str(free_port()), "--controller-port", str(free_port()),
             "--http-port", f"127.0.0.1:{http_port}"]
    log = open(log_path, "w")
    # Ends with this process however it ends (a killed soak leaves nothing serving).
    command = die_with_parent.command(os.getpid(), [sys.executable, "-m", "eventq.cli", "up", *flags])
    return subprocess.Popen(command, cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


def wait_serving(process: subprocess.Popen, log_path: Path) -> float:
    began = time.monotonic()
    while time.monotonic() - began < START_TIMEOUT_S:
        text = log_path.read_text(errors="replace")
        if "serving the workq protocol" in text and "eventq dashboard on" in text:
            return time.monotonic() - began
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise SystemExit(f"eventq up did not serve within {START_TIMEOUT_S:g}s:\n"
                     + log_path.read_text(errors="replace")[-4000:])


def server_pids(up_pid: int) -> list[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = [pid for pid in descendants(up_pid) if is_eventq_server(pid)]
        if pids:
            return pids
        time.sleep(0.5)
    raise SystemExit("no `eventq serve` process found below `eventq up`")


async def sample_while(pids: list[int], load: Load, samples: list[Sample], began: float,
                       tally: Tally, log_path: Path) -> None:
    reported = time.monotonic()
    while not load.stopping.is_set():
        samples.append(sample(pids, time.monotonic() - began))
        if time.monotonic() - reported >= REPORT_EVERY_S:
            reported = time.monotonic()
            last = samples[-1]
            alarms = len(alarm_lines(log_path.read_text(errors="replace")))
            print(f"  {last.at_s:6.0f}s  {tally.requests:,} requests, {tally.answered:,} "
                  f"answered, {len(tally.unanswered)} unanswered  rss {last.rss_mib:.0f} MiB  "
                  f"fds {last.fds}  alarm lines {alarms}", flush=True)
        await load.pause(SAMPLE_EVERY_S)


def alarm_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if ALARM.search(line)]


def growth(samples: list[Sample], seconds: float) -> tuple[float, int]:
    """RSS (MiB) and open files gained from the warm-up's end to the run's end: the
    medians of the first and last three samples after the warm-up, so that one
    sample's noise does not decide."""
    after = [s for s in samples if s.at_s >= seconds * WARM_UP_FRACTION]
    if len(after) < 6:
        return 0.0, 0
    def median(values):
        return sorted(values)[len(values) // 2]
    first, last = after[:3], after[-3:]
    return (median([s.rss_mib for s in last]) - median([s.rss_mib for s in first]),
            median([s.fds for s in last]) - median([s.fds for s in first]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where the broker and the state go (default: a new temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="eventq-soak-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "eventq-up.log"
    seconds = args.minutes * 60
    port, http_port = free_port(), free_port()
    print(f"soak: `eventq up` for {args.minutes:g} min under light mixed load; log in "
          f"{log_path}", flush=True)
    process = start_up(data_dir, log_path, port, http_port)
    tally, samples = Tally(), []
    try:
        started_s = wait_serving(process, log_path)
        pids = server_pids(process.pid)
        print(f"  serving after {started_s:.1f}s; server pids {pids}", flush=True)
        load = Load(port, f"http://127.0.0.1:{http_port}", tally)
        began = time.monotonic()

        async def soak() -> None:
            sampler = asyncio.ensure_future(
                sample_while(pids, load, samples, began, tally, log_path))
            await load.run(seconds)
            await sampler

        asyncio.run(soak())
        process.send_signal(signal.SIGINT)  # Ctrl-C, as a user stops `make run`
        exit_status = process.wait(timeout=STOP_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log_path.read_text(errors="replace")
    rss_growth, fds_growth = growth(samples, seconds)
    figures = {
        "minutes": args.minutes, "start_s": round(started_s, 1), "exit_status": exit_status,
        "requests": tally.requests, "answered": tally.answered,
        "unanswered": tally.unanswered[:20], "server_errors": tally.server_errors[:20],
        "by_verb": tally.by_verb, "alarm_lines": alarm_lines(text)[:50],
        "rss_growth_mib": round(rss_growth, 1), "fds_growth": fds_growth,
        "samples": [asdict(s) for s in samples], "log": str(log_path),
    }
    problems = judge(figures)
    figures["problems"] = problems
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    first, last = samples[0], samples[-1]
    print(f"soak: {tally.requests:,} requests, {tally.answered:,} answered; rss "
          f"{first.rss_mib:.0f} -> {last.rss_mib:.0f} MiB (after warm-up {rss_growth:+.1f}); "
          f"open files {first.fds} -> {last.fds} ({fds_growth:+d}); "
          f"{len(figures['alarm_lines'])} WARNING/ERROR lines; stop status {exit_status}")
    for problem in problems:
        print(f"  FAILED: {problem}")
    return 1 if problems else 0


def judge(figures: dict) -> list[str]:
    problems = []
    if figures["alarm_lines"]:
        problems.append("the log has WARNING/ERROR lines:\n    "
                        + "\n    ".join(figures["alarm_lines"][:10]))
    if figures["unanswered"]:
        problems.append(f"{len(figures['unanswered'])} requests unanswered: "
                        f"{figures['unanswered'][:5]}")
    if figures["server_errors"]:
        problems.append(f"-SERVER-ERROR replies: {figures['server_errors'][:5]}")
    if figures["rss_growth_mib"] > RSS_GROWTH_LIMIT_MIB:
        problems.append(f"memory grew {figures['rss_growth_mib']} MiB after the warm-up "
                        f"(limit {RSS_GROWTH_LIMIT_MIB:g})")
    if figures["fds_growth"] > FDS_GROWTH_LIMIT:
        problems.append(f"open files grew by {figures['fds_growth']} after the warm-up "
                        f"(limit {FDS_GROWTH_LIMIT})")
    if figures["exit_status"] != 0:
        problems.append(f"`eventq up` exited with status {figures['exit_status']} on Ctrl-C")
    return problems


if __name__ == "__main__":
    sys.exit(main())
