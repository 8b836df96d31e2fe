"""Tokens on the dashboard and ``/metrics`` (docs/security.md, "Where tokens and certificates come
from": "The dashboard and ``/metrics`` take the same tokens (HTTP
``Authorization: Bearer <token>``): ``reader`` sees, ``admin`` acts; without tokens they
behave as today").

Pure decisions, used by eventq/observe/web.py's middleware:

- ``presented``: the token of a request, from ``Authorization: Bearer <token>`` (what
  Prometheus' ``authorization: credentials:`` sends) or else from the sign-in cookie
  (a browser cannot set that header; the cookie holds the token itself, base64url, so
  a token removed from the file and SIGHUP stops the cookie working on its next use).
- ``decide``: what a request with that token may do. Any role sees (a worker's or a
  producer's token too: they may ``inspect`` through the protocol); only ``admin``
  acts (POST). A token with a queue-name prefix is refused (403): the dashboard and
  ``/metrics`` show every queue of the cluster and are not filtered by prefix.
- ``safe_next``: where to go after signing in, only a path of this site (no open
  redirect).

The grant is resolved from the ``TokenStore`` on every request (``Tokens.grant_for``
compares in constant time), so tokens reloaded on SIGHUP apply to the web at once.
Nothing here logs, and no message holds the token.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from eventq.protocol.access import Grant, TokenStore

BEARER = "bearer"
# The cookie of a browser that signed in: ``__Host-`` (Secure, Path=/, no Domain: the
# browser refuses it otherwise) under TLS; the plain name over HTTP, where a cookie
# cannot be Secure.
COOKIE = "eventq-token"
SECURE_COOKIE = "__Host-eventq-token"
REALM = 'Bearer realm="eventq"'
# RFC 6750, 3.1: a token that was presented but is not (or no longer) known.
REALM_INVALID = 'Bearer realm="eventq", error="invalid_token"'
SIGN_IN, SIGN_OUT = "/signin", "/signout"
# Read by programs (Prometheus, the Spark stats test): their refusals are plain text.
MACHINE_PATHS = ("/metrics", "/api/stats")
VIEW_METHODS = ("GET", "HEAD")


def cookie_name(secure: bool) -> str:
    return SECURE_COOKIE if secure else COOKIE


def cookie_value(token: str) -> str:
    """The token as a cookie value: base64url, so any printable token (``;``, ``"``
    and ``,`` included) is one cookie-octet string."""
    return base64.urlsafe_b64encode(token.encode("latin-1")).decode("ascii").rstrip("=")


def token_of_cookie(value: str) -> str | None:
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw.decode("latin-1") or None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme in any
    case, RFC 7235), or None: no header, another scheme, or no token."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != BEARER or not token or " " in token:
        return None
    return token


def presented(authorization: str | None, cookie: str | None) -> tuple[str | None, bool]:
    """The request's token and whether it came from the cookie: the header first (a
    program's), else the sign-in cookie."""
    token = bearer_token(authorization)
    if token is not None:
        return token, False
    if cookie:
        return token_of_cookie(cookie), True
    return None, False


@dataclass(frozen=True)
class Refusal:
    """A request that may not go on: its status and what to tell the user (never the
    token)."""

    status: int  # 401 or 403
    title: str
    text: str
    invalid_token: bool = False  # a token was presented (RFC 6750 error="invalid_token")


NEEDS_TOKEN = Refusal(
    401, "Sign in",
    "This eventq dashboard and its /metrics need a token of the server's tokens file: "
    "send `Authorization: Bearer <token>` (Prometheus: `authorization: {credentials: "
    "<token>}` in the scrape config), or sign in at /signin in a browser.")
UNKNOWN_TOKEN = Refusal(
    401, "Sign in",
    "The token presented is not one of the server's tokens (mistyped, or removed from "
    "the tokens file): sign in again at /signin, or send `Authorization: Bearer <token>` "
    "with a token of the file (Prometheus: `authorization: {credentials: <token>}`).",
    invalid_token=True)
PREFIX_TOKEN = Refusal(
    403, "Forbidden",
    "A token with a queue-name prefix cannot use the dashboard or /metrics: they show "
    "every queue of the cluster. Use a token without a prefix (any role sees; acting "
    "needs admin).")
NOT_ADMIN = Refusal(
    403, "Forbidden",
    "Acting from the dashboard (pause, resume, delete, retry) needs an admin token; "
    "this one may only look. Sign out and sign in with an admin token.")


def decide(store: TokenStore, token: str | None, acting: bool) -> Grant | Refusal:
    """The grant of a request presenting ``token`` (None: none presented), or why it is
    refused; ``acting``: it changes something (POST), which needs admin."""
    if token is None:
        return NEEDS_TOKEN
    grant = store.tokens.grant_for(token)
    if grant is None:
        return UNKNOWN_TOKEN
    if grant.prefix is not None:
        return PREFIX_TOKEN
    if acting and not grant.is_admin:
        return NOT_ADMIN
    return grant


def safe_next(raw: str | None) -> str:
    """Where to go after signing in: a path of this site, else ``/`` (``//host`` and
    ``/\\host`` are other sites to a browser)."""
    if (not raw or not raw.startswith("/") or raw.startswith("//") or "\\" in raw
            or any(ord(c) < 0x21 or ord(c) > 0x7E for c in raw)
            or raw.split("?")[0] in (SIGN_IN, SIGN_OUT)):
        return "/"
    return raw
