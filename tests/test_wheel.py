"""`pip install` gives a working tool: the wheel built from this tree, installed (not editable) into
a fresh venv with constraints.txt, runs every step from a folder outside the source tree.

The suite itself runs on an editable install, which finds any module in the tree; only a real
install shows a module, a subpackage or a template left out of the wheel.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from helpers import REPO, outside_env, sh
from test_export import check_pose_export

pytestmark = pytest.mark.slow


def shipped_files() -> list[str]:
    """Every file of the two packages that the tool reads at run time (code and templates)."""
    out = []
    for package in ("phoenix_keypoints", "extract", "jobs"):
        for p in sorted((REPO / package).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".j2"):
                inside = p.relative_to(REPO).as_posix()  # extract/, jobs/ go inside the package
                out.append(inside if package == "phoenix_keypoints" else f"phoenix_keypoints/{inside}")
    return out


def test_the_installed_wheel_runs_every_step(wheel: Path, installed: Path, tmp_path: Path):
    """From the session's venv (conftest's `installed`: the wheel, and the example plugin beside
    it, which no step here names and none imports)."""
    env = outside_env()
    inside = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in shipped_files() if f not in inside]
    assert not missing, f"the wheel leaves out {missing}"

    venv = installed
    sh([venv / "bin/python", "-m", "pip", "check"], tmp_path, env)

    work = tmp_path / "elsewhere"
    work.mkdir()
    where = sh([venv / "bin/python", "-c", "import phoenix_keypoints.extract as e, "
                "phoenix_keypoints.jobs as j; print(e.__file__, j.__file__)"], work, env)
    assert str(REPO) not in where and str(venv) in where, where
    # the tool installs one top-level name: extract/ and jobs/ live inside it
    top = {n.split("/")[0] for n in inside if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"phoenix_keypoints"}, top
    tool = venv / "bin" / "phoenix-keypoints"
    dataset = sh([tool, "sample", "--out", "S"], work, env).strip().splitlines()[-1]
    sh([tool, "run", "--dataset", dataset, "--out", "R"], work, env)
    sh([tool, "report", "--out", "R"], work, env)
    assert (work / "R" / "report" / "index.html").stat().st_size > 0
    sh([tool, "tensors", "--out", "R", "--preset", "legacy-143"], work, env)
    sh([tool, "export", "--out", "R", "--format", "legacy-pkl", "--to", "k.pkl"], work, env)
    assert (work / "k.pkl").stat().st_size > 0


def test_the_wheel_with_its_pose_extra_exports_pose(installed: Path, run_copy: Path,
                                                    tmp_path: Path) -> None:
    """`pip install "WHEEL[pose]"` into a fresh venv, then `export --format pose` by the installed
    tool: one .pose per video holding the run's values, read back by pose-format.

    Why this way: a real install from PyPI takes minutes (pose-format brings scipy, opencv,
    mediapipe's stack again) and needs the network; the suite's venv holds the pinned set already
    (constraints.txt, pose-format among it). So conftest's `installed` asks pip for the wheel with
    its extra by name, resolving every requirement (the extra's too) against that set with no
    index: pip fails there if the extra named a package the set lacks, warns if the wheel had no
    such extra, and would install anything not already satisfied, so the report must list the
    three wheels alone (the tool's and the two example plugins'). That pose-format then imports
    in the fresh venv and the installed tool writes .pose is what a user's `pip install
    '/path/to/clone[pose]'` gives; by hand on PyPI it took the time
    docs/development.md#installing-into-your-own-environment gives."""
    report = json.loads((installed / "pip-report.json").read_text())
    got = {i["metadata"]["name"]: i for i in report["install"]}
    assert set(got) == {"phoenix-keypoints", "phoenix-keypoints-openpose25",
                        "phoenix-keypoints-yolopose"}, set(got)
    ours = got["phoenix-keypoints"]
    assert ours["requested_extras"] == ["pose"]
    assert 'pose-format>=0.4; extra == "pose"' in ours["metadata"]["requires_dist"]
    log = (installed / "pip.log").read_text()
    assert "does not provide the extra" not in log and "satisfied: pose-format>=0.4" in log, log

    env = outside_env()
    work = tmp_path / "elsewhere"
    work.mkdir()
    sh([installed / "bin/phoenix-keypoints", "export", "--out", run_copy, "--format", "pose",
        "--to", "poses"], work, env)
    check_pose_export(run_copy, work / "poses")
