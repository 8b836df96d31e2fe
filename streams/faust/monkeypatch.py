"""How eventq replaces methods of faust's and aiokafka's internals (the patches are in
streams/faust/patches.py, fetch_wait.py, lease.py and table_recovery.py): each
replacement remembers the method it replaced, so that a second install does nothing
and tests can read the original.

The classes patched are reached as ``Any``: they are the frameworks' internals (faust
types its interfaces, not these methods; aiokafka has no types), and replacing a
method is just what a class's types rule out.
"""

from __future__ import annotations

from typing import Any, Callable

ORIGINAL = "__eventq_original__"


def original_of(method: object) -> Any:
    """The method ``method`` replaced (None: it is not a replacement of eventq's)."""
    return getattr(method, ORIGINAL, None)


def replace(owner: Any, name: str, replacement: Callable[..., Any]) -> None:
    """Put ``replacement`` in the place of ``owner``'s method ``name``."""
    replacement.__dict__[ORIGINAL] = getattr(owner, name)
    setattr(owner, name, replacement)
