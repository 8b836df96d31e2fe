"""A planned restart as a user does one (docs/operations.md, "Planned restarts"):
`EVENTQ_PROCESSES=3 make run` (here `eventq up --processes 3` on free ports, one broker,
make run's defaults), the recorded load of tools/faults/load.py on all three processes,
and the second process (9923 in make run) ended with SIGTERM ``--restarts`` times; `eventq
up` starts it again, and the next restart waits until it serves and a few seconds more.

What it prints, per run: the client errors while a process stopped and started again
(by reply code, and by the process the client talked to: the stopping one or the
others), and the attempts spent on a lease that no client received (a job's
``attempts`` at the read-back minus the leases of it that clients got: with max-attempts
1 such a job fails without ever having run). Then the checker's verdict over the whole
history (tools/faults/checker.py) and the live digest against a fold of the log.

    .venv/bin/python bench/planned_restart.py [--runs 1] [--seed 1] [--restarts 3] [--before REF]

With ``--before REF`` each run is made twice, first with the code of git revision REF
(a temporary worktree), then with this checkout's, on the same seed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.faults.campaign import settled_digests  # noqa: E402
from tools.faults.checker import check, summary, violations_text  # noqa: E402
from tools.faults.history import OK, Clock, HistoryWriter, Op, ReadBack, Recorder  # noqa: E402
from tools.faults.load import LoadConfig, created_job_ids, read_back, run_load  # noqa: E402
from tools.revision import remove_worktree, worktree  # noqa: E402
from tools.up_run import ROOT as THIS_CHECKOUT  # noqa: E402
from tools.up_run import UpRun  # noqa: E402

PROCESSES = 3
RESTARTED = 1  # the second process (9923 in make run)
WARM_UP_S = 5.0
SETTLE_AFTER_S = 5.0  # after the restarted process serves, before the next restart


@dataclass(frozen=True)
class Window:
    """From a SIGTERM to the restarted process serving again (client clock)."""

    begin_s: float
    end_s: float


# Error texts that say nothing happened (eventq's NotWritten and its refusals: retrying
# is safe). A figure's split only: the checker judges by reply codes alone.
NOTHING_HAPPENED = ("nothing happened", "could not be reached", "still recovering",
                    "not served by this process right now")


def error_code(op: Op) -> str:
    """``-SERVER-ERROR`` split by what it says (``... (nothing happened)`` or ``... (may
    have)``), another code as it is, or ``connection`` when no reply came."""
    error = op.reply.error or ""
    if not error.startswith("-"):
        return "connection"  # no reply: the connection ended or the client gave up
    code = error.split(" ", 1)[0]
    if code == "-SERVER-ERROR":
        said = any(text in error for text in NOTHING_HAPPENED)
        return f"{code} ({'nothing happened' if said else 'may have'})"
    return code


def client_errors(ops: Iterable[Op], windows: Iterable[Window]) -> Counter[tuple[str, str]]:
    """Errors of requests invoked inside a window, by (where, code): ``where`` is
    ``stopping`` for the restarted process's clients, ``others`` for the rest. Errors a
    queue's state explains (-NOT-FOUND, -TIMEOUT, -CLIENT-ERROR) are not the restart's."""
    spans = list(windows)
    counts: Counter[tuple[str, str]] = Counter()
    for op in ops:
        if op.outcome == OK or not any(w.begin_s <= op.invoke_s <= w.end_s for w in spans):
            continue
        code = error_code(op)
        if code in ("-NOT-FOUND", "-TIMEOUT", "-CLIENT-ERROR"):
            continue
        counts["stopping" if op.process == RESTARTED else "others", code] += 1
    return counts


def spent_attempts(ops: Iterable[Op], reads: Mapping[str, ReadBack]) -> dict[str, int]:
    """Per job, the attempts its read-back counts beyond the leases clients received."""
    received: Counter[str] = Counter(
        op.job_id for op in ops if op.kind == "lease" and op.outcome == OK and op.job_id)
    spent = {}
    for job_id, read in reads.items():
        attempts = read.number("attempts") if read.status == "found" else None
        if attempts is not None and attempts > received[job_id]:
            spent[job_id] = attempts - received[job_id]
    return spent


async def restart_repeatedly(up: UpRun, restarts: int, clock: Clock,
                             windows: list[Window], serve_again_s: list[float]) -> None:
    await asyncio.sleep(WARM_UP_S)
    for _ in range(restarts):
        pid = up.serve_pid(RESTARTED)
        begin = clock.now()
        os.kill(pid, signal.SIGTERM)
        await up.wait_restarted(RESTARTED, pid)
        await up.wait_serving(up.ports)
        windows.append(Window(begin, clock.now()))
        serve_again_s.append(clock.now() - begin)
        await asyncio.sleep(SETTLE_AFTER_S)


async def one_run(seed: int, restarts: int, run_dir: Path,
                  source: Path = THIS_CHECKOUT) -> tuple[int, str]:
    up = UpRun(run_dir, PROCESSES, source=source)
    try:
        await up.start()
        windows: list[Window] = []
        serve_again_s: list[float] = []
        with HistoryWriter(run_dir / "history.jsonl") as sink:
            recorder = Recorder(Clock(), sink)
            config = LoadConfig(ports=tuple(up.ports), duration_s=WARM_UP_S + restarts * 25,
                                seed=seed, producers_per_process=2, workers_per_process=2,
                                readers_per_process=1)
            began = time.monotonic()
            ops, _ = await asyncio.gather(
                run_load(config, recorder),
                restart_repeatedly(up, restarts, recorder.clock, windows, serve_again_s))
            load_s = time.monotonic() - began
            read_list = await read_back(up.ports[0], created_job_ids(ops), clock=recorder.clock)
            live, derived = await settled_digests(up.ports[0], up.bootstrap, "eventq.commands")
        reads = read_list
        violations = check(ops, reads, live, derived)
        errors = client_errors(ops, windows)
        spent = spent_attempts(ops, reads)
        counts = summary(ops)
        lines = [
            f"seed {seed}: {counts.total:,} operations in {load_s:.0f}s, {restarts} planned "
            f"restarts (serving again after {', '.join(f'{s:.1f}' for s in serve_again_s)} s)",
            "  client errors during the restarts: " + (", ".join(
                f"{where} {code} {n}" for (where, code), n in sorted(errors.items())) or "none"),
            f"  attempts spent on a lease no client received: {sum(spent.values())} "
            f"({len(spent)} jobs){': ' + ', '.join(sorted(spent)[:5]) if spent else ''}",
            f"  per restart: {sum(errors.values()) / restarts:.1f} client errors, "
            f"{sum(spent.values()) / restarts:.1f} spent attempts",
            f"  checker: {len(violations)} violations; live digest "
            f"{'=' if live == derived else '!='} fold of eventq.commands",
        ]
        if violations:
            lines.append(violations_text(violations))
        return len(violations), "\n".join(lines)
    finally:
        up.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--before", metavar="REF", help="also run git revision REF, first")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="eventq-restart-"))
    sides = [("this checkout", THIS_CHECKOUT)]
    if args.before:
        sides.insert(0, (f"git {args.before}", worktree(args.before, out)))
    failed = 0
    try:
        for n in range(args.runs):
            seed = args.seed + n
            for label, source in sides:
                run_dir = out / f"{label.replace(' ', '-')}-seed-{seed}"
                count, text = asyncio.run(one_run(seed, args.restarts, run_dir, source))
                failed += count > 0
                print(f"[{label}] {text}", flush=True)
    finally:
        if args.before:
            remove_worktree(sides[0][1])
    print(f"{args.runs} runs, violations in {failed}; files in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
