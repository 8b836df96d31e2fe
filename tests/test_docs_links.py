"""Every relative link in README.md and docs/*.md leads to a file of the repository
(issue 27, item 6: the README linked the spec at ../shared/spec/protocol.md, which a
clone, or the project's page on GitHub, does not have), and every #anchor to a heading
that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text without code, where ``[x](y)`` is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text(encoding="utf-8")))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(prose(path.read_text(encoding="utf-8")))}


def is_relative(target: str) -> bool:
    return re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) is None and not target.startswith("//")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repository(doc: Path):
    broken = []
    for target in filter(is_relative, links(doc)):
        file_part, _, anchor = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(f"{target}: no such file in the repository")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not broken, f"{doc.name}: {broken}"


def test_the_checker_sees_links_and_refuses_ones_that_leave_the_repository(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[spec](../shared/spec/protocol.md) `[no](link)`\n"
                    "```\n[not](a-link)\n```\n[web](https://example.com)\n")
    assert links(page) == ["../shared/spec/protocol.md", "https://example.com"]
    assert not (ROOT / "../shared/spec/protocol.md").resolve().is_relative_to(ROOT)
    assert slug("inspect digest and `inspect bulk`") == "inspect-digest-and-inspect-bulk"
    assert slug("-backoff") == "-backoff"
