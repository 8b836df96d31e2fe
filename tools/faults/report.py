"""The campaign's results as data, and the tables of docs/reliability.md, "Results"
computed from them.

bench/faults.py appends one JSON line per run (``run_record``): its seed, mix, length,
operations and outcomes, each fault with its evidence, each time to serve again, every
violation, and the code it ran (the commit and the git trees of the tested code, so runs
of different code are never pooled unknowingly). A run that did not start or broke off
is a line too: it counts against the campaign, never silently for it.
``tables`` turns such lines back into the report's tables; ``bench/faults.py --report``
prints them."""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

RECORD_VERSION = 1
RAN, DID_NOT_START, BROKE_OFF = "ran", "did-not-start", "broke-off"
STATUSES = (RAN, DID_NOT_START, BROKE_OFF)
ALL_KINDS_MIX = "all"
TESTED_TREES = ("eventq", "streams", "tools/faults")  # the code a run's verdict is about
OUTCOMES = ("ok", "fail", "info")
VIOLATION_MESSAGE_CHARS = 300  # enough to tell one from another; the history has the rest


def code_of(root: Path) -> dict:
    """The commit ``root`` is at, the git tree of each part of the tested code, and
    whether the working tree differs from the commit (a dirty run is not reproducible)."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", *TESTED_TREES))
    return {"commit": git("rev-parse", "HEAD"),
            "trees": {part: git("rev-parse", f"HEAD:{part}") for part in TESTED_TREES},
            "dirty": dirty}


def mix_name(kinds: Iterable[str] | None) -> str:
    """A run's mix: the kinds its faults were drawn from, or every kind."""
    return ",".join(sorted(kinds)) if kinds else ALL_KINDS_MIX


def fault_kind(description: str) -> str:
    """The kind a fault's description (tools/faults/plan.py ``Fault.describe``) names."""
    return description.split(" ", 1)[0]


def run_record(report, *, mix: str, code: dict, mutant: str | None = None) -> dict:
    """One run's line (``report``: a campaign.RunReport; ``mutant``: the bug put back
    into the code it ran, tools/faults/mutants.py)."""
    outcomes = {k: sum(v.get(k, 0) for v in report.counts.values()) for k in OUTCOMES}
    return {
        "version": RECORD_VERSION, "status": RAN, "seed": report.seed,
        "seconds": report.seconds, "mix": mix, "code": code,
        "wall_s": round(report.wall_s, 1),
        "operations": sum(outcomes.values()), "outcomes": outcomes,
        "faults": [{"kind": e["kind"], "fault": e["fault"], "took_effect": e["took_effect"]}
                   for e in report.effects]
        or [{"kind": f.kind, "fault": f.describe(), "took_effect": None}
            for f in report.faults],
        "served": [{"kind": fault_kind(s.fault), "seconds": s.seconds,
                    "interrupted": s.interrupted} for s in report.served],
        "violations": [{"kind": v.kind, "job_id": v.job_id,
                        "message": v.message[:VIOLATION_MESSAGE_CHARS]}
                       for v in report.violations],
        "skipped": [{"kind": f.kind, "fault": f.describe()} for f in report.skipped],
        "restarts": len(report.restarts), "mutant": mutant,
    }


def failed_record(seed: int, seconds: float, *, mix: str, code: dict, status: str,
                  why: str, mutant: str | None = None) -> dict:
    """The line of a run that did not start or broke off."""
    if status not in (DID_NOT_START, BROKE_OFF):
        raise ValueError(f"a failed run's status is {DID_NOT_START} or {BROKE_OFF}, not {status!r}")
    return {"version": RECORD_VERSION, "status": status, "seed": seed, "seconds": seconds,
            "mix": mix, "code": code, "why": why[:VIOLATION_MESSAGE_CHARS], "mutant": mutant}


def append(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record, sort_keys=True) + "\n")


def load(paths: Iterable[Path]) -> list[dict]:
    """Every run line of ``paths``, in order; a line that is not a run record is an error
    that names its file and line (a report over silently skipped runs would lie)."""
    records = []
    for path in paths:
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error})") from None
            if record.get("version") != RECORD_VERSION or record.get("status") not in STATUSES:
                raise ValueError(f"{path}:{number}: not a run record of version {RECORD_VERSION}")
            records.append(record)
    return records


def failed(record: dict) -> bool:
    """A run that counts against the campaign: a violation, or no verdict at all."""
    return record["status"] != RAN or bool(record["violations"])


# Violations that say the campaign itself fell short (a fault that did not happen), not
# that the code under test did: they fail a run, but do not find a bug.
CAMPAIGN_KINDS = frozenset({"fault-without-effect", "drain-missed-queue"})


def found_bug(record: dict) -> bool:
    """A run that caught the code under test: a violation of its own, or a run that
    broke off (a run that did not start says nothing)."""
    if record["status"] == BROKE_OFF:
        return True
    return record["status"] == RAN and any(v["kind"] not in CAMPAIGN_KINDS
                                           for v in record["violations"])


