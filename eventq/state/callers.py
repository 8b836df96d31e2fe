"""Whom the request being served is served for (docs/security.md, "Queue-name
prefixes"): the token's name (audit) and prefix (scope), as
``eventq.protocol.access.Caller``.

The gateway sets it for each request it answers (eventq/gateway/server.py), in the
connection's task; everything that request's answer does in that task, or in tasks it
starts (asyncio copies the context), sees it: the answers filter by its prefix, a
forward to another process carries it (eventq/gateway/peers.py, ``as``), and each
command written for it carries its name (streams/engine.py). What eventq does on its
own, timers and the processor's follow-ups, runs outside any request: None, so its
commands carry no name. A server without tokens serves every request as None.
"""

from __future__ import annotations

from contextvars import ContextVar

from eventq.protocol.access import Caller

_CALLER: ContextVar[Caller | None] = ContextVar("eventq_caller", default=None)


def current() -> Caller | None:
    """Whom the request being served is served for (None: no tokens, or eventq itself)."""
    return _CALLER.get()


def serve_as(caller: Caller | None) -> None:
    """The caller of the requests this task serves from now on (a connection's task
    sets it before each request)."""
    _CALLER.set(caller)


def prefix() -> str | None:
    """The current caller's queue-name prefix (None: every queue)."""
    caller = _CALLER.get()
    return None if caller is None else caller.prefix


def issuer() -> str | None:
    """The name written with a command issued now (audit; None: nobody's)."""
    caller = _CALLER.get()
    return None if caller is None else caller.name


def sees(name: str) -> bool:
    """Whether queue ``name`` is inside the current caller's prefix."""
    caller = _CALLER.get()
    return caller is None or caller.sees(name)
