"""The docs hold together, for a reader with nothing but a clone of the repository:

- every relative link in README.md and docs/*.md leads to a file of the repository (the
  README once linked a specification beside the repository, which a clone, or the
  project's page on GitHub, does not have), and every #anchor to a heading that exists;
- every section a comment or docstring cites (docs/<name>.md, "<Section>") is a heading
  of that document, and every citation of a document in a comment or docstring names
  its section;
- nothing (a comment, a docstring, a doc) cites a file the repository lacks: the
  specifications outside it, by their old paths;
- every path of the repository a doc, a comment or a docstring mentions exists.

Each check has a unit test of its checker beside it. They read text only (no ``ast``,
no ``tokenize``), so the whole file runs in about a second."""

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
# next line of a comment or docstring), and the sections that follow it joined by "and"
# or a comma (docs/architecture.md, "The gateway" and "Abandoned commands").
_SECTION = r'(?:#\s*)?"[^"]+"'
CITATION = re.compile(
    rf'docs/([\w-]+\.md),\s*({_SECTION}(?:(?:\s*,\s*|\s+and\s+(?:#\s*)?){_SECTION})*)')
QUOTED = re.compile(r'"([^"]+)"')
SOURCES = sorted(p for folder in ("eventq", "streams", "tests", "bench", "tools")
                 for p in (ROOT / folder).rglob("*.py"))


def cited_sections() -> list[tuple[str, str, str]]:
    found = []
    for path in SOURCES:
        for doc, sections in CITATION.findall(path.read_text(encoding="utf-8")):
            for section in QUOTED.findall(sections):
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


# The prose of a Python file: its comments and its triple-quoted strings (docstrings),
# found lexically: single-line strings are matched too, so that a "#" or a path inside
# one is neither a comment nor prose (test data stays out of the checks).
TRIPLE_QUOTED = r"(\"{3}|'{3})(.*?)\1"  # group 2: prose
ONE_LINE_STRING = r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"  # not prose
COMMENT = r"#([^\n]*)"  # group 3: prose
CODE_PROSE = re.compile("|".join((TRIPLE_QUOTED, ONE_LINE_STRING, COMMENT)), re.S)


def code_prose(source: str) -> str:
    """The comments and triple-quoted strings of Python ``source``, one after another."""
    return "\n".join(m.group(2) or m.group(3) or "" for m in CODE_PROSE.finditer(source))


# A specification kept beside the repository, cited by a path a clone does not have:
# spec/<name>.md (the docs say the same in docs/<name>.md), or anything in the shared
# folder beside the repository (two dots, a slash, shared).
MISSING_FILE_CITE = re.compile(r"(?<![\w/.-])spec/[\w-]+\.md|\.\./shared\b")


def cites_of_missing_files(text: str) -> list[str]:
    return MISSING_FILE_CITE.findall(text)


# A path of the repository: it starts with one of its folders and ends in a word
# character (so a sentence's full stop is not part of it). <name> is a placeholder and
# names no file; * is a pattern, which must match one.
REPOSITORY_PATH = re.compile(
    r"(?<![\w./-])((?:eventq|streams|tests|bench|tools|docs)/[\w./*<>-]*[\w*>])")


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """The repository paths ``text`` mentions that do not exist under ``root``."""
    missing = []
    for path in REPOSITORY_PATH.findall(text):
        if "<" in path:
            continue
        found = any(root.glob(path)) if "*" in path else (root / path).exists()
        if not found:
            missing.append(path)
    return missing


def prose_of_sources() -> list[tuple[str, str]]:
    """(file, text to check): the docs whole, the code's comments and docstrings."""
    docs = [(str(doc.relative_to(ROOT)), doc.read_text(encoding="utf-8")) for doc in DOCS]
    code = [(str(path.relative_to(ROOT)), code_prose(path.read_text(encoding="utf-8")))
            for path in SOURCES]
    return docs + code


def test_nothing_cites_a_file_the_repository_lacks():
    """A comment, a docstring or a doc that cites spec/<name>.md, or the shared folder
    beside the repository, points a reader with a clone at nothing: docs/ says the same
    in the repository."""
    broken = [f"{name}: {cite}" for name, text in prose_of_sources()
              for cite in cites_of_missing_files(text)]
    assert not broken, "cites of files outside the repository:\n" + "\n".join(broken)


def test_every_repository_path_the_docs_and_comments_mention_exists():
    """A file moved or renamed must not leave the README, the docs, a comment or a
    docstring naming the old path."""
    checked = prose_of_sources()
    assert sum(len(REPOSITORY_PATH.findall(text)) for _, text in checked) > 100
    broken = [f"{name}: {path}" for name, text in checked for path in missing_paths(text)]
    assert not broken, "paths that do not exist:\n" + "\n".join(broken)


def test_the_prose_of_code_is_its_comments_and_docstrings():
    triple = '"' * 3
    source = (f'{triple}Module doc: eventq/core.{triple}\n'
              'x = "tests/data # not a comment"  # a comment: bench/x.py\n'
              "y = 'docs/a.md'\n"
              f"def f():\n    {triple}Its doc,\n    over lines.{triple}\n")
    prose = code_prose(source)
    assert "Module doc: eventq/core." in prose and " a comment: bench/x.py" in prose
    assert "Its doc,\n    over lines." in prose
    assert "tests/data" not in prose and "docs/a.md" not in prose and "not a comment" not in prose


