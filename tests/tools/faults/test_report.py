"""The campaign's results file and the report's tables (tools/faults/report.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.faults.campaign import RunReport, Served
from tools.faults.plan import Fault
from tools.faults.report import (
    BROKE_OFF,
    DID_NOT_START,
    append,
    code_of,
    failed,
    failed_record,
    last,
    load,
    mix_name,
    percentile,
    run_record,
    tables,
)
from tools.faults.violation import Violation

ROOT = Path(__file__).resolve().parents[3]
CODE = {"commit": "a" * 40, "trees": {"eventq": "b" * 40}, "dirty": False}


def a_report(seed: int, *, violations=(), serve=(("kill-process", 3.0),)) -> RunReport:
    fault = Fault("kill-process", 1, 4.0, 5.0)
    report = RunReport(seed, 60.0, [fault], violations=list(violations),
                       served=[Served(f"{kind} of process 1 at 4.0s for 5.0s", s)
                               for kind, s in serve],
                       counts={"add": {"ok": 10, "info": 2}, "lease": {"ok": 7, "fail": 1}},
                       effects=[{"fault": fault.describe(), "kind": "kill-process",
                                 "evidence": ["pid gone"], "problems": [],
                                 "took_effect": True}])
    report.wall_s = 123.45
    return report


def test_a_run_is_one_line_that_loads_back(tmp_path):
    path = tmp_path / "results.jsonl"
    append(path, run_record(a_report(7), mix="all", code=CODE))
    append(path, failed_record(8, 60.0, mix="all", code=CODE, status=DID_NOT_START,
                               why="a broker did not start"))
    first, second = load([path])
    assert first["seed"] == 7 and first["operations"] == 20
    assert first["outcomes"] == {"ok": 17, "fail": 1, "info": 2}
    assert first["served"] == [{"kind": "kill-process", "seconds": 3.0, "interrupted": False}]
    assert first["faults"][0]["took_effect"] is True
    assert not failed(first) and failed(second)


def test_a_violation_fails_its_run_and_is_named_in_the_table(tmp_path):
    bad = run_record(a_report(9, violations=[Violation("stale-read", "j1", (1,), "x" * 999)]),
                     mix="all", code=CODE)
    assert failed(bad) and len(bad["violations"][0]["message"]) == 300
    text = tables([run_record(a_report(7), mix="all", code=CODE), bad])
    assert "| 9 | `all` | stale-read |" in text
    assert "| `all` | 2 | 60 | 40 | 2 | 1 |" in text


def test_runs_that_did_not_start_or_broke_off_count_against_the_campaign():
    records = [failed_record(1, 60.0, mix="all", code=CODE, status=BROKE_OFF, why="boom"),
               failed_record(2, 60.0, mix="all", code=CODE, status=DID_NOT_START, why="no")]
    text = tables(records)
    assert "| `all` | 2 | 60 | 0 | 0 | 2 |" in text
    assert "| 1 | `all` | boom |" in text
    with pytest.raises(ValueError):
        failed_record(3, 60.0, mix="all", code=CODE, status="ran", why="")


def test_serve_again_figures_per_kind():
    records = [run_record(a_report(n, serve=(("kill-process", float(n)),)), mix="all", code=CODE)
               for n in range(1, 11)]
    text = tables(records)
    assert "| `kill-process` | 10 | 0 | 0 | 10 | 5.0 | 9.0 | 10.0 | 0 |" in text
    assert percentile([1.0], 0.9) == 1.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0


def test_mixes_and_tested_code_are_told_apart():
    other = dict(CODE, trees={"eventq": "c" * 40})
    records = [run_record(a_report(1), mix=mix_name(None), code=CODE),
               run_record(a_report(2), mix=mix_name(("pause-short", "kill-process")), code=other)]
    text = tables(records)
    assert "`kill-process,pause-short`" in text
    assert "tested code: 2 version(s)" in text
    assert last(records, 1) == records[1:]


def test_a_line_that_is_not_a_run_is_an_error_naming_it(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"version": 1, "status": "ran"}) + "\nnot json\n")
    with pytest.raises(ValueError, match=r"results.jsonl:2"):
        load([path])
    path.write_text(json.dumps({"version": 99}) + "\n")
    with pytest.raises(ValueError, match=r"results.jsonl:1"):
        load([path])


def test_code_of_names_this_checkouts_commit():
    code = code_of(ROOT)
    assert len(code["commit"]) == 40 and set(code["trees"]) == {"eventq", "streams",
                                                                 "tools/faults"}


def test_the_bench_prints_the_tables_from_a_results_file(tmp_path):
    path = tmp_path / "results.jsonl"
    append(path, run_record(a_report(7), mix="all", code=CODE))
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "faults.py"), "--report",
                           str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "| `kill-process` | 1 |" in done.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "faults.py"), "--report",
                          str(tmp_path / "missing.jsonl")], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "cannot read the results" in bad.stderr


def test_the_bench_refuses_an_unknown_mix_or_a_mix_with_kinds():
    for args in (["--mix", "bogus"], ["--mix", "all", "--kinds", "kill-process"]):
        done = subprocess.run([sys.executable, str(ROOT / "bench" / "faults.py"), *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and ("unknown mixes" in done.stderr
                                         or "give one" in done.stderr)
