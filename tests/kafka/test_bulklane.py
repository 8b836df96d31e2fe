"""What `--wait`'s progress bar counts (eventq/kafka/bulklane.py): rows, as the user wrote them."""

from __future__ import annotations

from eventq.console.progress import render
from eventq.kafka.bulklane import AdmittedCount


def test_rows_are_counted_as_the_admitted_records_share_of_them() -> None:
    count = AdmittedCount(records=40, rows=10_000)
    assert (count.unit, count.total) == ("rows", 10_000)
    assert [count.done(n) for n in (0, 1, 20, 40)] == [0, 250, 5_000, 10_000]
    line = render("applied", count.done(20), count.total, count.unit, 2.0)
    assert "5,000/10,000 rows" in line and "records" not in line


def test_without_a_row_count_records_are_counted() -> None:
    count = AdmittedCount(records=40, rows=None)
    assert (count.unit, count.total, count.done(7)) == ("records", 40, 7)


def test_nothing_left_to_admit_means_every_row_is_in() -> None:
    assert AdmittedCount(records=0, rows=300).done(0) == 300
