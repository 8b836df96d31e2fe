"""The changelog end a commit's offset metadata carries (eventq/kafka/commit_metadata.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.kafka.commit_metadata import changelog_end, commit_metadata


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_an_end_reads_back_as_written(end):
    assert changelog_end(commit_metadata(end)) == end


def test_a_partition_without_records_names_no_end():
    assert commit_metadata(None) == ""
    assert changelog_end("") is None


@pytest.mark.parametrize("metadata", [
    None, "", "x", "eventq changelog-end ", "eventq changelog-end -1",
    "eventq changelog-end 12x", "changelog-end 12", "EVENTQ CHANGELOG-END 3",
])
def test_other_metadata_names_no_end(metadata):
    """Offsets committed by an older eventq (empty metadata) or by another tool."""
    assert changelog_end(metadata) is None


def test_a_negative_end_cannot_be_written():
    with pytest.raises(ValueError):
        commit_metadata(-1)

