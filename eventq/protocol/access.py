"""Tokens and roles (docs/security.md, "Tokens and roles"), pure: what a connection may
do, decided from the tokens configured and the token it presented with ``auth``.

- ``parse_tokens``: the tokens file's text (one ``<token> <role>[,<role>...] [<prefix>]``
  per line, ``#`` comments) into ``Tokens``; an error names the line, never the token.
- ``Tokens.grant_for``: the ``Grant`` of a presented token, compared in constant time
  with every configured one (SHA-256 digests compared with ``hmac.compare_digest``, all
  of them, whichever matches), or None.
- ``Access``: one connection's state. ``denial(verb)`` is the error a request of
  ``verb`` gets right after framing, before any other check (docs/security.md, "Fail closed"):
  ``Unauthorized`` until an ``auth`` succeeded, ``Forbidden`` for a verb none of its
  roles may use, None otherwise. A server without tokens has no ``Access`` at all.
- ``Caller``: whom a request is served for, the token's ``name`` (audit) and ``prefix``
  (scope): the connection's own grant's, or, on a peer connection after ``as``, the
  client's another eventq process forwards it for. ``scope_denial`` is check 6a
  (docs/security.md, "Queue-name prefixes"; docs/workflows.md, "Values and checks"):
  ``Forbidden`` for a request naming a queue outside the prefix, and for ``inspect
  server``, ``digest`` and ``bulk``; jobs, recurrences and listings outside it are the
  server's to hide (7).

The role table (``ROLE_VERBS``) is the spec's, as data; ``admin`` may use every verb of
the grammar, the internal ones between eventq processes included (they authenticate to
each other as admin).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from eventq.errors import FORBIDDEN, UNAUTHORIZED, EventqError
from eventq.limits import MAX_NAME_BYTES

from . import requests as rq
from .grammar import GRAMMAR

AUTH_VERB = "auth"
COMMENT = "#"
ROLE_SEPARATOR = ","
# A token is one word of the protocol line (no space); a prefix is the start of a queue
# name, so it is made of a name's characters.
_TOKEN = re.compile(r"[!-~]+")  # printable ASCII without space
_PREFIX = re.compile(r"[A-Za-z0-9_.\-]{1,%d}" % MAX_NAME_BYTES)


class Role(Enum):
    READER = "reader"
    WORKER = "worker"
    PRODUCER = "producer"
    ADMIN = "admin"


_READS = frozenset({AUTH_VERB, "result", "inputs", "inspect"})
ROLE_VERBS: Mapping[Role, frozenset[str]] = {
    Role.READER: _READS,
    Role.WORKER: _READS | {"lease", "complete", "fail", "touch"},
    Role.PRODUCER: _READS | {
        "add", "schedule", "run", "delete", "retry", "retry-group", "recur", "unrecur",
    },
    Role.ADMIN: frozenset(GRAMMAR) | {AUTH_VERB},
}


# Verbs between eventq processes (docs/architecture.md, "Scaling out"): never a client's.
# A token with a prefix may not use them, whatever its roles (``as`` would leave the
# prefix, and their replies are not filtered by one): Forbidden right after framing.
INTERNAL_VERBS = frozenset({"peer", "peek", "confirm", "outcome", "edges", "as"})


class TokensFileError(EventqError):
    """The tokens file cannot be used: which line, and why (never the token)."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"tokens file, line {line}: {why}")
        self.line = line


@dataclass(frozen=True, slots=True)
class Grant:
    """What one token allows: its ``roles``, the verbs they may use, and the queue-name
    ``prefix`` that scopes it (None: every queue). ``name`` names the token in logs and
    audit without revealing it (its line in the file)."""

    name: str
    roles: frozenset[Role]
    prefix: str | None = None
    verbs: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        if not self.roles or not all(isinstance(r, Role) for r in self.roles):
            raise ValueError(f"a grant needs roles, got {self.roles!r}")
        if self.prefix is not None and _PREFIX.fullmatch(self.prefix) is None:
            raise ValueError(f"a prefix is made of a name's characters, got {self.prefix!r}")
        object.__setattr__(self, "verbs", verbs_of(self.roles))

    @property
    def is_admin(self) -> bool:
        return Role.ADMIN in self.roles

    @property
    def may_act_for_others(self) -> bool:
        """Another eventq process: an admin without a prefix (``Tokens.peer_token``'s
        kind) may serve the requests it forwards for their client (``as``)."""
        return self.is_admin and self.prefix is None


