"""The pure parts of leasing from several processes (eventq/gateway/everywhere.py): the
heads a peek replies with, and choosing where to lease."""

from __future__ import annotations

import random

from eventq.gateway.everywhere import choose_lease, heads_of
from eventq.protocol import replies


def test_peek_replies_parse_back() -> None:
    heads = {"a": 5, "b.c": 2**200}
    assert heads_of(replies.heads_reply(heads)) == heads
    assert heads_of(replies.heads_reply({})) == {}


def test_a_lease_goes_where_the_names_best_job_is_here_on_a_tie() -> None:
    random.seed(1)
    assert choose_lease({None: {}, "b:1": {}}) is None
    assert choose_lease({None: {"q": 7}, "b:1": {"q": 3}}) == ("q", "b:1")
    assert choose_lease({None: {"q": 3}, "b:1": {"q": 3}}) == ("q", None)
    assert choose_lease({"c:1": {"q": 2}, "b:1": {"q": 3}}) == ("q", "c:1")
    names = {choose_lease({None: {"a": 9}, "b:1": {"b": 1}})[0] for _ in range(50)}
    assert names == {"a", "b"}  # a uniformly random name among those ready anywhere
