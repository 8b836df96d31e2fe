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
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
from tools.up_run import UpRun  # noqa: E402

PROCESSES = 3
PAUSED = 1  # the second process (9923 in make run)
CLIENT_PROCESSES = (0, 2)  # clients on the first and the third (9922 and 9924)


async def one_run(seed: int, pause_s: float, pauses: int, run_dir: Path) -> tuple[int, str]:
    up = UpRun(run_dir, PROCESSES)
    ports = up.ports
    try:
        await up.start()
        paused_pid = up.serve_pid(PAUSED)
        with HistoryWriter(run_dir / "history.jsonl") as sink:
            recorder = Recorder(Clock(), sink)
            config = LoadConfig(
                ports=tuple(ports[i] for i in CLIENT_PROCESSES),
                duration_s=5 + pauses * (pause_s + 12), seed=seed,
                producers_per_process=3, workers_per_process=3, readers_per_process=2,
                bulk=BulkTarget(up.bootstrap, "eventq.bulk", up.partitions))

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
            live, derived = await settled_digests(ports[0], up.bootstrap, "eventq.commands")
        violations = check(ops, reads, live, derived)
        violations += await asyncio.to_thread(
            changelog_violations, up.bootstrap, "eventq", "eventq.commands", "eventq.jobs")
        counts = summary(ops)
        text = (f"seed {seed}: {counts.total:,} operations ({counts.outcome_total('info')} "
                f"indeterminate), {len(violations)} violations; live digest "
                f"{'=' if live == derived else '!='} fold of eventq.commands")
        if violations:
            text += "\n" + violations_text(violations)
        return len(violations), text + "\n" + counts.text()
    finally:
        up.stop()


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
