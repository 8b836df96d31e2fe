"""Check 6a, the scope of a token with a queue-name prefix (docs/security.md, "Queue-name
prefixes"; docs/workflows.md, "Values and checks"): after the fields are valid, a request
naming a queue outside the prefix is Forbidden, as are ``inspect server``, ``digest`` and
``bulk``; the same request inside the prefix goes on to the state's checks. Each input
whole, byte by byte, and with a request after it that shows the stream in step. Internal
verbs are Forbidden to a prefixed token right after framing, and ``as`` (a peer serving a
forwarded request for its client) takes the client's prefix."""

from __future__ import annotations

import pytest

from eventq.errors import ClientError
from eventq.protocol import InspectQueues, Parser
from eventq.protocol import requests as rq
from eventq.protocol.access import (
    FORBIDDEN,
    INTERNAL_VERBS,
    UNAUTHORIZED,
    Access,
    Caller,
    TokenStore,
    parse_tokens,
)

ID = "6ba7b810-9dad-41d1-80b4-00c04fd430c4"
NOW_MS = 1_465_886_806_000
TOKENS = """\
adm1n admin
acme-p producer,worker acme.
acme-a admin acme.
acme-r reader acme.
"""
TRAILER = b"inspect queues 0 10\r\n"  # every token's, never scoped away

# Every request that names queues (docs/security.md, "Queue-name prefixes": check 6a),
# with a queue named "{q}".
NAMING: dict[str, bytes] = {
    "add": b"add %s {q} 10 1000 2\r\nhi\r\n" % ID.encode(),
    "add-after": b"add %s {q} 10 1000 2 -after=16fd2706-8baf-433b-82eb-8c7fada847da\r\nhi\r\n"
                 % ID.encode(),
    "schedule": b"schedule %s {q} 10 1000 2030-01-01T00:00:00Z 2\r\nhi\r\n" % ID.encode(),
    "run": b"run %s {q} 10 100 2\r\nhi\r\n" % ID.encode(),
    "lease": b"lease {q} 0\r\n",
    "lease-second-name": b"lease acme.x {q} 0\r\n",
    "pause": b"pause {q}\r\n",
    "resume": b"resume {q}\r\n",
    "recur": b"recur nightly {q} 10 1000 60000 2\r\nhi\r\n",
    "inspect queue": b"inspect queue {q}\r\n",
    "inspect jobs": b"inspect jobs {q} 0 10\r\n",
    "inspect scheduled-jobs": b"inspect scheduled-jobs {q} 0 10\r\n",
    "inspect waiting-jobs": b"inspect waiting-jobs {q} 0 10\r\n",
}
# Requests about jobs, recurrences and listings: never Forbidden by scope (the server
# hides what is outside it: -NOT-FOUND, or filtered).
UNNAMING: dict[str, bytes] = {
    "result": b"result %s 0\r\n" % ID.encode(),
    "inputs": b"inputs %s\r\n" % ID.encode(),
    "complete": b"complete %s 2\r\nok\r\n" % ID.encode(),
    "fail": b"fail %s 2\r\nno\r\n" % ID.encode(),
    "touch": b"touch %s\r\n" % ID.encode(),
    "delete": b"delete %s\r\n" % ID.encode(),
    "retry": b"retry %s\r\n" % ID.encode(),
    "inspect job": b"inspect job %s\r\n" % ID.encode(),
    "unrecur": b"unrecur nightly\r\n",
    "retry-group": b"retry-group g 10\r\n",
    "inspect queues": b"inspect queues 0 10\r\n",
    "inspect failed": b"inspect failed 0 10\r\n",
    "inspect failed-jobs": b"inspect failed-jobs g 0 10\r\n",
    "inspect tagged": b"inspect tagged t 0 10\r\n",
    "inspect recurring": b"inspect recurring 0 10\r\n",
}
UNSCOPED = {
    "inspect server": b"inspect server\r\n",
    "inspect digest": b"inspect digest\r\n",
    "inspect bulk": b"inspect bulk\r\n",
}


