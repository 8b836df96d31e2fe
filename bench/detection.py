"""Detection power of the fault campaign (docs/reliability.md, "Detection power"): each
bug the campaign once found is put back into a worktree of this revision
(tools/faults/mutants.py), and campaign runs go against it until one finds it (a
violation) or ``--runs`` are done. Prints, per mutant, the run that found it and what
the checker said; each run is a line of ``--results`` with its mutant named.

    .venv/bin/python bench/detection.py --runs 5 --seconds 60 --seed 9001
    .venv/bin/python bench/detection.py --mutants 3524,4116 --kinds cut-leaders,kill-process

Every mutant starts from the same seed, so each meets the same fault plans. Then (unless
``--no-control``) every seed that found a mutant is run again without one: a finding the
control shares is the campaign's or today's code's, not the mutant's, and the table
says so. Exit status 1 if a mutant was not found (the campaign lost power), a control
failed, or a mutant no longer applies.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.faults.campaign import ClusterDidNotStart, run_campaign  # noqa: E402
from tools.faults.mutants import BY_NAME, MutantStale, apply  # noqa: E402
from tools.faults.plan import KINDS  # noqa: E402
from tools.faults.report import (  # noqa: E402
    BROKE_OFF,
    DID_NOT_START,
    append,
    code_of,
    detection,
    failed_record,
    found_bug,
    load,
    mix_name,
    run_record,
)
from tools.revision import remove_worktree, worktree  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mutants", default=None,
                        help=f"comma-separated (default: all of {','.join(BY_NAME)})")
    parser.add_argument("--runs", type=int, default=5, help="at most, per mutant")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=9001, help="each mutant's first seed")
    parser.add_argument("--kinds", default=None, help="fault kinds to draw from (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-control", action="store_true",
                        help="do not run the finding seeds again without a mutant")
    parser.add_argument("--results", type=Path, default=None,
                        help="append each run's JSON line here (default: DIR/results.jsonl)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.mutants.split(",")] if args.mutants else list(BY_NAME)
    unknown = sorted(set(names) - set(BY_NAME))
    if unknown:
        parser.error(f"unknown mutants {unknown}; known: {sorted(BY_NAME)}")
    kinds = tuple(k.strip() for k in args.kinds.split(",")) if args.kinds else None
    if kinds and set(kinds) - set(KINDS):
        parser.error(f"unknown fault kinds {sorted(set(kinds) - set(KINDS))}")
    out = args.out or Path(tempfile.mkdtemp(prefix="eventq-detection-"))
    results = args.results or out / "results.jsonl"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    code, mix = code_of(ROOT), mix_name(kinds)
    print(f"detection power: mutants {','.join(names)}, at most {args.runs} runs of "
          f"{args.seconds:g}s each from seed {args.seed} on {head[:10]}; files in {out}; "
          f"results appended to {results}", flush=True)
    stale, lost, finders = [], [], set()
    began = time.monotonic()
    for name in names:
        mutant = BY_NAME[name]
        path = worktree(head, out / f"mutant-{name}")
        try:
            apply(mutant, path)
        except MutantStale as error:
            print(f"mutant {name}: {error}", flush=True)
            stale.append(name)
            remove_worktree(path)
            continue
        print(f"mutant {name} ({mutant.what}; fixed by {mutant.fixed_by})", flush=True)
        found = False
        for seed in range(args.seed, args.seed + args.runs):
            run_dir = out / f"mutant-{name}" / f"seed-{seed}"
            try:
                report = asyncio.run(run_campaign(run_dir, seed, args.seconds,
                                                  log=lambda line: print(line, flush=True),
                                                  source=path, kinds=kinds))
            except ClusterDidNotStart as error:
                record = failed_record(seed, args.seconds, mix=mix, code=code, mutant=name,
                                       status=DID_NOT_START, why=str(error))
            except Exception as error:  # broke off: the mutant may well be why
                record = failed_record(seed, args.seconds, mix=mix, code=code, mutant=name,
                                       status=BROKE_OFF, why=f"{type(error).__name__}: {error}")
            else:
                print(report.text(), flush=True)
                record = run_record(report, mix=mix, code=code, mutant=name)
            append(results, record)
            if record["status"] == DID_NOT_START:
                print(f"  seed {seed}: the cluster did not start; not counted", flush=True)
                continue
            if found_bug(record):
                print(f"mutant {name}: found by seed {seed}", flush=True)
                finders.add(seed)
                found = True
                break
        if not found:
            lost.append(name)
            print(f"mutant {name}: not found in {args.runs} runs", flush=True)
        remove_worktree(path)
    unclean = []
    for seed in sorted(finders) if not args.no_control else ():
        print(f"control: seed {seed} without a mutant", flush=True)
        try:
            report = asyncio.run(run_campaign(
                out / "control" / f"seed-{seed}", seed, args.seconds,
                log=lambda line: print(line, flush=True), source=ROOT, kinds=kinds))
        except ClusterDidNotStart as error:
            print(f"  the cluster did not start ({error}); no control", flush=True)
            continue
        print(report.text(), flush=True)
        record = run_record(report, mix=mix, code=code)
        append(results, record)
        if found_bug(record):
            unclean.append(seed)
    print(f"\n{len(names)} mutants in {time.monotonic() - began:.0f}s")
    print(detection([r for r in load([results])
                     if r.get("mutant") in names or r["seed"] in finders]))
    if unclean:
        print(f"controls that failed (their findings are not the mutants'): {unclean}")
    if stale:
        print(f"no longer apply (follow their fixes): {stale}")
    return 1 if stale or lost or unclean else 0


if __name__ == "__main__":
    raise SystemExit(main())
