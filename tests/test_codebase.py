"""The codebase's own rules, checked on its source: data flows one way through rooms, and functions
stay short.

A room is a subpackage of extract/ or jobs/; its __init__.py docstring says what it holds and, on a
line `May import: ...`, the rooms it may import. That line is the rule: this test reads it, so the
docstring and the check cannot drift apart. extract/ never imports jobs/; jobs/messages.py and
jobs/faults.py import nothing of the project and may be imported anywhere; the command modules at
the top of jobs/ and extract/__init__.py (the public face) may import any room.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

MAX_LINES = 60
PACKAGES = ("extract", "jobs")
LEAVES = ("jobs.messages", "jobs.faults")  # import nothing of this project; anyone may import them
LOOSE_LIMIT = {"extract": 4, "jobs": 12}  # modules beside the rooms (not counting __init__.py)
TOP = "phoenix_keypoints"  # the import name: extract/ and jobs/ are its subpackages (pyproject)


def _short(module: str) -> str:
    """`phoenix_keypoints.extract.x` -> `extract.x`: the rooms are named by their folders."""
    return module.removeprefix(TOP + ".")


def _name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts)


def rooms() -> dict[str, set[str]]:
    """room -> the rooms (or modules) its docstring says it may import."""
    out = {}
    for package in PACKAGES:
        for init in sorted((REPO / package).glob("*/__init__.py")):
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            found = re.search(r"^May import: (.*)$", doc, re.M)
            assert found, f"{init.relative_to(REPO)}: its docstring names no `May import:` line"
            allowed = found.group(1).rstrip(".")
            out[_name(init)] = set() if allowed.startswith("nothing") else \
                {a.strip() for a in allowed.split(",")}
    return out


def imports(path: Path) -> list[str]:
    """The project modules a file imports, anywhere in it (lazy imports in functions too)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [_short(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module = _short(node.module)
            out += [f"{module}.{a.name}" for a in node.names] \
                if module in PACKAGES else [module]
    return [m for m in out if m.split(".")[0] in PACKAGES]


def _room_of(module: str, known: dict[str, set[str]]) -> str | None:
    return next((r for r in known if module == r or module.startswith(r + ".")), None)


def _covered(module: str, allowed: set[str]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


def test_every_room_imports_only_the_rooms_it_names() -> None:
    known = rooms()
    assert set(known) == {"extract.keypoints", "extract.sources", "extract.corpora",
                          "extract.outputs", "extract.inspect", "extract.families", "jobs.rundir",
                          "jobs.schedule", "jobs.run", "jobs.cluster"}, sorted(known)
    offenders = []
    for package in PACKAGES:
        for path in _modules(package):
            room = _room_of(_name(path), known)
            for module in imports(path):
                target = _room_of(module, known)
                if room is None or target == room:
                    continue
                if not _covered(module, known[room] | set(LEAVES)):
                    offenders.append(f"{_name(path)} imports {module} ({room} may import "
                                     f"{', '.join(sorted(known[room])) or 'nothing'})")
    assert not offenders, "\n".join(offenders)


def test_extract_never_imports_jobs_and_leaves_import_nothing() -> None:
    offenders = [f"{_name(p)}: {m}" for p in _modules("extract") for m in imports(p)
                 if m.split(".")[0] == "jobs"]
    offenders += [f"{leaf}: {m}" for leaf in LEAVES
                  for m in imports(REPO / (leaf.replace(".", "/") + ".py"))]
    assert not offenders, offenders


def test_only_holistic_imports_mediapipe() -> None:
    """mediapipe has no Python 3.13 wheel: every other module must import and run without it
    (tests/test_py313.py runs them there). The names and skeletons are spelled out in points.py."""
    allowed = {"extract.families.holistic.runner"}
    offenders = []
    for path in (p for package in PACKAGES for p in _modules(package)):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "mediapipe" for n in names) and _name(path) not in allowed:
                offenders.append(f"{_name(path)}:{node.lineno}")
    assert not offenders, offenders


def test_no_room_imports_a_room_above_it() -> None:
    """The rooms' allowed imports form no circle: each room sits above the ones it may import."""
    known = rooms()
    graph = {r: {_room_of(a, known) for a in allowed} - {None} for r, allowed in known.items()}
    order: list[str] = []
    while graph:
        ready = sorted(r for r, deps in graph.items() if deps <= set(order))
        assert ready, f"rooms that import each other: {sorted(graph)}"
        order += ready
        graph = {r: d for r, d in graph.items() if r not in ready}


def module_graph(lazy: bool = False) -> dict[str, set[str]]:
    """module -> the project modules it imports at module level (the imports that run on import),
    or (lazy) anywhere in it, imports inside functions too."""
    modules = {_name(p): p for package in PACKAGES for p in _modules(package)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree) if lazy else tree.body:
            for m in imports_of(node):
                while m and m not in modules:
                    m = m.rpartition(".")[0]
                if m and m != name and not m.startswith(name + ".") and not name.startswith(m + "."):
                    deps.add(m)  # (a package and its own modules are one thing)
        graph[name] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[str]:
    """Every import circle of the graph, each as 'a -> b -> a' (one per strongly connected set)."""
    seen: dict[str, int] = {}
    found: list[str] = []

    def visit(n: str, stack: list[str]) -> None:
        if seen.get(n) == 1:
            found.append(" -> ".join([*stack[stack.index(n):], n]))
        if seen.get(n) is None:
            seen[n] = 1
            for d in sorted(graph.get(n, ())):
                visit(d, [*stack, n])
            seen[n] = 2

    for n in sorted(graph):
        visit(n, [])
    return found


def test_no_import_circle_inside_a_room_lazy_imports_too() -> None:
    """Inside each room (and among the loose modules of extract/ and jobs/) modules import one way,
    counting imports inside functions: a circle a function-level import hides is still two modules
    that cannot be read, tested or moved apart (issue 38: estimator.py <-> holistic.py, and
    outputs/export.py -> loader -> tensors -> wholebody -> export). The registry of families
    imports a family by its name (importlib), so no room below extract/families/ reaches it."""
    known = rooms()
    graph = module_graph(lazy=True)

    def room(m: str) -> str:
        return _room_of(m, known) or m.split(".")[0]

    inside = {m: {d for d in deps if room(d) == room(m)} for m, deps in graph.items()}
    assert not circles(inside), "\n".join(circles(inside))


def test_no_import_circle_anywhere_lazy_imports_too() -> None:
    graph = module_graph(lazy=True)
    assert not circles(graph), "\n".join(circles(graph))


def test_no_module_level_import_circle() -> None:
    graph, seen = module_graph(), {}

    def visit(n: str, stack: list[str]) -> None:
        if seen.get(n) == 1:
            pytest.fail(f"import circle: {' -> '.join([*stack[stack.index(n):], n])}")
        if seen.get(n) != 2:
            seen[n] = 1
            for d in sorted(graph[n]):
                visit(d, [*stack, n])
            seen[n] = 2

    for n in sorted(graph):
        visit(n, [])


def imports_of(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [_short(a.name) for a in node.names if _short(a.name).split(".")[0] in PACKAGES]
    module = _short(node.module or "") if isinstance(node, ast.ImportFrom) else ""
    if module.split(".")[0] in PACKAGES:
        return [f"{module}.{a.name}" for a in node.names] if module in PACKAGES else [module]
    return []


def _project_files() -> list[Path]:
    """Every Python file of the project but this one (which names the rooms by their folders)."""
    return [p for d in (*PACKAGES, TOP, "tests", "scripts") for p in sorted((REPO / d).rglob("*.py"))
            if "__pycache__" not in p.parts and p != Path(__file__).resolve()]


def test_the_tools_modules_reach_each_other_by_its_own_import_name() -> None:
    """Issue 40: a researcher's `extract.py` or `jobs.py` beside a notebook must not stand in for
    the tool's modules, so nothing imports `extract` or `jobs` as a top-level name (nor names one
    in a string that importlib or `python -m` would resolve): always `phoenix_keypoints.`..."""
    offenders = []
    for path in _project_files():
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            offenders += [f"{path.relative_to(REPO)}:{node.lineno} imports {n}" for n in names
                          if n.split(".")[0] in PACKAGES]
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    re.fullmatch(r"(extract|jobs)(\.[a-z_]+)+(:\w+)?", node.value):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno} names {node.value!r}")
    assert not offenders, "\n".join(offenders)


def test_pyproject_lists_every_package_by_its_installed_name() -> None:
    """The packages are listed by hand (automatic discovery would also take the top-level extract/
    and jobs/ as packages of their own, beside their links in phoenix_keypoints/): a folder with an
    __init__.py missing from pyproject's list would be left out of the wheel."""
    tomllib = pytest.importorskip("tomllib")  # 3.11+

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {TOP} | {f"{TOP}.{_name(init)}" for package in PACKAGES
                       for init in (REPO / package).rglob("__init__.py")}
    assert listed == on_disk, (sorted(on_disk - listed), sorted(listed - on_disk))


@pytest.mark.parametrize("package", PACKAGES)
def test_few_loose_modules_beside_the_rooms(package: str) -> None:
    loose = sorted(p.name for p in (REPO / package).glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= LOOSE_LIMIT[package], loose


def test_functions_in_jobs_are_short() -> None:
    long = []
    for path in _modules("jobs"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{_name(path)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long


def test_the_public_names_the_docs_show_import() -> None:
    """Every `from extract... import NAMES` (or `from jobs ...`: run_job) and `extract.module.name`
    the README and docs show a user resolves (a name moved without its docs fails here)."""
    shown = set()
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for module, names in re.findall(r"^\s*from (phoenix_keypoints[\w.]*) import ([\w, ]+)",
                                        text, re.M):
            shown |= {(module, n.strip()) for n in names.split(",") if n.strip()}
        for dotted in re.findall(r"`((?:phoenix_keypoints\.)?extract(?:\.\w+)+)(?:\(|`)", text):
            if dotted.endswith(".py"):  # a file's name (a user's own extract.py), not a module
                continue
            module, _, name = dotted.rpartition(".")
            shown.add((module if module.startswith(TOP) else f"{TOP}.{module}", name))
    assert (TOP, "load_split") in shown, "the docs show the public face"
    assert {(TOP, "extract_keypoints"), (TOP, "run_job")} <= shown, "docs/python.md"
    import importlib

    missing = []
    for module, name in sorted(shown):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            try:  # `extract.room.module` named whole
                importlib.import_module(f"{module}.{name}")
                continue
            except ImportError:
                missing.append(f"{module}.{name}")
                continue
        if not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert not missing, missing


def _internal_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for each `phoenix_keypoints...` a file imports: `from M import n` yields
    M.n where M.n is a module of the package (a submodule imported by name), else M."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == TOP]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and \
                (node.module or "").split(".")[0] == TOP:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                    if _by_path(f"{node.module}.{a.name}") and a.name != "*"]
    return out


def _by_path(module: str) -> Path | None:
    """The file a module is by path alone, as pyright and jedi find it (no import hook, no
    `__path__` changed at run time): pkg/a/b.py or pkg/a/b/__init__.py under the repository, each
    folder on the way a regular package."""
    parts = module.split(".")
    folders = [REPO.joinpath(*parts[:i]) for i in range(1, len(parts))]
    if not all((f / "__init__.py").is_file() for f in folders):
        return None
    base = REPO.joinpath(*parts)
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def test_every_internal_import_resolves_by_path() -> None:
    """Issue 56: static tools (pyright, jedi) follow `phoenix_keypoints.x.y` through the folders
    alone, so every internal import anywhere in the project names a file under phoenix_keypoints/
    (its links extract/ and jobs/ lead to the top-level folders)."""
    files = [p for d in (*PACKAGES, TOP, "tests", "scripts", "examples")
             for p in sorted((REPO / d).rglob("*.py")) if "__pycache__" not in p.parts]
    seen, unresolved = 0, []
    for path in files:
        for line, module in _internal_imports(path):
            seen += 1
            if _by_path(module) is None:
                unresolved.append(f"{path.relative_to(REPO)}:{line} {module}")
    assert seen > 500, seen  # the walk found the project's imports
    assert not unresolved, f"{len(unresolved)} unresolved, e.g.\n" + "\n".join(unresolved[:20])


def test_the_checkouts_folders_are_not_subpackages() -> None:
    """tests/, scripts/, docs/ and examples/ sit beside phoenix_keypoints/ in a checkout but are
    not part of it: nothing extends the package's `__path__` to the repository's root."""
    import importlib.util

    import phoenix_keypoints

    assert [Path(p).resolve() for p in phoenix_keypoints.__path__] == [REPO / TOP]
    for folder in ("tests", "scripts", "docs", "examples"):
        assert importlib.util.find_spec(f"{TOP}.{folder}") is None, folder


def test_jedi_goes_to_the_definition_of_an_internal_name() -> None:
    """An editor's go-to-definition (jedi, as IPython and most editors use it) reaches the code
    behind `phoenix_keypoints.jobs` / `.extract` from the repository's root."""
    jedi = pytest.importorskip("jedi")  # IPython's, in the dev extras through ipykernel

    source = ("from phoenix_keypoints.jobs.api import run_job\nrun_job\n"
              "import phoenix_keypoints.extract.clip as c\nc.extract_keypoints\n")
    script = jedi.Script(source, path=REPO / "goto_check.py", project=jedi.Project(REPO))
    found = [[(Path(d.module_path).resolve(), d.name) for d in script.goto(line, 5, follow_imports=True)]
             for line in (2, 4)]  # column 5: inside `run_job` and `extract_keypoints`
    assert found == [[(REPO / "jobs" / "api.py", "run_job")],
                     [(REPO / "extract" / "clip.py", "extract_keypoints")]], found


def test_a_checkout_whose_links_are_plain_files_says_what_to_do(tmp_path: Path) -> None:
    """git with core.symlinks off (Windows' default) writes each link as a small text file: the
    import stops with what to do instead of failing later on a missing module."""
    package = tmp_path / TOP
    package.mkdir()
    shutil.copy(REPO / TOP / "__init__.py", package)
    (package / "extract").write_text("../extract")
    (package / "jobs").write_text("../jobs")
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import {TOP}"
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 1, done
    assert "ImportError" in done.stderr and "core.symlinks=true" in done.stderr, done.stderr
