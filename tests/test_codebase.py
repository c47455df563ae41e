"""The codebase's own rules, checked on its source: data flows one way and functions stay short."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

MAX_LINES = 60


def _modules(folder: str) -> list[Path]:
    return sorted((REPO / folder).glob("*.py"))


def test_extract_never_imports_jobs() -> None:
    offenders = []
    for path in _modules("extract"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}: {n}" for n in names if n == "jobs" or n.startswith("jobs.")]
    assert not offenders, offenders


def test_functions_in_jobs_are_short() -> None:
    long = []
    for path in _modules("jobs"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long
