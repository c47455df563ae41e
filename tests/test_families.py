"""A keypoint family is data (issue 38): one declaration every output reads, one package per
family, found through a registry; no module outside a family's own names that family.

The proof: tests/toy_family.py, a third family written in the tests only, made known as an
installed package makes a family known (an entry point), goes through run, resume, merge, tensors,
report, show, diff, verify, status, the .pose export and extract_keypoints without any file
outside the tests knowing it.
"""

from __future__ import annotations

import ast
import io
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import toy_family
from helpers import REPO, assert_no_traceback, run_cli

from phoenix_keypoints.extract.keypoints.estimator import FAMILIES, family

# Modules of jobs/ that still name a family: the command line's and run.json's own words for the
# two built-in families (the --detector/--pose-model flags and Holistic's options, run.json's
# `holistic` and `wholebody` records, the legacy pkl of `run --output_path`), and `models fetch`
# (jobs/models.py: rtmlib's published whole-body models, recorded as the family records model
# files). The list may only shrink: a module added to it, or any module of extract/ naming a
# family, fails.
STILL_NAMING = {"jobs/cli.py", "jobs/models.py", "jobs/run/options.py", "jobs/run/outputs.py",
                "jobs/rundir/parts.py", "jobs/rundir/runinfo.py"}


def family_names() -> dict[str, set[str]]:
    """family -> what names it: its name, its package, the constants its declaration defines."""
    out = {}
    for name, module in FAMILIES.items():
        if not module.startswith("phoenix_keypoints.extract.families."):
            continue
        decl = REPO / module.removeprefix("phoenix_keypoints.").replace(".", "/") / "declaration.py"
        consts = {t.id for n in ast.parse(decl.read_text()).body if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name) and t.id.isupper()}
        out[name] = {name, module} | {c for c in consts if name.upper() in c}
    return out


def naming(path: Path, words: set[str]) -> list[int]:
    """Lines of a module that name a family: its name or package as a string or import, or one
    of its constants."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = node.value in words or any(node.value.startswith(w + ".") for w in words)
        elif isinstance(node, ast.ImportFrom):
            hit = bool(node.module) and any(node.module == w or node.module.startswith(w + ".")
                                            for w in words)
        else:
            hit = isinstance(node, ast.Name) and node.id in words
        if hit:
            lines.append(node.lineno)
    return lines


def test_no_module_outside_a_family_names_it() -> None:
    """A family's name, package and constants appear only in the family packages (its own, and
    one built on it: the 3D whole-body family imports the whole-body family's detector and crop)
    and the registry (which names the families); jobs/ keeps the listed modules of the command
    line and run.json."""
    registry = REPO / "extract/keypoints/estimator.py"
    families = REPO / "extract/families"
    offenders = {}
    for name, words in family_names().items():
        for path in sorted([*(REPO / "extract").rglob("*.py"), *(REPO / "jobs").rglob("*.py")]):
            if families in path.parents and path.parent != families or path == registry:
                continue
            lines = naming(path, words)
            if lines:
                offenders.setdefault(path.relative_to(REPO).as_posix(), []).append((name, lines))
    assert set(offenders) <= STILL_NAMING, {k: v for k, v in offenders.items()
                                             if k not in STILL_NAMING}
    assert set(offenders) == STILL_NAMING, f"no longer naming a family: {STILL_NAMING - set(offenders)}"


# --- the toy family, in real processes ---------------------------------------------------------------
@pytest.fixture(scope="module")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An entry point of group phoenix_keypoints.families naming tests/toy_family.py, as an
    installed package would declare it: on PYTHONPATH for the command line and its workers."""
    site = tmp_path_factory.mktemp("site")
    info = site / "toyfamily-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfamily\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[phoenix_keypoints.families]\ntoy = toy_family\n")
    return {"PYTHONPATH": f"{site}:{REPO / 'tests'}"}


def ok(args: list, env: dict[str, str]) -> str:
    proc = run_cli(args, env=env)
    assert_no_traceback(proc)
    assert proc.returncode == 0, f"{args[0]}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def toy_run(sample_root: Path, toy_env: dict[str, str], tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy") / "run"
    ok(["run", "--dataset", sample_root, "--out", out, "--estimator", "toy", "--chunk-frames", "20",
        "--workers", "2"], toy_env)
    return out


def video_values(run: Path) -> tuple[str, np.ndarray]:
    t = pq.read_table(run / "keypoints.parquet")
    video = t["video"][0].as_py()
    rows = t.filter(pc.equal(t["video"], video))
    return video, np.array(rows["toy"].to_pylist(), np.float32).reshape(-1, 4, 3)