def ways(data: bytes):
    return {"whole": [data], "bytewise": [data[i:i + 1] for i in range(len(data))]}


def answers(token: str, request: bytes, split: str, acting: Caller | None = None) -> list:
    """The events of ``request`` then ``TRAILER`` for a connection authenticated with
    ``token`` (and serving ``acting`` after ``as``, for a peer)."""
    access = Access(TokenStore(parse_tokens(TOKENS)))
    assert access.authenticate(token)
    if acting is not None:
        assert access.act_as(acting.name, acting.prefix)
    parser = Parser(lambda: NOW_MS, access)
    events: list = []
    for chunk in ways(request + TRAILER)[split]:
        parser.feed(chunk)
        while (event := parser.next_event()) is not None:
            events.append(event)
    assert not parser.closed
    return events


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize("what", sorted(NAMING))
def test_a_queue_outside_the_prefix_is_forbidden_and_one_inside_is_not(what, split):
    outside = answers("acme-p" if what not in ("pause", "resume") else "acme-a",
                      NAMING[what].replace(b"{q}", b"other.q"), split)
    assert outside == [ClientError(FORBIDDEN), InspectQueues(0, 10)]
    inside = answers("acme-p" if what not in ("pause", "resume") else "acme-a",
                     NAMING[what].replace(b"{q}", b"acme.q"), split)
    assert not isinstance(inside[0], ClientError), inside[0]
    assert inside[1] == InspectQueues(0, 10)


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize("what", sorted(NAMING))
def test_a_token_without_a_prefix_names_any_queue(what, split):
    events = answers("adm1n", NAMING[what].replace(b"{q}", b"other.q"), split)
    assert not isinstance(events[0], ClientError), events[0]


def test_inside_is_the_prefixs_bytes_at_the_start_of_the_name():
    for name, forbidden in ((b"acme.", False), (b"acme.x.y", False), (b"acme", True),
                            (b"xacme.q", True), (b"ACME.q", True), (b"acme-q", True)):
        events = answers("acme-p", b"lease %s 0\r\n" % name, "whole")
        assert (events[0] == ClientError(FORBIDDEN)) is forbidden, name


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize("what", sorted(UNNAMING))
def test_jobs_recurrences_and_listings_are_left_to_the_state(what, split):
    events = answers("acme-a", UNNAMING[what], split)
    assert not isinstance(events[0], ClientError), events[0]
    assert events[1] == InspectQueues(0, 10)


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize("what", sorted(UNSCOPED))
def test_server_digest_and_bulk_are_forbidden_to_a_prefix(what, split):
    assert answers("acme-r", UNSCOPED[what], split) == [ClientError(FORBIDDEN),
                                                        InspectQueues(0, 10)]
    assert not isinstance(answers("adm1n", UNSCOPED[what], split)[0], ClientError)


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize(("request_", "error"), [
    (b"add %s other.q 0 1000 2\r\nhi\r\n" % ID.encode(), "Invalid TTR"),
    (b"add %s bad/name 10 1000 2\r\nhi\r\n" % ID.encode(), "Invalid Name"),
    (b"add nope other.q 10 1000 2\r\nhi\r\n", "Invalid ID"),
    (b"add %s other.q 10 1000 2 -tags=a,a\r\nhi\r\n" % ID.encode(), "Invalid Tags"),
    (b"schedule %s other.q 10 1000 2000-01-01T00:00:00Z 2\r\nhi\r\n" % ID.encode(),
     "Invalid Time"),
    (b"lease other.q bad/name 0\r\n", "Invalid Name"),
    (b"lease other.q x\r\n", "Invalid wait timeout"),
    (b"inspect jobs other.q 0 1000\r\n", "Invalid limit"),
    (b"recur nightly other.q 10 1000 5 2\r\nhi\r\n", "Invalid Every"),
    (b"inspect server x\r\n", "Invalid command args"),
])
def test_every_field_is_checked_before_the_scope(request_, error, split):
    events = answers("acme-a", request_, split)
    assert events[0] == ClientError(error)
    assert events[1] == InspectQueues(0, 10)


