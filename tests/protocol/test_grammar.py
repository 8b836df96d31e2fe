"""The grammar's table of verbs (eventq/protocol/grammar.py): each request type is named
by its protocol verb."""

from __future__ import annotations

from eventq.protocol import requests
from eventq.protocol.grammar import GRAMMAR, VERB_OF


def test_request_types_are_named_by_their_protocol_verbs():
    assert VERB_OF[requests.Add] == "add"
    assert VERB_OF[requests.InspectScheduledJobs] == "inspect scheduled-jobs"
    assert VERB_OF[requests.InspectQueues] == "inspect queues"
    # every verb of the grammar, inspect's objects each, names one request type
    assert len(set(VERB_OF.values())) == len(VERB_OF) == (
        len(GRAMMAR) - 1 + len(GRAMMAR["inspect"].commands))
