"""Every relative link in README.md and docs/*.md leads to a file of the repository
(the README once linked the spec at ../shared/spec/protocol.md, which a clone, or the
project's page on GitHub, does not have), and every #anchor to a heading that exists."""

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


# A citation in code: docs/<name>.md, "<Section>" (the section's words may wrap onto the
# next line of a comment or docstring).
CITATION = re.compile(r'docs/([\w-]+\.md),\s*(?:#\s*)?"([^"]+)"')
SOURCES = sorted(p for folder in ("eventq", "streams", "tests", "bench")
                 for p in (ROOT / folder).rglob("*.py"))


def cited_sections() -> list[tuple[str, str, str]]:
    found = []
    for path in SOURCES:
        for doc, section in CITATION.findall(path.read_text(encoding="utf-8")):
            words = re.sub(r"\s*\n\s*#?\s*", " ", section).strip()
            found.append((str(path.relative_to(ROOT)), doc, words))
    return found


def test_every_section_code_cites_is_a_heading_of_its_document():
    """Comments cite the design by document and section (docs/architecture.md,
    "Lanes"); a section renamed or removed must not leave them pointing nowhere."""
    citations = cited_sections()
    assert len(citations) > 20  # the pattern still finds them
    headings = {path.name: {h.strip() for h in HEADING.findall(path.read_text(encoding="utf-8"))}
                for path in DOCS}
    broken = [f"{source}: {doc}, \"{section}\"" for source, doc, section in citations
              if section not in headings.get(doc, set())]
    assert not broken, "citations of sections that do not exist:\n" + "\n".join(broken)
