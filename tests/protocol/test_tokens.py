"""eventq/protocol/tokens.py: a line without ``=`` (no flag possible) takes a short way
through ``split_line``, which must split it exactly as the general way does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eventq.protocol.tokens import Tokens, _add_flag, is_flag, split_line


def general_split(line: str) -> Tokens:
    """``split_line``'s general way, for every line."""
    pieces = line.split(" ")
    flags: dict[str, str] = {}
    words: list[str] = []
    well_formed = True
    for index, piece in enumerate(pieces):
        if is_flag(piece):
            well_formed = _add_flag(flags, piece) and well_formed
        elif piece and index > 0:
            words.append(piece)
    return Tokens(pieces[0], tuple(words), flags, flags_malformed=not well_formed)


@given(st.lists(st.sampled_from(["add", "lease", "-", "=", " ", "  ", "x", "-p=1", "\t", "",
                                 "1b4e28ba-2fa1-41d2-883f-0016d3cca427"]), max_size=12)
       .map("".join))
def test_splits_as_the_general_way(line):
    assert split_line(line) == general_split(line)


@given(st.text(alphabet=" -=ab\t", max_size=30))
def test_splits_any_line_as_the_general_way(line):
    assert split_line(line) == general_split(line)
