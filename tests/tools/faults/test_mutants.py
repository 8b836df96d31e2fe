"""The bugs put back for the campaign's detection power (tools/faults/mutants.py): each
still finds its text in today's code, exactly once, and changes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.faults.mutants import BY_NAME, MUTANTS, Mutant, MutantStale, apply
from tools.faults.report import detection, failed_record, run_record
from tools.faults.violation import Violation

from .test_report import CODE, a_report

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_applies_to_todays_code(mutant, tmp_path):
    copy = tmp_path / mutant.path
    copy.parent.mkdir(parents=True)
    copy.write_text((ROOT / mutant.path).read_text(encoding="utf-8"), encoding="utf-8")
    apply(mutant, tmp_path)
    changed = copy.read_text(encoding="utf-8")
    assert mutant.old not in changed or mutant.new.count(mutant.old)
    assert changed != (ROOT / mutant.path).read_text(encoding="utf-8")


def test_a_mutant_whose_text_moved_is_stale(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\nx = 1\n")
    with pytest.raises(MutantStale, match="2 times"):
        apply(Mutant("1", "abc", "twice", "a.py", "x = 1", "x = 2"), tmp_path)
    with pytest.raises(MutantStale, match="gone"):
        apply(Mutant("1", "abc", "gone", "b.py", "x = 1", "x = 2"), tmp_path)
    with pytest.raises(ValueError):
        Mutant("1", "abc", "no change", "a.py", "x", "x")


def test_names_are_unique():
    assert len(BY_NAME) == len(MUTANTS)


def test_the_detection_table_names_the_run_that_found_each_mutant():
    records = [run_record(a_report(1), mix="all", code=CODE, mutant="1012"),
               run_record(a_report(2, violations=[Violation("log-overlapping-grant", "j", (),
                                                            "two grants")]),
                          mix="all", code=CODE, mutant="1012"),
               run_record(a_report(3, violations=[Violation("fault-without-effect", None, (),
                                                            "cut-clients: no evidence")]),
                          mix="all", code=CODE, mutant="4005"),
               failed_record(1, 60.0, mix="all", code=CODE, status="did-not-start", why="x",
                             mutant="3524"),
               run_record(a_report(1), mix="all", code=CODE, mutant="3524")]
    text = detection(records)
    assert "| 1012 | 2 | 2 | 2 | log-overlapping-grant | not run |" in text
    assert "| 3524 | 1 | not found in 1 | - | - | - |" in text
    # A fault that did not happen fails the run, but finds no bug.
    assert "| 4005 | 1 | not found in 1 | - | - | - |" in text
    clean = detection(records + [run_record(a_report(2), mix="all", code=CODE)])
    assert "| log-overlapping-grant | clean |" in clean
    shared = detection(records + [run_record(
        a_report(2, violations=[Violation("not-final", "j", (), "x")]), mix="all", code=CODE)])
    assert "| log-overlapping-grant | ALSO: not-final |" in shared
