"""The documentation a new user follows: links resolve, and it talks of this repository only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "example_suite" / "README.md"]
    + list((ROOT / "docs").glob("*.md"))
)
# [text](target) outside code spans; images too.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"```.*?```", re.S)
CODE = re.compile(r"`[^`\n]*`")


def links(path: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))
    return LINK.findall(text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the same page
        file = (doc.parent / target.split("#", 1)[0]).resolve()
        if not file.exists() or ROOT not in file.parents:
            broken.append(target)
    assert broken == []


def test_the_readme_links_the_documentation() -> None:
    targets = set(links(ROOT / "README.md"))
    for page in ("docs/guide.md", "docs/method.md", "docs/verdict.md", "docs/ci.md"):
        assert page in targets


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_speak_of_this_repository_only(doc: Path) -> None:
    """No paths outside the repository, no words of the workshop it was built in."""
    text = doc.read_text(encoding="utf-8")
    assert "../shared" not in text
    assert "device machine" not in text


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160
