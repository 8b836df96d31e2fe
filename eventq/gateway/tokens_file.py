"""The tokens file (docs/security.md, "Where tokens and certificates come from"): read
at start and again on SIGHUP. Its text is parsed by the pure ``eventq.protocol.access``;
this module only reads it and says what went wrong, never what a token is.
"""

from __future__ import annotations

import logging
from pathlib import Path

from eventq.protocol.access import Tokens, TokensFileError, TokenStore, parse_tokens

log = logging.getLogger(__name__)


class TokensUnusable(Exception):
    """The tokens file cannot be read or parsed: the message says which and what to do."""


def read_tokens(path: Path) -> Tokens:
    try:
        text = path.read_text(encoding="latin-1")
    except OSError as error:
        raise TokensUnusable(
            f"cannot read the tokens file {path}: {error.strerror or error}") from None
    try:
        tokens = parse_tokens(text)
    except TokensFileError as error:
        raise TokensUnusable(f"{path}: {error}") from None
    if not len(tokens):  # it would lock everyone out: say so rather than serve nobody
        raise TokensUnusable(f"{path} holds no token: add `<token> <role>[,<role>...] "
                             "[<prefix>]` lines, or start without --tokens-file")
    return tokens


def load_tokens(tokens_file: str) -> TokenStore | None:
    """The tokens of ``tokens_file`` (None: no file given, tokens off). Raises
    ``TokensUnusable`` (a file without tokens too)."""
    if not tokens_file:
        return None
    path = Path(tokens_file)
    tokens = read_tokens(path)
    if tokens.peer_token is None:
        log.warning("%s has no admin token without a prefix: other eventq processes "
                    "cannot link to this one (they authenticate as admin)", path)
    return TokenStore(tokens)


def reload_tokens(store: TokenStore, tokens_file: str) -> None:
    """SIGHUP: read the file again; a file that cannot be used leaves the tokens held."""
    try:
        tokens = read_tokens(Path(tokens_file))
    except TokensUnusable as error:
        log.error("tokens not reloaded, the previous ones stay: %s", error)
        return
    store.replace(tokens)
    log.info("tokens reloaded from %s: %d tokens", tokens_file, len(tokens))