def test_the_toy_family_runs_merges_and_writes_its_tensors(toy_run: Path, sample_root: Path) -> None:
    from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata
    from phoenix_keypoints.extract.keypoints.frames import read_frame

    t = pq.read_table(toy_run / "keypoints.parquet")
    assert t.schema.equals(toy_family.SCHEMA) and t.num_rows > 0
    assert read_file_metadata(toy_run / "keypoints.parquet")["estimator"] == "toy"
    video, values = video_values(toy_run)
    first = t.filter(pc.equal(t["video"], video))["image"][0].as_py()
    rgb = read_frame(next(sample_root.rglob(Path(first).name)))[0]
    np.testing.assert_array_equal(values[0], toy_family.ToyEstimator().process(rgb)["toy"]
                                  .reshape(4, 3))  # the points are the pixels' own
    split = t["split"][0].as_py()
    arr = np.load(toy_run / "tensors" / f"{split}.npy")
    mask = np.load(toy_run / "tensors" / f"{split}.mask.npy")
    assert arr.shape[1:] == (4, 3) and mask.shape[1:] == (4,)
    np.testing.assert_array_equal(arr[:len(values)], values)
    np.testing.assert_array_equal(mask[:len(values)], values[:, :, 2] >= 0.5)


def test_the_toy_family_resumes_to_the_same_bytes(toy_run: Path, sample_root: Path,
                                                  toy_env: dict[str, str], tmp_path: Path) -> None:
    """A run that lost a part and its merge does that part again: the same keypoints.parquet."""
    copy = tmp_path / "run"
    shutil.copytree(toy_run, copy)
    parts = sorted((copy / "parts").glob("*.parquet"))
    assert len(parts) > 1, parts
    parts[0].unlink()
    (copy / "keypoints.parquet").unlink()
    ok(["run", "--dataset", sample_root, "--out", copy, "--estimator", "toy"], toy_env)
    assert (copy / "keypoints.parquet").read_bytes() == (toy_run / "keypoints.parquet").read_bytes()
    ok(["merge", "--out", copy], toy_env)
    assert "agree" in ok(["diff", toy_run, copy], toy_env)


def test_report_show_diff_verify_status_and_exports_read_the_declaration(
        toy_run: Path, toy_env: dict[str, str], tmp_path: Path) -> None:
    ok(["report", "--out", toy_run], toy_env)
    assert pq.read_table(toy_run / "report" / "videos.parquet").num_rows > 0
    video, _ = video_values(toy_run)
    ok(["show", "--out", toy_run, "--video", video, "--to", tmp_path / "sheet.png"], toy_env)
    assert (tmp_path / "sheet.png").stat().st_size > 0
    ok(["verify", "--out", toy_run], toy_env)
    assert "estimator: toy" in ok(["status", "--out", toy_run], toy_env)
    t = pq.read_table(toy_run / "keypoints.parquet")
    bright = t["bright"].to_pylist()
    bright[0] = (bright[0] or 0) + 1
    pq.write_table(t.set_column(t.schema.get_field_index("bright"), "bright",
                                pa.array(bright, pa.int32())), tmp_path / "other.parquet")
    proc = run_cli(["diff", toy_run / "keypoints.parquet", tmp_path / "other.parquet"], env=toy_env)
    assert proc.returncode == 1 and "bright differs in 1 frame(s)" in proc.stdout, proc.stdout
    refused = run_cli(["export", "--out", toy_run, "--format", "legacy-pkl", "--to", tmp_path / "x"],
                      env=toy_env)
    assert refused.returncode == 2 and "toy run (toy quarter points)" in refused.stderr
    assert "Its exports: pose." in refused.stderr, refused.stderr


def test_the_pose_export_and_extract_keypoints(toy_run: Path, sample_root: Path,
                                               toy_env: dict[str, str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pose_format")
    from pose_format import Pose

    from phoenix_keypoints import extract_keypoints

    ok(["export", "--out", toy_run, "--format", "pose", "--to", tmp_path / "poses"], toy_env)
    video, values = video_values(toy_run)
    written = next((tmp_path / "poses").rglob(f"{video}.pose")).read_bytes()
    pose = Pose.read(written)
    assert [c.name for c in pose.header.components] == ["top", "bottom"]
    assert pose.header.components[0].points == ["top_left", "top_right"]
    np.testing.assert_array_equal(pose.body.data[:, 0].filled(0), values[:, :, :2])
    monkeypatch.syspath_prepend(toy_env["PYTHONPATH"].split(":")[0])
    folder = next(p.parent for p in sorted(sample_root.rglob("*.png")) if p.parent.name == video)
    kp = extract_keypoints(folder, estimator="toy")
    np.testing.assert_array_equal(kp["toy"], values)
    buf = io.BytesIO()
    kp.to_pose().write(buf)
    assert buf.getvalue() == written
    assert family("toy") is sys.modules["toy_family"]
