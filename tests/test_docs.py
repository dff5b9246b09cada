"""The documentation's links: every relative link in README.md, docs/*.md and the other Markdown pages of the
repository names a file that exists, every `#anchor` names a heading of its page (GitHub's slugs), and every path of
this repository written in inline code (`azr/rewards/plans.py`) exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "SPEC_FUNCTIONS.md",
    REPO / "examples" / "README.md",
    REPO / "deploy" / "README.md",
]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _prose(path: Path) -> list[str]:
    """The page's lines outside fenced code blocks, with inline code removed."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def _anchors(path: Path) -> set[str]:
    """GitHub's heading slugs: lower case, punctuation dropped (backticks' text kept), spaces as hyphens; a repeated
    heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    text, fenced = path.read_text(encoding="utf-8").splitlines(), False
    for line in text:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6} (.*)", line)
        if fenced or not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def _links(path: Path) -> list[str]:
    return [target for line in _prose(path) for target in LINK.findall(line)]


def test_the_pages_exist_and_link_somewhere():
    assert (REPO / "docs" / "README.md").is_file()
    assert all(page.is_file() for page in PAGES)
    assert len(_links(REPO / "README.md")) >= 15  # the docs map, at least


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, broken


def test_the_readme_is_a_front_door():
    """At most ~300 lines, the two set-up commands at the top, and a map of docs/."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert readme.index("make demo") < readme.index("make test") < readme.index("## GPU quick start")
    assert "(docs/README.md)" in readme


def test_every_page_of_docs_is_on_its_index():
    """docs/README.md lists every page beside it: a new page gets a row there."""
    listed = set(re.findall(r"\]\(([\w.-]+\.md)\)", (REPO / "docs" / "README.md").read_text(encoding="utf-8")))
    assert {p.name for p in (REPO / "docs").glob("*.md")} - {"README.md"} <= listed


CODE_PATH = re.compile(r"`((?:azr|tests|benchmarks|scripts|examples|deploy|docs)/[\w./-]*[\w/])(?::\w+)?`")
# Files of another repository that the docs name by their own paths (the seed project's configs, docs/config.md).
OTHER_PROJECTS = {"azr/config.json", "examples/azr.params.yaml"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_repository_path_in_code_names_a_file_that_exists(page):
    """A path such as `azr/rewards/plans.py` written in inline code is a link a reader follows by hand: it must not go
    stale when a module moves or is split."""
    text = page.read_text(encoding="utf-8")
    stale = sorted({p for p in CODE_PATH.findall(text) if p not in OTHER_PROJECTS and not (REPO / p).exists()})
    assert not stale, stale


def _defined_tests() -> set[str]:
    found = set()
    for path in (REPO / "tests").rglob("*.py"):
        found |= set(re.findall(r"^\s*(?:async )?def (test_\w+)", path.read_text(encoding="utf-8"), re.M))
    return found


def test_every_test_the_spec_names_exists():
    """SPEC_FUNCTIONS.md says which tests prove each property: each named test (`test_...` in inline code, or a
    `tests/...py::test_...` path) is defined under tests/, in that file where one is given."""
    text = (REPO / "SPEC_FUNCTIONS.md").read_text(encoding="utf-8")
    code = re.findall(r"`([^`]+)`", text)
    defined = _defined_tests()
    missing = [name for name in code if re.fullmatch(r"test_\w+", name) and name not in defined]
    paths = (re.fullmatch(r"(tests/[\w/]+\.py)::(test_\w+)", c) for c in code)
    for path, name in (match.groups() for match in paths if match):
        source = REPO / path
        if not source.is_file() or not re.search(rf"def {name}\b", source.read_text(encoding="utf-8")):
            missing.append(f"{path}::{name}")
    assert not missing, f"SPEC_FUNCTIONS.md names tests that do not exist: {missing}"
    assert len([c for c in code if c.startswith("test_")]) > 200  # the check reads the names it should
