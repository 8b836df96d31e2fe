"""The jobs table's own records (eventq/state/jobs_table.py): a queue's pause record."""

from hypothesis import given
from hypothesis import strategies as st

from eventq.state.jobs_table import PAUSED_WITHOUT_POSITION, pause_record, read_pause_record


@given(st.booleans(), st.integers(min_value=0, max_value=2**62))
def test_a_pause_record_reads_back_as_written(paused, at):
    assert read_pause_record(pause_record(paused, at)) == (paused, at)


def test_a_pause_record_written_before_positions_reads_with_no_position():
    assert read_pause_record(b"1") == (True, PAUSED_WITHOUT_POSITION)
    assert read_pause_record(b"0") == (False, PAUSED_WITHOUT_POSITION)
    assert PAUSED_WITHOUT_POSITION < 0  # below every position: any command applies over it
