"""The scenario of docs/fencing.md, "What went wrong without it", as a user runs it:
`EVENTQ_PROCESSES=3 make run` (here `eventq up --processes 3` on free ports, one broker,
make run's defaults), 16 clients (producers, workers and readers of
tools/faults/load.py: add, schedule, run, lease, touch, complete, fail, delete, result,
inspect; 4 queues, TTR 1.5 s or 40 s, TTL 1 h) on the first and third process, while the
second is paused with SIGSTOP for 15 s (past its 6 s session timeout) twice, then
resumed with SIGCONT. Every job is then read back through the first process, the history
is checked (tools/faults/checker.py), and the live digest, the changelog and a fold of
the command log are compared.

    .venv/bin/python bench/paused_owner.py [--runs 3] [--seed 1] [--pause-s 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.settings import Settings  # noqa: E402
from tools.faults.campaign import changelog_violations, settled_digests  # noqa: E402
from tools.faults.checker import check, summary, violations_text  # noqa: E402
from tools.faults.history import Clock, HistoryWriter, Recorder  # noqa: E402
from tools.faults.load import (  # noqa: E402
    BulkTarget,
    LoadConfig,
    created_job_ids,
    read_back,
    run_load,
    wait_bulk_admitted,
)
from tools.ports import consecutive_free_ports  # noqa: E402
from tools.servers import raw_exchange  # noqa: E402

PROCESSES = 3
PARTITIONS = Settings().partitions  # make run's default
PAUSED = 1  # the second process (9923 in make run)
CLIENT_PROCESSES = (0, 2)  # clients on the first and the third (9922 and 9924)
READY_TIMEOUT_S = 240.0


def serving(port: int) -> bool:
    try:
        return raw_exchange(port, b"inspect digest\r\n", timeout_s=3).startswith(b"+OK")
    except OSError:
        return False


def serve_pid(up_pid: int, port: int) -> int:
    """The pid of `eventq serve --listen-port <port>` under `eventq up`."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    for line in out.splitlines()[1:]:
        pid, ppid, args = line.split(None, 2)
        if " serve " in f" {args} " and f"--listen-port {port}" in args:
            return int(pid)
    raise LookupError(f"no eventq serve on port {port}")


async def one_run(seed: int, pause_s: float, pauses: int, run_dir: Path) -> tuple[int, str]:
    first = consecutive_free_ports(PROCESSES)
    kafka = consecutive_free_ports(2)
    ports = [first + i for i in range(PROCESSES)]
    flags = ["--data-dir", str(run_dir), "--listen-port", str(first),
             "--kafka-port", str(kafka), "--controller-port", str(kafka + 1),
             "--processes", str(PROCESSES), "--partitions", str(PARTITIONS),
             "--http-port", "127.0.0.1:0"]
    log_path = run_dir / "up.log"
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        up = subprocess.Popen([sys.executable, "-m", "eventq.cli", "up", *flags],
                              stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    bootstrap = f"127.0.0.1:{kafka}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(serving(p) for p in ports):
            if up.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("eventq up did not serve:\n" + log_path.read_text()[-3000:])
            await asyncio.sleep(0.5)
        paused_pid = serve_pid(up.pid, ports[PAUSED])
        with HistoryWriter(run_dir / "history.jsonl") as sink:
            recorder = Recorder(Clock(), sink)
            config = LoadConfig(
                ports=tuple(ports[i] for i in CLIENT_PROCESSES),
                duration_s=5 + pauses * (pause_s + 12), seed=seed,
                producers_per_process=3, workers_per_process=3, readers_per_process=2,
                bulk=BulkTarget(bootstrap, "eventq.bulk", PARTITIONS))

            async def pause_twice() -> None:
                await asyncio.sleep(5)
                for _ in range(pauses):
                    os.kill(paused_pid, signal.SIGSTOP)
                    await asyncio.sleep(pause_s)
                    os.kill(paused_pid, signal.SIGCONT)
                    await asyncio.sleep(12)

            ops, _ = await asyncio.gather(run_load(config, recorder), pause_twice())
            await wait_bulk_admitted(ports[0])
            reads = await read_back(ports[0], created_job_ids(ops), clock=recorder.clock)
            live, derived = await settled_digests(ports[0], bootstrap, "eventq.commands")
        violations = check(ops, reads, live, derived)
        violations += await asyncio.to_thread(
            changelog_violations, bootstrap, "eventq", "eventq.commands", "eventq.jobs")
        counts = summary(ops)
        text = (f"seed {seed}: {counts.total:,} operations ({counts.outcome_total('info')} "
                f"indeterminate), {len(violations)} violations; live digest "
                f"{'=' if live == derived else '!='} fold of eventq.commands")
        if violations:
            text += "\n" + violations_text(violations)
        return len(violations), text + "\n" + counts.text()
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(120)
        except subprocess.TimeoutExpired:
            up.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pause-s", type=float, default=15.0)
    parser.add_argument("--pauses", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="eventq-paused-"))
    failed = 0
    for n in range(args.runs):
        seed = args.seed + n
        count, text = asyncio.run(one_run(seed, args.pause_s, args.pauses, out / f"seed-{seed}"))
        failed += count > 0
        print(text, flush=True)
    print(f"{args.runs} runs, violations in {failed}; files in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
