"""`pip install` gives a working tool: the wheel built from this tree, installed (not editable) into
a fresh venv with constraints.txt, runs every step from a folder outside the source tree.

The suite itself runs on an editable install, which finds any module in the tree; only a real
install shows a module, a subpackage or a template left out of the wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.slow


def shipped_files() -> list[str]:
    """Every file of the two packages that the tool reads at run time (code and templates)."""
    out = []
    for package in ("extract", "jobs"):
        for p in sorted((REPO / package).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".j2"):
                out.append(p.relative_to(REPO).as_posix())
    return out


def sh(args: list, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def test_the_installed_wheel_runs_every_step(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    dist = tmp_path / "dist"
    sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, REPO], tmp_path, env)
    wheel = next(dist.glob("phoenix_keypoints-*.whl"))
    inside = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in shipped_files() if f not in inside]
    assert not missing, f"the wheel leaves out {missing}"

    venv = tmp_path / "venv"
    sh([sys.executable, "-m", "venv", venv], tmp_path, env)
    sh([venv / "bin/python", "-m", "pip", "install", "-q", "-c", REPO / "constraints.txt", wheel],
       tmp_path, env)
    sh([venv / "bin/python", "-m", "pip", "check"], tmp_path, env)

    work = tmp_path / "elsewhere"
    work.mkdir()
    where = sh([venv / "bin/python", "-c",
                "import extract, jobs; print(extract.__file__, jobs.__file__)"], work, env)
    assert str(REPO) not in where and str(venv) in where, where
    tool = venv / "bin" / "phoenix-keypoints"
    dataset = sh([tool, "sample", "--out", "S"], work, env).strip().splitlines()[-1]
    sh([tool, "run", "--dataset", dataset, "--out", "R"], work, env)
    sh([tool, "report", "--out", "R"], work, env)
    assert (work / "R" / "report" / "index.html").stat().st_size > 0
    sh([tool, "tensors", "--out", "R", "--preset", "legacy-143"], work, env)
    sh([tool, "export", "--out", "R", "--format", "legacy-pkl", "--to", "k.pkl"], work, env)
    assert (work / "k.pkl").stat().st_size > 0
