"""The fault campaign (docs/fencing.md, "The fault campaign"): runs of a proxied
3-broker cluster (replication 3, 2 in sync) and 3 eventq processes under a recorded
mixed load, with a random schedule of faults from each run's seed (kill -9 and restart
of an eventq process or a broker; SIGSTOP of an eventq process past its session timeout;
an eventq process cut off from the brokers by blackhole, reset or delay, then healed; a
broker cut off from the other brokers; sometimes two at once), then every check of
tools/faults/checker.py over the history, the live digest against a fold of the command
log, and the changelog against that fold (tools/faults/campaign.py says what each fault
and check is).

    .venv/bin/python bench/faults.py --runs 10 --seconds 60 --seed 1 [--out DIR] [--keep]
    .venv/bin/python bench/faults.py --kinds graceful-restart --runs 3 --seconds 40

``--kinds`` (comma-separated; ``--list-kinds`` names them, tools/faults/plan.py says
what each does) draws every fault of a run from those kinds only, so one kind's
figure stands alone; the default draws from all. ``--mix`` names the report's mixes
instead (tools/faults/plan.py ``MIXES``: all, processes, network, brokers), several
comma-separated taking turns run by run:

    .venv/bin/python bench/faults.py --runs 40 --mix all,processes,network,brokers \
        --results bench/results/fault-campaign.jsonl

Each run is also one JSON line appended to ``--results`` (default DIR/results.jsonl;
tools/faults/report.py says what it holds), and ``--report FILE ...`` prints the tables
of docs/reliability.md, "Results" from such files (``--last N``: the last N runs only):

    .venv/bin/python bench/faults.py --report bench/results/fault-campaign.jsonl --last 300

Per run it prints the faults and the evidence that each took effect, the operations
and their outcomes, every violation with the seed that replays it, and the time to
serve again after each fault; at the end a table over all runs. Exit status 1 if any
run had a violation (a fault without evidence of its effect is one), broke off, or
could not run because the cluster did not start. Each run's history (one JSON line per
operation, the read-back, the digests and the faults' evidence) is kept in
DIR/seed-K/.
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

from tools.faults.campaign import (  # noqa: E402
    SERVE_BOUND_S,
    ClusterDidNotStart,
    RunReport,
    run_campaign,
)
from tools.faults.plan import KINDS, MIXES  # noqa: E402
from tools.faults.report import (  # noqa: E402
    BROKE_OFF,
    DID_NOT_START,
    append,
    code_of,
    detection,
    failed_record,
    last,
    load,
    mix_name,
    run_record,
    tables,
)


def row(report: RunReport) -> str:
    ops = report.counts
    total = sum(sum(v.values()) for v in ops.values())
    outcome = {k: sum(v.get(k, 0) for v in ops.values()) for k in ("ok", "fail", "info")}
    slowest = report.slowest_serve_s
    kinds = sorted({f.kind for f in report.faults})
    return (f"{report.seed:>6} {len(report.faults):>6} {total:>8,} {outcome['ok']:>8,} "
            f"{outcome['fail']:>7,} {outcome['info']:>6,} {len(report.violations):>10} "
            f"{'-' if slowest is None else f'{slowest:.1f}':>9}  {','.join(kinds)}")


HEADER = (f"{'seed':>6} {'faults':>6} {'ops':>8} {'ok':>8} {'fail':>7} {'info':>6} "
          f"{'violations':>10} {'serve(s)':>9}  fault kinds")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1, help="first run's seed (then +1 each)")
    parser.add_argument("--out", type=Path, default=None, help="keeps each run's files")
    parser.add_argument("--keep", action="store_true", help="keep brokers' and servers' data")
    parser.add_argument("--kinds", default=None,
                        help="comma-separated fault kinds to draw from (default: all)")
    parser.add_argument("--mix", default=None,
                        help=f"named mixes taking turns run by run (of {','.join(MIXES)})")
    parser.add_argument("--list-kinds", action="store_true", help="name every kind, then exit")
    parser.add_argument("--results", type=Path, default=None,
                        help="append each run's JSON line here (default: DIR/results.jsonl)")
    parser.add_argument("--report", type=Path, nargs="+", default=None, metavar="FILE",
                        help="print the report's tables from these results files, then exit")
    parser.add_argument("--last", type=int, default=None, help="with --report: the last N runs")
    args = parser.parse_args(argv)
    if args.list_kinds:
        print("\n".join(KINDS))
        return 0
    if args.report:
        try:
            records = load(args.report)
        except (OSError, ValueError) as error:
            parser.error(f"cannot read the results: {error}")
        print(tables(last(records, args.last)))
        if any(r.get("mutant") for r in records):
            print("\n" + detection(records))
        return 0
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip()) if args.kinds else None
    unknown = sorted(set(kinds or ()) - set(KINDS))
    if unknown:
        parser.error(f"unknown fault kinds {unknown}; --list-kinds names them")
    mixes = [m.strip() for m in args.mix.split(",") if m.strip()] if args.mix else []
    if mixes and kinds:
        parser.error("--mix and --kinds each say what to draw from: give one")
    if set(mixes) - set(MIXES):
        parser.error(f"unknown mixes {sorted(set(mixes) - set(MIXES))}; known: {list(MIXES)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="eventq-faults-"))
    results = args.results or out / "results.jsonl"
    code = code_of(ROOT)
    turns = [(m, MIXES[m]) for m in mixes] or [(mix_name(kinds), kinds)]
    print(f"fault campaign: {args.runs} runs of {args.seconds:g}s from seed {args.seed}; "
          f"mixes: {','.join(m for m, _ in turns)}; files in {out}; serving again "
          f"is bounded by {SERVE_BOUND_S:g}s; results appended to {results}", flush=True)
    reports, skipped, broken = [], [], []
    began = time.monotonic()
    for n in range(args.runs):
        seed = args.seed + n
        mix, kinds = turns[n % len(turns)]
        print(f"run seed {seed}: mix {mix}", flush=True)
        # The eventq processes run this checkout's code, whatever the venv points at
        # (a frozen worktree can run a long campaign while the code moves on).
        try:
            report = asyncio.run(run_campaign(out / f"seed-{seed}", seed, args.seconds,
                                              log=lambda line: print(line, flush=True),
                                              keep=args.keep, source=ROOT, kinds=kinds))
        except ClusterDidNotStart as error:  # no run, not a violation
            print(f"run seed {seed}: the cluster did not start ({error}); skipped", flush=True)
            skipped.append(seed)
            append(results, failed_record(seed, args.seconds, mix=mix, code=code,
                                          status=DID_NOT_START, why=str(error)))
            continue
        except Exception as error:  # the run broke off: a failed run, the campaign goes on
            print(f"run seed {seed} broke off ({type(error).__name__}: {error}): a failed run",
                  flush=True)
            broken.append(seed)
            append(results, failed_record(seed, args.seconds, mix=mix, code=code,
                                          status=BROKE_OFF,
                                          why=f"{type(error).__name__}: {error}"))
            continue
        reports.append(report)
        append(results, run_record(report, mix=mix, code=code))
        print(report.text(), flush=True)
        print(f"{HEADER}\n{row(report)}", flush=True)
    print(f"\n{len(reports)} runs in {time.monotonic() - began:.0f}s"
          + (f"; {len(skipped)} did not start: seeds {skipped}" if skipped else ""))
    print(HEADER)
    for report in reports:
        print(row(report))
    failed = sorted([r.seed for r in reports if not r.ok] + broken)
    served = [s.seconds for r in reports for s in r.served if s.seconds is not None]
    print(f"violations in {len(failed)} of {len(reports) + len(broken)} runs"
          f"{': seeds ' + str(failed) if failed else ''}")
    if served:
        print(f"served again after each fault within {max(served):.1f}s (median "
              f"{sorted(served)[len(served) // 2]:.1f}s) over {len(served)} heals")
    if skipped:
        print(f"{len(skipped)} runs did not take place (the cluster did not start): "
              f"seeds {skipped}; no figure stands for them")
    return 1 if failed or skipped else 0


if __name__ == "__main__":
    raise SystemExit(main())