@pytest.mark.parametrize("split", ["whole", "bytewise"])
def test_the_verb_is_still_forbidden_before_the_scope(split):
    """A reader's add is Forbidden right after framing, before its fields (security.md)."""
    events = answers("acme-r", b"add %s bad/name 10 1000 2\r\nhi\r\n" % ID.encode(), split)
    assert events == [ClientError(FORBIDDEN), InspectQueues(0, 10)]


@pytest.mark.parametrize("verb", sorted(INTERNAL_VERBS))
def test_internal_verbs_are_forbidden_to_a_prefixed_admin_before_any_check(verb):
    line = {"peer": b"peer\r\n", "peek": b"peek x\r\n", "confirm": b"confirm x 1\r\n",
            "outcome": b"outcome n 1 0\r\n",
            "edges": b"edges x 1\r\n", "as": b"as line-3\r\n"}[verb]
    assert answers("acme-a", line, "whole")[0] == ClientError(FORBIDDEN)


def test_as_serves_the_forwarded_clients_prefix_and_name():
    """A peer (admin, no prefix) serving a forwarded request: 6a is the client's."""
    acme = Caller("line-2", "acme.")
    out = answers("adm1n", b"inspect jobs other.q 0 10\r\n", "whole", acting=acme)
    assert out[0] == ClientError(FORBIDDEN)
    assert answers("adm1n", b"inspect server\r\n", "whole", acting=acme)[0] == ClientError(
        FORBIDDEN)
    assert answers("adm1n", b"inspect jobs acme.q 0 10\r\n", "whole", acting=acme)[0] == (
        rq.InspectJobs("acme.q", 0, 10))
    # The client's lease is served in peer form: peek names are its queues too.
    assert answers("adm1n", b"peek acme.q other.q\r\n", "whole", acting=acme)[0] == (
        ClientError(FORBIDDEN))


def test_only_an_admin_without_a_prefix_may_act_for_a_client_and_auth_ends_it():
    store = TokenStore(parse_tokens(TOKENS))
    access = Access(store)
    assert not access.act_as("line-2", "acme.")  # unauthenticated
    assert access.authenticate("acme-a") and not access.act_as("line-1", None)
    assert access.caller == Caller("line-3", "acme.")
    assert access.authenticate("adm1n") and access.caller == Caller("line-1", None)
    assert access.act_as("line-2", "acme.") and access.caller == Caller("line-2", "acme.")
    assert not access.authenticate("wrong") and access.caller is None
    assert access.authenticate("adm1n") and access.caller == Caller("line-1", None)
    # A tokens file read again that makes the peer token prefixed ends what it serves.
    assert access.act_as("line-2", "acme.")
    store.replace(parse_tokens("adm1n admin zed.\n"))
    assert access.caller == Caller("line-1", "zed.")


@pytest.mark.parametrize("split", ["whole", "bytewise"])
def test_as_is_checked_in_order_and_parsed(split):
    assert answers("adm1n", b"as line-3 -prefix=acme.\r\n", split)[0] == rq.As("line-3", "acme.")
    assert answers("adm1n", b"as line-3\r\n", split)[0] == rq.As("line-3", None)
    assert answers("adm1n", b"as\r\n", split)[0] == ClientError("Invalid command args")
    assert answers("adm1n", b"as a b\r\n", split)[0] == ClientError("Invalid command args")
    assert answers("adm1n", b"as a -x=1\r\n", split)[0] == ClientError("Invalid command flags")
    assert answers("adm1n", b"as a/b\r\n", split)[0] == ClientError("Invalid Name")
    assert answers("adm1n", b"as a -prefix=x/y\r\n", split)[0] == ClientError("Invalid Name")


def test_unauthenticated_is_still_unauthorized_before_the_scope():
    access = Access(TokenStore(parse_tokens(TOKENS)))
    parser = Parser(lambda: NOW_MS, access)
    parser.feed(b"inspect server\r\n")
    assert parser.next_event() == ClientError(UNAUTHORIZED)
