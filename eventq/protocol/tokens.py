"""Splitting one request line into its verb, positional words and flags.

Splitting finds what check 1 of the spec's check order is about ("flag syntax, even
before the verb is looked at"). It does not fail: the parser still needs the verb and
the words of a line with bad flags to skip its data block. It splits the way workq's
``prot.ParseCmd`` does:

- the line is split at every single space; empty pieces (from repeated, leading or
  trailing spaces) are not tokens, and tabs are ordinary characters;
- a token that starts with ``-`` and contains ``=`` is a flag ``-key=value`` wherever
  it stands; the value is what lies between the first and a second ``=``; an empty
  key or value, or a key given twice, makes ``flags_malformed`` true (the reply is
  ``Invalid command flags``);
- the verb is the first piece of the split, before empty pieces are dropped, so a line
  that starts with a space or with a flag has no valid verb (``Unknown command``).
"""

from __future__ import annotations

from dataclasses import dataclass

_SEPARATOR = " "
_FLAG_PREFIX = "-"
_FLAG_EQUALS = "="


@dataclass(frozen=True, slots=True)
class Tokens:
    """A request line taken apart: ``verb``, positional ``words`` after it, ``flags``.

    ``flags`` holds the well-formed flags; ``flags_malformed`` says whether any flag
    token had an empty key or value or repeated a key.
    """

    verb: str
    words: tuple[str, ...]
    flags: dict[str, str]
    flags_malformed: bool


def is_flag(token: str) -> bool:
    """Whether a token is a flag: it starts with ``-`` and contains ``=``."""
    return token.startswith(_FLAG_PREFIX) and _FLAG_EQUALS in token


def _add_flag(flags: dict[str, str], token: str) -> bool:
    """Record ``-key=value``; False if the key or value is empty or the key repeats."""
    key, _, rest = token[len(_FLAG_PREFIX) :].partition(_FLAG_EQUALS)
    value = rest.partition(_FLAG_EQUALS)[0]  # up to a second "=", if any
    if not key or not value or key in flags:
        return False
    flags[key] = value
    return True


def split_line(line: str) -> Tokens:
    """Tokenize a request line (without its ``\\r\\n``)."""
    pieces = line.split(_SEPARATOR)
    if _FLAG_EQUALS not in line:
        # No token can be a flag (the common line: add, lease, complete): the words are
        # the pieces after the first, the empty ones dropped, as the loop below leaves them.
        plain = pieces[1:] if "" not in pieces else [piece for piece in pieces[1:] if piece]
        return Tokens(pieces[0], tuple(plain), {}, flags_malformed=False)
    flags: dict[str, str] = {}
    words: list[str] = []
    well_formed = True
    for index, piece in enumerate(pieces):
        if is_flag(piece):
            well_formed = _add_flag(flags, piece) and well_formed
        elif piece and index > 0:
            words.append(piece)
    return Tokens(pieces[0], tuple(words), flags, flags_malformed=not well_formed)
