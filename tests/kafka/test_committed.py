"""Reading a group's committed positions (eventq/kafka/committed.py): an answer that
does not say where the group stands is an error, never "nothing committed"."""

from __future__ import annotations

import pytest

from eventq.kafka.committed import Committed, CommittedUnknown, positions_of


class Response:
    """An OffsetFetch answer as aiokafka decodes it (v2 and later carry error_code)."""

    def __init__(self, topics, error_code=0):
        self.topics, self.error_code = topics, error_code


def test_positions_are_read_with_their_changelog_end():
    response = Response([("t.commands", [(0, 7, "eventq changelog-end 12", 0),
                                         (1, -1, "", 0)])])
    assert positions_of(response, "t.commands", [0, 1]) == {
        0: Committed(7, 12), 1: Committed(-1, None)}


@pytest.mark.parametrize("response", [
    # a coordinator moving or loading: an error at the top and no partitions (aiokafka's
    # admin client returned this as "nothing committed")
    Response([], error_code=14),
    Response([], error_code=16),
    Response([("t.commands", [(0, 7, "", 0), (1, -1, "", 14)])]),
    Response([("t.commands", [(0, 7, "", 0)])]),  # partition 1 not answered
])
def test_an_answer_that_does_not_say_where_the_group_stands_raises(response):
    with pytest.raises(CommittedUnknown):
        positions_of(response, "t.commands", [0, 1])