@dataclass(frozen=True, slots=True)
class Caller:
    """Whom a request is served for (see the module docstring): the token's ``name``,
    written with every command it issues (audit; never the token), and its queue-name
    ``prefix`` (None: every queue)."""

    name: str
    prefix: str | None = None

    def sees(self, name: str) -> bool:
        """A queue ``name`` inside the prefix: its bytes start with the prefix's."""
        return self.prefix is None or name.startswith(self.prefix)


# Check 6a (docs/security.md, "Queue-name prefixes"): the queue names each request names,
# by request type.
_NAMED_QUEUES = {
    rq.Add: lambda r: (r.name,),
    rq.Schedule: lambda r: (r.name,),
    rq.Run: lambda r: (r.name,),
    rq.Lease: lambda r: r.names,
    rq.Pause: lambda r: (r.name,),
    rq.Resume: lambda r: (r.name,),
    rq.Recur: lambda r: (r.job_name,),
    rq.InspectQueue: lambda r: (r.name,),
    rq.InspectJobs: lambda r: (r.name,),
    rq.InspectScheduledJobs: lambda r: (r.name,),
    rq.InspectWaitingJobs: lambda r: (r.name,),
    rq.Peek: lambda r: r.names,  # internal: a peer's, for a client's lease
}
# Figures of every queue, which a prefix cannot narrow (spec: Forbidden).
_UNSCOPED = (rq.InspectServer, rq.InspectDigest, rq.InspectBulk)


def scope_denial(request: object, caller: Caller | None) -> str | None:
    """Check 6a of ``request`` for ``caller`` (None: a server without tokens): the
    error text, or None when the request may go on to the state's checks."""
    if caller is None or caller.prefix is None:
        return None
    if isinstance(request, _UNSCOPED):
        return FORBIDDEN
    named = _NAMED_QUEUES.get(type(request))
    if named is not None and not all(caller.sees(name) for name in named(request)):
        return FORBIDDEN
    return None


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("latin-1")).digest()


@dataclass(frozen=True)
class Tokens:
    """The configured tokens, each kept as its SHA-256 digest beside its grant, and
    ``peer_token``: the first admin token without a prefix, the one this process
    presents to the others (docs/security.md, "A tokens file": processes authenticate as
    admin; None: there is none). Never shown (``repr``)."""

    entries: tuple[tuple[bytes, Grant], ...]
    peer_token: str | None = field(default=None, repr=False)

    def grant_for(self, token: str) -> Grant | None:
        """The grant of ``token``, or None. Every configured digest is compared, in
        constant time each, whichever matches: the time does not tell which or how
        close."""
        presented = _digest(token)
        found: Grant | None = None
        for digest, grant in self.entries:
            if hmac.compare_digest(digest, presented) and found is None:
                found = grant
        return found

    def __len__(self) -> int:
        return len(self.entries)


def parse_tokens(text: str) -> Tokens:
    """The tokens file's ``text``: one ``<token> <role>[,<role>...] [<prefix>]`` per
    line; blank lines and lines starting with ``#`` are skipped. A token appears once."""
    entries: list[tuple[bytes, Grant]] = []
    seen: set[bytes] = set()
    peer_token: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(COMMENT):
            continue
        words = line.split()
        if len(words) not in (2, 3):
            raise TokensFileError(number, "expected `<token> <role>[,<role>...] [<prefix>]`")
        token, roles_word = words[0], words[1]
        if _TOKEN.fullmatch(token) is None:
            raise TokensFileError(number, "a token is printable ASCII without spaces")
        roles = _parse_roles(number, roles_word)
        prefix = words[2] if len(words) == 3 else None
        if prefix is not None and _PREFIX.fullmatch(prefix) is None:
            raise TokensFileError(
                number, f"a prefix is 1-{MAX_NAME_BYTES} bytes of [A-Za-z0-9_.-]")
        digest = _digest(token)
        if digest in seen:
            raise TokensFileError(number, "this token is on an earlier line too")
        seen.add(digest)
        grant = Grant(f"line-{number}", roles, prefix)
        entries.append((digest, grant))
        if peer_token is None and grant.is_admin and prefix is None:
            peer_token = token
    return Tokens(tuple(entries), peer_token)


