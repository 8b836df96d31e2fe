"""Tokens and roles (docs/security.md, "Tokens and roles"): the tokens file, the role
table, and the parser failing closed: every request of a connection that has not
authenticated, or whose roles do not include its verb, is framed as usual and answered
before any other check. Each input whole, byte by byte, and with a request after it that
shows the stream in step."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.errors import ClientError, FramingError
from eventq.protocol import Auth, InspectQueues, InspectServer, Parser
from eventq.protocol.access import (
    FORBIDDEN,
    ROLE_VERBS,
    UNAUTHORIZED,
    Access,
    Caller,
    Role,
    TokensFileError,
    TokenStore,
    parse_tokens,
    scope_denial,
)
from eventq.protocol.grammar import GRAMMAR

ID = "6ba7b810-9dad-41d1-80b4-00c04fd430c4"
NOW_MS = 1_465_886_806_000
TOKENS = """\
# name-less tokens, one per line
adm1n admin
rd reader
wk worker jobs.
pr producer,worker
"""

# One well-formed request of every verb of the grammar (inspect: of every object).
REQUESTS: dict[str, bytes] = {
    "add": b"add %s q 10 1000 2\r\nhi\r\n" % ID.encode(),
    "schedule": b"schedule %s q 10 1000 2030-01-01T00:00:00Z 2\r\nhi\r\n" % ID.encode(),
    "run": b"run %s q 10 100 2\r\nhi\r\n" % ID.encode(),
    "result": b"result %s 0\r\n" % ID.encode(),
    "lease": b"lease q 0\r\n",
    "complete": b"complete %s 2\r\nok\r\n" % ID.encode(),
    "fail": b"fail %s 2\r\nno\r\n" % ID.encode(),
    "delete": b"delete %s\r\n" % ID.encode(),
    "touch": b"touch %s\r\n" % ID.encode(),
    "pause": b"pause q\r\n",
    "resume": b"resume q\r\n",
    "inputs": b"inputs %s\r\n" % ID.encode(),
    "peer": b"peer\r\n",
    "peek": b"peek q\r\n",
    "confirm": b"confirm %s 1\r\n" % ID.encode(),
    "outcome": b"outcome host-1 1 0\r\n",
    "edges": b"edges %s 10\r\n" % ID.encode(),
    "inspect": b"inspect server\r\n",
    "recur": b"recur nightly q 10 1000 60000 2\r\nhi\r\n",
    "unrecur": b"unrecur nightly\r\n",
    "retry": b"retry %s\r\n" % ID.encode(),
    "retry-group": b"retry-group g 10\r\n",
    "as": b"as line-3 -prefix=acme.\r\n",
}
INSPECT_OBJECTS = {
    "server": b"", "queues": b" 0 10", "queue": b" q", "jobs": b" q 0 10",
    "scheduled-jobs": b" q 0 10", "waiting-jobs": b" q 0 10", "job": b" " + ID.encode(),
    "digest": b"", "bulk": b"", "recurring": b" 0 10", "tagged": b" t 0 10",
    "failed": b" 0 10", "failed-jobs": b" g 0 10",
}


def test_every_verb_of_the_grammar_has_a_request_here() -> None:
    assert set(REQUESTS) == set(GRAMMAR) - {"auth"}
    assert set(INSPECT_OBJECTS) == set(GRAMMAR["inspect"].commands)


class Session:
    """A parser with ``Access``, fed as the gateway feeds it: each ``auth`` is settled
    before the next request is read (eventq/gateway/server.py answers in order)."""

    def __init__(self, tokens: str = TOKENS) -> None:
        self.store = TokenStore(parse_tokens(tokens))
        self.access = Access(self.store)
        self.parser = Parser(lambda: NOW_MS, self.access)

    def run(self, chunks) -> list[object]:
        events: list[object] = []
        for chunk in chunks:
            self.parser.feed(chunk)
            while (event := self.parser.next_event()) is not None:
                if isinstance(event, Auth):
                    event = "+OK" if self.access.authenticate(event.token) else UNAUTHORIZED
                events.append(event)
        return events


def ways(data: bytes):
    """The same bytes whole and one byte at a time."""
    return {"whole": [data], "bytewise": [data[i:i + 1] for i in range(len(data))]}


def answers(tokens_line: bytes | None, request: bytes, split: str) -> list[object]:
    session = Session()
    data = (tokens_line or b"") + request + b"inspect queues 0 10\r\n"  # any token's
    return session.run(ways(data)[split])


# --- the tokens file --------------------------------------------------------------


def test_parse_tokens_reads_roles_and_prefixes() -> None:
    tokens = parse_tokens(TOKENS)
    assert len(tokens) == 4
    assert tokens.grant_for("adm1n").roles == {Role.ADMIN}
    assert tokens.grant_for("wk").prefix == "jobs."
    assert tokens.grant_for("pr").roles == {Role.PRODUCER, Role.WORKER}
    assert tokens.grant_for("nope") is None
    assert tokens.grant_for("adm") is None  # a token's start is not the token
    assert tokens.peer_token == "adm1n"  # the first admin without a prefix


def test_grants_name_their_line_not_their_token() -> None:
    tokens = parse_tokens(TOKENS)
    assert tokens.grant_for("rd").name == "line-3"
    assert "adm1n" not in repr(tokens)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("s3cret\n", 1),  # no role
        ("# c\ns3cret admin jobs. extra\n", 2),
        ("s3cret boss\n", 1),
        ("s3cret admin,admin\n", 1),
        ("s3cret admin,\n", 1),
        ("s3cret admin jobs/\n", 1),
        ("s3cret admin\ns3cret reader\n", 2),  # the same token twice
        ("s3cr\u00e9t admin\n", 1),
    ],
)
def test_a_bad_line_names_its_number_never_the_token(text: str, line: int) -> None:
    with pytest.raises(TokensFileError) as caught:
        parse_tokens(text)
    assert caught.value.line == line
    assert "s3cr" not in str(caught.value)


def test_an_admin_may_use_every_verb_and_the_roles_are_the_specs() -> None:
    assert ROLE_VERBS[Role.ADMIN] == set(GRAMMAR) | {"auth"}
    assert ROLE_VERBS[Role.READER] == {"auth", "result", "inputs", "inspect"}
    assert ROLE_VERBS[Role.WORKER] == ROLE_VERBS[Role.READER] | {"lease", "complete", "fail", "touch"}
    assert ROLE_VERBS[Role.PRODUCER] == ROLE_VERBS[Role.READER] | {
        "add", "schedule", "run", "delete", "retry", "retry-group", "recur", "unrecur"}
    assert all(verbs <= ROLE_VERBS[Role.ADMIN] for verbs in ROLE_VERBS.values())


# --- failing closed -----------------------------------------------------------------


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize("verb", sorted(REQUESTS))
def test_before_auth_every_request_is_unauthorized_and_the_stream_stays_in_step(
        verb: str, split: str) -> None:
    assert answers(None, REQUESTS[verb], split) == [ClientError(UNAUTHORIZED)] * 2


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize("line", [
    b"inspect\r\n", b"inspect nothing\r\n", b"nosuchverb\r\n", b"\x00\xff\r\n", b"\r\n",
    b"lease -=x q 0\r\n", b"lease\r\n", b"add %s q 10 1000 -priority=x 2\r\nhi\r\n" % ID.encode(),
    b"add %s bad/name 10 1000 2\r\nhi\r\n" % ID.encode(),
])
def test_before_auth_not_even_a_malformed_request_is_told_what_is_wrong(
        line: bytes, split: str) -> None:
    """Nothing about fields, verbs or objects is revealed (docs/security.md, "Fail closed")."""
    assert answers(None, line, split) == [ClientError(UNAUTHORIZED)] * 2


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize("line", [
    b"add %s q 10 1000 x\r\nhi\r\n" % ID.encode(),  # no size
    b"add -=x\r\n",  # a data block whose size cannot be found
    b"complete %s 2\r\nhi!\r\n" % ID.encode(),  # a block longer than said
])
def test_before_auth_a_block_that_cannot_be_framed_closes_saying_unauthorized(
        line: bytes, split: str) -> None:
    session = Session()
    events = session.run(ways(line + b"inspect server\r\n")[split])
    assert events == [FramingError(UNAUTHORIZED)]
    assert session.parser.closed


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize(("token", "role"), [("rd", Role.READER), ("wk", Role.WORKER),
                                             ("pr", Role.PRODUCER), ("adm1n", Role.ADMIN)])
@pytest.mark.parametrize("verb", sorted(REQUESTS))
def test_a_verb_outside_the_roles_is_forbidden_before_any_check(
        verb: str, token: str, role: Role, split: str) -> None:
    events = answers(b"auth %s\r\n" % token.encode(), REQUESTS[verb], split)
    grant = parse_tokens(TOKENS).grant_for(token)
    allowed = verb in grant.verbs
    assert events[0] == "+OK"
    unscoped = answers(b"auth adm1n\r\n", REQUESTS[verb], split)[1]
    if allowed and scope_denial(unscoped, Caller(grant.name, grant.prefix)):
        assert events[1] == ClientError(FORBIDDEN)  # 6a: a queue outside its prefix
    elif allowed:  # the request itself, checked and built as without tokens
        assert type(events[1]).__name__ == type(answers(b"auth adm1n\r\n", REQUESTS[verb],
                                                        split)[1]).__name__
        assert not isinstance(events[1], (ClientError, FramingError)), events[1]
    else:
        assert events[1] == ClientError(FORBIDDEN)
    assert events[2] == InspectQueues(0, 10)  # every role reads


@pytest.mark.parametrize("split", ["whole", "bytewise"])
def test_forbidden_comes_before_field_checks(split: str) -> None:
    bad = b"add %s bad/name 10 1000 2\r\nhi\r\n" % ID.encode()
    assert answers(b"auth rd\r\n", bad, split)[1] == ClientError(FORBIDDEN)


@pytest.mark.parametrize("split", ["whole", "bytewise"])
@pytest.mark.parametrize(("line", "error"), [
    (b"auth\r\n", "Invalid command args"),
    (b"auth a b\r\n", "Invalid command args"),
    (b"auth a -x=1\r\n", "Invalid command flags"),
    (b"auth -x=1\r\n", "Invalid command args"),
    (b"auth a -=1\r\n", "Invalid command flags"),
])
def test_auth_checks_in_the_specs_order(line: bytes, error: str, split: str) -> None:
    assert answers(None, line, split) == [ClientError(error), ClientError(UNAUTHORIZED)]


def test_a_failed_auth_drops_an_earlier_one_and_the_connection_stays_open() -> None:
    session = Session()
    events = session.run([b"auth adm1n\r\ninspect server\r\nauth wrong\r\ninspect server\r\n"
                          b"auth rd\r\ninspect server\r\n"])
    assert events == ["+OK", InspectServer(), UNAUTHORIZED, ClientError(UNAUTHORIZED),
                      "+OK", InspectServer()]
    assert not session.parser.closed


def test_a_token_removed_from_the_file_stops_working_on_the_next_request() -> None:
    session = Session()
    assert session.run([b"auth rd\r\ninspect server\r\n"]) == ["+OK", InspectServer()]
    session.store.replace(parse_tokens("adm1n admin\n"))
    assert session.run([b"inspect server\r\n"]) == [ClientError(UNAUTHORIZED)]
    session.store.replace(parse_tokens("rd admin\n"))  # and one whose roles changed
    assert session.run([b"auth rd\r\npause q\r\n"])[1].__class__.__name__ == "Pause"


@given(st.binary(max_size=200))
def test_before_auth_any_bytes_give_only_unauthorized_framing_or_auth(data: bytes) -> None:
    """Whatever arrives, an unauthenticated connection gets no request through and no
    error but Unauthorized (or a bare \\n's close, or a line too long)."""
    session = Session()
    for event in session.run([data]):
        if isinstance(event, (ClientError, FramingError)):
            assert event.text in (UNAUTHORIZED, "Line too long", "Invalid command args",
                                  "Invalid command flags"), event
        else:
            assert event in ("+OK", UNAUTHORIZED) or type(event).__name__ == "Close", event
