"""The docs a newcomer reads: a short README that starts with the two commands, and no dead links.

Links rot silently when a file, a test or a heading is renamed; these checks are cheap and
catch it at once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text without code blocks and inline code, where brackets are not links."""
    return _CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation gone, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page offers, numbered as GitHub numbers repeated headings."""
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(page: Path) -> list[str]:
    """Relative link targets of a page (web addresses left out)."""
    found = _LINK.findall(_prose(page.read_text()))
    return [t for t in found if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def broken(page: Path, target: str) -> str | None:
    """Why a link from page does not resolve inside the repository, or None when it does."""
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.is_relative_to(REPO):
        return f"{target} leaves the repository"
    if not dest.exists():
        return f"{target}: no {dest.relative_to(REPO)}"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}"
    return None


def test_readme_is_short_and_opens_with_the_two_commands():
    text = README.read_text()
    size = len(text.encode())
    assert size <= 12_000, f"README.md is {size} bytes; move reference to docs/"
    head = [line.split("#")[0].strip() for line in text.splitlines()[:8]]
    assert "./scripts/demo.sh" in head and "./scripts/test.sh" in head, head
    assert head.index("./scripts/demo.sh") < head.index("./scripts/test.sh")


def test_performance_page_is_one_table_of_current_figures():
    """docs/performance.md holds the current figures only: one table whose every row names its
    command and its machine and date; the history lives under docs/results/."""
    text = (REPO / "docs" / "performance.md").read_text()
    assert len(text.encode()) <= 12_000, "docs/performance.md over 12 KB: move history to docs/results/"
    rows = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header == ["what", "figure", "target", "command (`scripts/bench/`)", "machine, date"], header
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == len(header) and cells[3] and cells[4], row


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path):
    problems = [why for t in links(page) if (why := broken(page, t))]
    assert not problems, f"{page.relative_to(REPO)}: " + "; ".join(problems)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    assert DOCS, "docs/*.md missing"
    assert not [p.name for p in DOCS if p not in linked]


def test_link_checker_finds_dead_links():
    """The checker itself: a missing file and a missing heading are reported, good ones are not."""
    page = REPO / "docs" / "cluster.md"
    assert broken(page, "no-such-page.md")
    assert broken(page, "options.md#no-such-heading")
    assert broken(page, "../../outside.md")
    assert broken(page, "options.md#run") is None
    assert _slug("Loading: `load_split`") == "loading-load_split"


def test_license_and_citation_match_the_project():
    """LICENSE is the MIT text pyproject's `license` names; CITATION.cff cites this version and the
    mediapipe version constraints.txt pins (the keypoints depend on that exact build); the demo ends
    with the report written and says where to look (issue 34)."""
    project = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^license = "MIT"$', project, re.M)
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    citation = (REPO / "CITATION.cff").read_text()
    version = re.search(r'^version = "(.+)"$', project, re.M).group(1)
    mediapipe = re.search(r"^mediapipe==(.+)$", (REPO / "constraints.txt").read_text(), re.M).group(1)
    assert re.search(rf"^version: {re.escape(version)}$", citation, re.M)
    assert re.search(rf"^    version: {re.escape(mediapipe)}$", citation, re.M)
    demo = (REPO / "scripts" / "demo.sh").read_text().splitlines()
    report = next(i for i, line in enumerate(demo) if line.startswith("phoenix-keypoints report"))
    assert "report/index.html" in demo[-1] and report < len(demo) - 1


def test_full_release_numbers_come_from_the_performance_page():
    """README's "The full release" gives time per core and per node, memory and disk in one
    place, each figure as docs/performance.md has it (one source, so they cannot disagree), each
    row naming the benchmark script that measured it (issue 34: README said ~50 ms and 13
    core-hours where performance.md said 31-68 ms and 8-18; nothing said the disk or memory)."""
    text = README.read_text()
    section = text[text.index("## The full release"):text.index("## Exit codes")]
    perf = (REPO / "docs" / "performance.md").read_text()
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert {r.split("|")[1].strip() for r in rows} >= {"time per core", "one 32-core node", "memory",
                                                      "disk"}, rows
    figures = re.findall(r"~?\d[\d,.]*(?:-\d[\d,.]*)? ?(?:ms|MiB|GB|min|core-hours)\b", "".join(rows))
    assert len(figures) >= 8, figures
    assert not [f for f in figures if f not in perf], [f for f in figures if f not in perf]
    for row in rows:
        script = re.search(r"`(\w+\.py)`\s*\|\s*$", row)
        assert script and (REPO / "scripts" / "bench" / script[1]).is_file(), row
        assert f"{script[1]}" in perf, f"{script[1]} has no row in docs/performance.md"


def _code_map() -> tuple[set[str], set[str]]:
    """docs/how-it-works.md's code map: (the modules its tables list, as paths from the checkout;
    the rooms it opens with a "`room/`: what it holds" line)."""
    text = (REPO / "docs" / "how-it-works.md").read_text()
    section = text[text.index("## Code map"):]
    section = section[:section.index("\n## ", 1)]
    modules: set[str] = set()
    for part in re.split(r"^### ", section, flags=re.M)[1:]:
        top = part.split("/", 1)[0]  # "jobs" or "extract": the table cells are paths inside it
        modules |= {f"{top}/{m}" for m in re.findall(r"^\| `([^`]+\.py)` \|", part, re.M)}
    return modules, set(re.findall(r"^`([a-z_/]+/)`:", section, re.M))


def _has_code(module: Path) -> bool:
    """Whether a module holds more than its docstring (a room's __init__.py says only what the
    room holds, which the map's room line says)."""
    import ast

    body = ast.parse(module.read_text()).body
    return not (len(body) == 1 and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant))


def test_the_code_map_lists_every_module_and_room():
    """The code map says it lists every module of extract/ and jobs/ with its role: a module added
    without its line there fails here (issue 56: five modules had none), as does a room without its
    line. A room's __init__.py holding only its docstring is its room line's."""
    modules, rooms = _code_map()
    files = [p for top in ("extract", "jobs") for p in sorted((REPO / top).rglob("*.py"))]
    unlisted = [p.relative_to(REPO).as_posix() for p in files
                if p.relative_to(REPO).as_posix() not in modules
                and (p.name != "__init__.py" or _has_code(p))]
    assert unlisted == [], f"docs/how-it-works.md's code map lacks {unlisted}"
    folders = {f"{p.parent.relative_to(REPO).as_posix()}/" for p in files if p.name == "__init__.py"}
    missing = sorted(f for f in folders if f.count("/") <= 2 and f not in rooms)
    assert missing == [], f"docs/how-it-works.md's code map has no line for the rooms {missing}"


def test_development_page_says_how_pyproject_installs_the_tool():
    """docs/development.md names the entry point as pyproject.toml spells it and says how the
    packages are found as pyproject finds them (issue 56: it said `jobs.cli:main` and that
    setuptools finds the packages, where pyproject lists them by hand)."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    page = (REPO / "docs" / "development.md").read_text()
    for name, target in project["project"]["scripts"].items():
        assert f'`{name} = "{target}"`' in page, (name, target)
    finds = "find" in project["tool"]["setuptools"].get("packages", {})
    assert ("packages.find" in page) == finds, "development.md says otherwise of finding packages"