def _parse_roles(number: int, word: str) -> frozenset[Role]:
    names = word.split(ROLE_SEPARATOR)
    known = {role.value: role for role in Role}
    unknown = [name for name in names if name not in known]
    if unknown or len(set(names)) != len(names):
        raise TokensFileError(
            number, f"roles are one or more of {', '.join(known)}, separated by ','")
    return frozenset(known[name] for name in names)


class TokenStore:
    """The tokens a server holds now, replaced whole when the file is read again
    (SIGHUP); ``generation`` counts the replacements, so each connection re-resolves
    its grant once after one instead of on every request."""

    __slots__ = ("tokens", "generation")

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens
        self.generation = 0

    def replace(self, tokens: Tokens) -> None:
        self.tokens = tokens
        self.generation += 1


class Access:
    """One connection's standing with a server that has tokens (see the module
    docstring). Its grant is resolved again after the store's tokens are replaced, so
    a token removed from the file (then SIGHUP) stops working on its next request."""

    __slots__ = ("_store", "_token", "_grant", "_generation", "_acting")

    def __init__(self, store: TokenStore) -> None:
        self._store = store
        self._token: str | None = None  # the token of the last successful auth
        self._grant: Grant | None = None
        self._generation = store.generation
        self._acting: Caller | None = None  # ``as``: the client a peer forwards for

    def authenticate(self, token: str) -> bool:
        """``auth <token>``: True (``+OK``) if it is configured; otherwise the
        connection is unauthenticated from now on (an earlier auth no longer holds).
        Either way an earlier ``as`` no longer holds."""
        self._generation = self._store.generation
        self._grant = self._store.tokens.grant_for(token)
        self._token = token if self._grant is not None else None
        self._acting = None
        return self._grant is not None

    def act_as(self, name: str, prefix: str | None) -> bool:
        """``as``: serve the next requests for the client ``name`` (prefix ``prefix``)
        a peer forwards them for. Only an admin without a prefix may (False: refused,
        and nothing changes)."""
        grant = self.grant
        if grant is None or not grant.may_act_for_others:
            return False
        self._acting = Caller(name, prefix)
        return True

    @property
    def caller(self) -> Caller | None:
        """Whom this connection's requests are served for (None: unauthenticated): the
        client named by ``as`` while the grant may act for others (a tokens file read
        again may have made it another), else the grant's own name and prefix."""
        grant = self.grant
        if grant is None:
            return None
        if self._acting is not None and grant.may_act_for_others:
            return self._acting
        return Caller(grant.name, grant.prefix)

    @property
    def grant(self) -> Grant | None:
        if self._generation != self._store.generation:
            self._generation = self._store.generation
            token = self._token
            self._grant = None if token is None else self._store.tokens.grant_for(token)
        return self._grant

    def denial(self, verb: str) -> str | None:
        """The error text a request of ``verb`` gets before any other check, or None."""
        if verb == AUTH_VERB:
            return None
        grant = self.grant
        if grant is None:
            return UNAUTHORIZED
        if verb in GRAMMAR and verb not in grant.verbs:
            return FORBIDDEN
        if grant.prefix is not None and verb in INTERNAL_VERBS:
            return FORBIDDEN
        return None  # allowed, or no verb at all (answered "Unknown command")

    def scope_denial(self, request: object) -> str | None:
        """Check 6a (``scope_denial``) for whom this connection serves now."""
        return scope_denial(request, self.caller)


def verbs_of(roles: Iterable[Role]) -> frozenset[str]:
    """The verbs any of ``roles`` may use."""
    return frozenset().union(*(ROLE_VERBS[r] for r in roles))