def test_the_checker_finds_cites_of_files_outside_the_repository():
    text = "see spec/workflows.md, 3, and ../shared/spec/protocol.md; not docs/workflows.md"
    assert cites_of_missing_files(text) == ["spec/workflows.md", "../shared"]
    assert cites_of_missing_files("docs/security.md and a spec of its own") == []


def test_the_checker_finds_paths_that_do_not_exist(tmp_path):
    (tmp_path / "eventq" / "core").mkdir(parents=True)
    (tmp_path / "eventq" / "core" / "machine.py").write_text("")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "gateway_bench.py").write_text("")
    text = ("`eventq/core/machine.py`, eventq/core/ and bench/gateway_bench.py. "
            "tests/nowhere.py, docs/<name>.md, bench/*_bench.py, tools/*.py, "
            "https://example.com/eventq/gone.py and my/eventq/gone.py")
    assert missing_paths(text, tmp_path) == ["tests/nowhere.py", "tools/*.py"]


# A document cited in a comment or docstring: docs/<name>.md, not inside another path.
# Its citation names a section when a comma and the quoted section follow, as CITATION
# reads them (the section may wrap onto the comment's next line). A bare docs/<name>.md
# sends the reader to the whole page, and a section by number or by a quoted sentence
# of an older layout to nothing the check of sections above can hold to a heading.
DOCS_FILE = re.compile(r"(?<![\w./-])docs/[\w-]+\.md")
NAMES_SECTION = re.compile(r',\s*(?:#\s*)?"')

def bare_citations(source: str) -> list[tuple[int, str]]:
    """(line, document) of each citation in the comments and docstrings of Python
    ``source`` that names no section."""
    found = []
    for m in CODE_PROSE.finditer(source):
        group = 2 if m.group(2) is not None else 3 if m.group(3) is not None else 0
        if not group:
            continue  # a one-line string: data, not prose
        start, end = m.span(group)
        for cite in DOCS_FILE.finditer(source, start, end):
            if not NAMES_SECTION.match(source, cite.end()):
                found.append((source.count("\n", 0, cite.start()) + 1, cite.group()))
    return found


def test_every_citation_of_a_document_in_the_code_names_its_section():
    """A comment or docstring that cites docs/<name>.md names the section it relies on,
    as docs/<name>.md, "<Section>": the reader finds the words the code relies on, and
    the check of sections above holds them to a heading of the document."""
    bare = [f"{path.relative_to(ROOT)}:{line}: {doc}" for path in SOURCES
            for line, doc in bare_citations(path.read_text(encoding="utf-8"))]
    assert not bare, "citations that name no section:\n" + "\n".join(bare)


def test_the_checker_finds_citations_that_name_no_section():
    triple = '"' * 3
    source = (f'{triple}Module doc (docs/security.md, "TLS"), and docs/fencing.md.{triple}\n'
              'x = "docs/a.md"  # data, then a bare one: docs/protocol.md\n'
              "# wrapped: (docs/workflows.md,\n"
              '# "Dependencies"); numbered: docs/workflows.md, 3; quoted: docs/spark.md: "a"\n'
              f"def f():\n    {triple}Its doc: docs/migrate.md's vectors,\n"
              '    docs/architecture.md,\n    "Lanes"; kafka/docs/x.md and docs/<name>.md.'
              f"{triple}\n")
    assert bare_citations(source) == [
        (1, "docs/fencing.md"), (2, "docs/protocol.md"), (4, "docs/workflows.md"),
        (4, "docs/spark.md"), (6, "docs/migrate.md")]


# An issue of the project's tracker, cited by number ("issue N's size"): a reader of the
# code cannot follow it, and the number says nothing of why. Say what the figure or the
# rule is, and cite docs/ for the design. Other projects' issues (faust-streaming#223)
# are references a reader can follow, and are not matched.
ISSUE_CITE = re.compile(r"\b[Ii]ssues? #?\d+")


def test_no_comment_or_doc_cites_an_issue_number():
    broken = [f"{name}: {cite}" for name, text in prose_of_sources()
              for cite in ISSUE_CITE.findall(text)]
    assert not broken, "say what the issue asked, not its number:\n" + "\n".join(broken)


def test_the_checker_finds_issue_numbers():
    assert ISSUE_CITE.findall("issue 30's size; Issue 13: metrics; issues #4") == [
        "issue 30", "Issue 13", "issues #4"]
    assert ISSUE_CITE.findall("faust-streaming#223 and an issue of faust's") == []


def test_the_citation_pattern_reads_every_section_a_citation_names():
    text = ('(docs/architecture.md, "The gateway" and "Abandoned commands"); '
            'docs/workflows.md, "Tags", "Job and queue blocks"; docs/protocol.md, "run" '
            'says "so" and more')
    read = [(doc, QUOTED.findall(sections)) for doc, sections in CITATION.findall(text)]
    assert read == [("architecture.md", ["The gateway", "Abandoned commands"]),
                    ("workflows.md", ["Tags", "Job and queue blocks"]),
                    ("protocol.md", ["run"])]