def percentile(values: list[float], share: float) -> float:
    """Nearest rank: the smallest value at or above ``share`` of them."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _numeric(cell) -> bool:
    text = str(cell).replace(",", "")
    try:
        float(text)
    except ValueError:
        return text == "-"
    return True


def _table(header: list[str], rows: list[list]) -> list[str]:
    """A markdown table; columns of numbers align right."""
    aligns = ["---:" if i and rows and all(_numeric(row[i]) for row in rows) else "---"
              for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def tables(records: list[dict]) -> str:
    """The report's tables over ``records``: per mix, per fault kind, the time to serve
    again, and every run that failed. Runs of a mutant are not the campaign's: they are
    left to ``detection``."""
    records = [r for r in records if not r.get("mutant")]
    if not records:
        return "no runs"
    ran = [r for r in records if r["status"] == RAN]
    by_mix: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_mix[record["mix"]].append(record)
    mixes = []
    for mix, runs in sorted(by_mix.items(), key=lambda item: (item[0] != ALL_KINDS_MIX, item[0])):
        done = [r for r in runs if r["status"] == RAN]
        lengths = sorted({r["seconds"] for r in runs})
        mixes.append([f"`{mix}`", len(runs),
                      f"{lengths[0]:g}" if len(lengths) == 1
                      else f"{lengths[0]:g}-{lengths[-1]:g}",
                      f"{sum(r['operations'] for r in done):,}",
                      sum(len(r["faults"]) for r in done),
                      sum(1 for r in runs if failed(r))])
    lines = _table(["mix", "runs", "seconds each", "operations", "faults", "runs failed"],
                   mixes)
    done_by_kind: Counter = Counter()
    no_effect: Counter = Counter()
    skipped: Counter = Counter()
    for record in ran:
        for fault in record["faults"]:
            (done_by_kind if fault["took_effect"] else no_effect)[fault["kind"]] += 1
        skipped.update(f["kind"] for f in record.get("skipped", ()))
    heals: dict[str, list[float]] = defaultdict(list)
    unserved: Counter = Counter()
    for record in ran:
        for served in record["served"]:
            if served["seconds"] is not None:
                heals[served["kind"]].append(served["seconds"])
            elif not served["interrupted"]:
                unserved[served["kind"]] += 1
    kinds = sorted(set(done_by_kind) | set(no_effect) | set(heals) | set(skipped))
    rows = []
    for kind in kinds:
        times = heals.get(kind, [])
        figures = ([f"{percentile(times, p):.1f}" for p in (0.5, 0.9)] + [f"{max(times):.1f}"]
                   if times else ["-", "-", "-"])
        rows.append([f"`{kind}`", done_by_kind[kind], no_effect[kind], skipped[kind],
                     len(times), *figures, unserved[kind]])
    lines += ["", *_table(["fault", "took effect", "no effect", "skipped", "heals measured",
                           "serve again p50 (s)", "p90", "max", "not within bound"], rows)]
    bad = [r for r in records if failed(r)]
    if bad:
        lines += ["", *_table(["seed", "mix", "what failed"], [
            [r["seed"], f"`{r['mix']}`",
             r.get("why") or ", ".join(sorted({v["kind"] for v in r["violations"]}))]
            for r in bad])]
    # Runs pool only over the same tested code: its trees, whatever commit carried them.
    versions: dict[tuple, list[dict]] = defaultdict(list)
    for record in records:
        code = record["code"]
        versions[(tuple(sorted(code["trees"].items())), code["dirty"])].append(record)
    lines += ["", f"tested code: {len(versions)} version(s): " + "; ".join(
        f"{len(runs)} runs at {runs[0]['code']['commit'][:10]}"
        + (" with uncommitted changes" if dirty else "")
        for (_, dirty), runs in versions.items())]
    return "\n".join(lines)


def detection(records: list[dict]) -> str:
    """Per mutant: how many runs it took to find it (its first run that caught the code,
    ``found_bug``), or that the runs there were did not; and what the runs of the same
    seed without a mutant (the control) said: a finding the control shares is not the
    mutant's."""
    by_mutant: dict[str, list[dict]] = defaultdict(list)
    controls: dict[int, list[dict]] = defaultdict(list)
    for record in records:
        if record["status"] == DID_NOT_START:  # no run, no verdict
            continue
        if record.get("mutant"):
            by_mutant[record["mutant"]].append(record)
        else:
            controls[record["seed"]].append(record)
    rows = []
    for name, runs in sorted(by_mutant.items()):
        first = next((n for n, r in enumerate(runs, 1) if found_bug(r)), None)
        if first is None:
            rows.append([name, len(runs), f"not found in {len(runs)}", "-", "-", "-"])
            continue
        found = runs[first - 1]
        said = found.get("why") or ", ".join(sorted(
            {v["kind"] for v in found["violations"]} - CAMPAIGN_KINDS))
        control = controls.get(found["seed"], [])
        control_said = ("not run" if not control else "clean"
                        if not any(found_bug(c) for c in control) else "ALSO: " + ", ".join(
                            sorted({v["kind"] for c in control for v in c.get("violations", ())}
                                   - CAMPAIGN_KINDS) or [c.get("why", "") for c in control]))
        rows.append([name, len(runs), first, found["seed"], said, control_said])
    header = ["mutant", "runs", "found in run", "seed", "what the checker said",
              "the same seed without it"]
    return "\n".join(_table(header, rows)) if rows else "no runs of a mutant"


def last(records: list[dict], count: int | None) -> list[dict]:
    """The campaign's last ``count`` runs (every one if None); runs of mutants aside."""
    campaign = [r for r in records if not r.get("mutant")]
    return campaign if count is None else campaign[-count:]


__all__ = ["ALL_KINDS_MIX", "BROKE_OFF", "CAMPAIGN_KINDS", "DID_NOT_START", "RAN", "append",
           "code_of", "detection", "failed", "failed_record", "fault_kind", "found_bug", "last",
           "load", "mix_name", "percentile", "run_record", "tables"]
