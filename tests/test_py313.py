"""Python 3.13 with numpy 2, pandas 3 and pyarrow 26: the wheel installed there (no mediapipe, which
has no 3.13 wheel) refuses Holistic extraction in one line, and every step after it (merge, tensors,
exports, report, verify, status) gives on a finished run what Python 3.11 gives.

"What 3.11 gives" is the same command on a copy of the suite's own reference run (clean_run), by
this interpreter. Equal means equal values, types and keypoints metadata; not equal bytes, since
each pyarrow names itself in the files it writes and numpy 2 pickles arrays as numpy._core.

The whole-body family runs there from frames on: `run --estimator wholebody` on the shared sample
with tiny ONNX models built here (tests/tiny_onnx.py) gives on 3.13 what it gives on 3.11, column
by column and row by row, exactly (no tolerance: both sides pin onnxruntime 1.32.0 and
opencv 4.11.0.86, and numpy's elementwise float32 arithmetic is the same in 1.26 and 2.x), and the
same tensors.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import (
    OFFLINE,
    REPO,
    find_python,
    install_wheel,
    outside_env,
    run_cli,
    sh,
    upgrade_pip,
)
from tiny_onnx import tiny_models

pytestmark = pytest.mark.slow

# Each step of a finished run that needs no mediapipe, as typed in the run's parent folder.
STEPS = [
    ["merge", "--out", "R"],
    ["tensors", "--out", "R", "--preset", "compact-187", "--normalize", "shoulders", "--fill",
     "interpolate"],
    ["tensors", "--out", "R", "--preset", "holistic-543", "--normalize", "shoulders-per-frame",
     "--dtype", "float16"],
    ["tensors", "--out", "R", "--points", "pose", "--coords", "world"],
    ["export", "--out", "R", "--format", "pkl", "--to", "k.pkl"],
    ["export", "--out", "R", "--format", "legacy-pkl", "--to", "legacy.pkl"],
    ["export", "--out", "R", "--format", "legacy-npz", "--to", "npz"],
    ["export", "--out", "R", "--format", "islr", "--to", "islr"],
    ["report", "--out", "R"],
    ["verify", "--out", "R", "--content"],
    ["status", "--out", "R"],
]


@pytest.fixture(scope="module")
def tool313(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """phoenix-keypoints installed from the wheel into a fresh 3.13 venv with constraints-py313.txt."""
    python = find_python("3.13")
    if python is None:
        pytest.skip("no Python 3.13 found (python3.13 on PATH, or a 3.13 that pyenv has installed)")
    venv = tmp_path_factory.mktemp("py313") / "venv"
    proc = install_wheel(python, venv, wheel, REPO / "constraints-py313.txt")
    if proc.returncode and any(s in proc.stderr for s in OFFLINE):
        pytest.skip("PyPI cannot be reached to install into the 3.13 venv: "
                    + proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr
    env = outside_env()
    sh([venv / "bin" / "python", "-m", "pip", "check"], venv, env)
    found = sh([venv / "bin" / "python", "-c", "import importlib.util as u, numpy, pandas; print("
                "numpy.__version__, pandas.__version__, u.find_spec('mediapipe') is None)"], venv, env)
    numpy_version, pandas_version, no_mediapipe = found.split()
    assert int(numpy_version.split(".")[0]) >= 2 and int(pandas_version.split(".")[0]) >= 3, found
    assert no_mediapipe == "True", found
    return venv / "bin" / "phoenix-keypoints"


def test_holistic_is_refused_on_python_313(tool313: Path, sample_root: Path, tmp_path: Path):
    proc = subprocess.run([str(tool313), "run", "--dataset", str(sample_root), "--out", "R"],
                          cwd=tmp_path, env=outside_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    for said in ("mediapipe 0.10.21", "Python 3.10-3.12", "this is Python 3.13",
                 "--estimator wholebody"):
        assert said in proc.stderr, proc.stderr
    assert not (tmp_path / "R").exists(), "a refused run left a folder"


def test_the_pose_hint_on_python_313_names_its_own_constraints(tool313: Path, clean_run: Path,
                                                                tmp_path: Path):
    """Without pose-format, `export --format pose` says how to install it; on 3.13 that line must
    not name constraints.txt, whose mediapipe pin has no 3.13 wheel and does not resolve."""
    shutil.copytree(clean_run, tmp_path / "R")  # merged: keypoints.parquet is there
    proc = subprocess.run([str(tool313), "export", "--out", "R", "--format", "pose", "--to", "p"],
                          cwd=tmp_path, env=outside_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "-c constraints-py313.txt" in proc.stderr and "constraints.txt" not in proc.stderr, \
        proc.stderr


def same_table(got: pa.Table, ref: pa.Table, where: str) -> None:
    """Equal columns, types and values (NaN equal to NaN, as the islr export writes missing points)."""
    assert got.schema.remove_metadata() == ref.schema.remove_metadata(), where
    for name in ref.column_names:
        a, b = got[name], ref[name]
        if pa.types.is_floating(b.type):
            assert np.array_equal(a.to_numpy(), b.to_numpy(), equal_nan=True), (where, name)
        else:
            assert a.equals(b), (where, name)


def same_array(got: np.ndarray, ref: np.ndarray) -> bool:
    nan = ref.dtype.kind in "fc"  # NaN equal to NaN where there can be one
    return got.dtype == ref.dtype and np.array_equal(got, ref, equal_nan=nan)


def same_value(got: Any, ref: Any, where: str) -> None:
    """Equal pickled contents: dicts, lists, arrays (of equal dtype) and plain values."""
    assert type(got) is type(ref), (where, type(got), type(ref))
    if isinstance(ref, dict):
        assert list(got) == list(ref), where
        for k in ref:
            same_value(got[k], ref[k], f"{where}/{k}")
    elif isinstance(ref, (list, tuple)):
        assert len(got) == len(ref), where
        for i, (g, r) in enumerate(zip(got, ref, strict=True)):
            same_value(g, r, f"{where}[{i}]")
    elif isinstance(ref, np.ndarray):
        assert same_array(got, ref), where
    else:
        assert got == ref, where


def points_json(path: Path) -> dict:
    """A tensor set's description, less the size of keypoints.parquet (each pyarrow writes its own
    name into the file)."""
    meta = json.loads(path.read_text())
    meta["source"].pop("bytes")
    return meta


def untimed(html: str) -> str:
    """The report page without when it was written and how long reading took."""
    html = re.sub(r"written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "", html)
    return re.sub(r"were read in [\d.]+ s", "", html)


def assert_same_outputs(got: Path, ref: Path) -> None:
    """Everything the STEPS wrote in got (3.13) equals what they wrote in ref (3.11)."""
    kp_got, kp_ref = (pq.read_table(d / "R" / "keypoints.parquet") for d in (got, ref))
    assert kp_got.equals(kp_ref, check_metadata=True), "keypoints.parquet differs"
    written = sorted(p.relative_to(ref) for p in ref.rglob("*") if p.is_file())
    for rel in (r for r in written if r.parts[:2] not in (("R", "parts"), ("R", "logs"))):
        a, b = got / rel, ref / rel
        assert a.is_file(), f"{rel} not written on 3.13"
        if rel.suffix == ".npy":
            assert same_array(np.load(a), np.load(b)), rel
        elif rel.suffix == ".npz":
            same_value(dict(np.load(a)), dict(np.load(b)), str(rel))
        elif rel.suffix == ".parquet":
            same_table(pq.read_table(a), pq.read_table(b), str(rel))
        elif rel.suffix == ".pkl":  # numpy 1.26 reads numpy 2's pickles (numpy._core)
            same_value(pickle.loads(a.read_bytes()), pickle.loads(b.read_bytes()), str(rel))
        elif rel.name == "points.json":
            assert points_json(a) == points_json(b), rel
        elif rel.name == "index.html":
            assert untimed(a.read_text()) == untimed(b.read_text()), rel


def fresh_copy(run: Path, work: Path) -> Path:
    """The run's committed parts, plan and run.json in work/R, without its merged outputs."""
    shutil.copytree(run, work / "R")
    shutil.rmtree(work / "R" / "tensors")
    (work / "R" / "keypoints.parquet").unlink()
    return work


def test_steps_after_extraction_equal_python_311(tool313: Path, clean_run: Path, tmp_path: Path):
    # both in the same folder, one after the other: the legacy pkl records the run's absolute path
    work = fresh_copy(clean_run, tmp_path / "work")
    said = {}
    for step in STEPS:
        ref = run_cli(step, cwd=work)
        assert ref.returncode == 0, ref.stderr
        said[step[0]] = ref.stdout
    ref_dir = work.rename(tmp_path / "py311")
    work = fresh_copy(clean_run, work)
    for step in STEPS:
        got = subprocess.run([str(tool313), *step], cwd=work, env=outside_env(),
                             capture_output=True, text=True, timeout=300)
        assert got.returncode == 0 and "Traceback" not in got.stderr, (step, got.stderr)
        if step[0] == "verify":
            assert got.stdout == said["verify"]
    assert_same_outputs(work, ref_dir)
    again = subprocess.run([str(tool313), "run", "--out", "R"], cwd=work, env=outside_env(),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "complete:" in again.stdout, again.stderr


def wholebody_run(tool: list[str], dataset: Path, models: dict[str, Path], cwd: Path) -> Path:
    """`run --estimator wholebody` of the dataset into cwd/R by `tool`; the run folder."""
    cwd.mkdir()
    proc = subprocess.run([*tool, "run", "--dataset", str(dataset), "--out", "R", "--estimator",
                           "wholebody", "--detector", str(models["detector"]), "--pose-model",
                           str(models["pose"]), "--workers", "2"],
                          cwd=cwd, env=outside_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return cwd / "R"


def file_meta(table: pa.Table) -> dict:
    """The keypoints file's own metadata less the versions each interpreter records of itself."""
    meta = json.loads(table.schema.metadata[b"phoenix_keypoints.file"])
    return {k: v for k, v in meta.items() if k not in ("versions", "created")}


def test_wholebody_run_on_python_313_equals_python_311(tool313: Path, shared_sample: Path,
                                                       tmp_path: Path) -> None:
    models = tiny_models(tmp_path / "models")
    import sys

    ref = wholebody_run([sys.executable, "-m", "phoenix_keypoints"], shared_sample, models,
                        tmp_path / "py311")
    got = wholebody_run([str(tool313)], shared_sample, models, tmp_path / "py313")
    kp_got, kp_ref = (pq.read_table(r / "keypoints.parquet") for r in (got, ref))
    assert kp_ref.num_rows == 143 and set(kp_ref["status"].to_pylist()) == {"ok"}
    same_table(kp_got, kp_ref, "keypoints.parquet")  # every column, row by row, exactly
    assert file_meta(kp_got) == file_meta(kp_ref)
    tensors = sorted(p.relative_to(ref) for p in (ref / "tensors").rglob("*") if p.is_file())
    assert any(t.suffix == ".npy" for t in tensors), tensors
    for rel in tensors:
        if rel.suffix == ".npy":
            assert same_array(np.load(got / rel), np.load(ref / rel)), rel
        elif rel.name == "points.json":
            assert points_json(got / rel) == points_json(ref / rel), rel


def unconstrained(minor: str, wheel: Path, folder: Path) -> Path:
    """phoenix-keypoints from the wheel in a fresh venv of Python `minor`, installed as a user's
    `pip install` does: no constraints file, only what pyproject.toml pins; `pip check` clean."""
    python = find_python(minor)
    if python is None:
        pytest.skip(f"no Python {minor} found (python{minor} on PATH, or one pyenv has installed)")
    venv = folder / f"py{minor}" / "venv"
    venv.parent.mkdir(parents=True)
    proc = install_wheel(python, venv, wheel, None)
    if proc.returncode and any(s in proc.stderr for s in OFFLINE):
        pytest.skip(f"PyPI cannot be reached to install into the {minor} venv: "
                    + proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr
    sh([venv / "bin" / "python", "-m", "pip", "check"], venv, outside_env())
    return venv / "bin" / "phoenix-keypoints"


def test_the_wheel_without_constraints_gives_the_same_wholebody_keypoints_on_313_as_on_311(
        wheel: Path, shared_sample: Path, tmp_path: Path) -> None:
    """What pyproject.toml pins decides the values: `pip install` of the wheel alone on Python 3.13
    (and on 3.10, where one is found) gives the whole-body keypoints it gives on 3.11 on the shared
    sample (x, y and score within 1e-3; every other column equal), made under the OpenCV this
    suite validated and, on 3.11 and 3.13, its onnxruntime (3.10 has no wheel of it: 1.23.2), as
    each file's metadata says."""
    from importlib.metadata import version

    models = tiny_models(tmp_path / "models")
    minors = ["3.11", "3.13", *(["3.10"] if find_python("3.10") else [])]
    runs = {minor: wholebody_run([str(unconstrained(minor, wheel, tmp_path / "venvs"))],
                                 shared_sample, models, tmp_path / f"run{minor}")
            for minor in minors}
    ref = pq.read_table(runs["3.11"] / "keypoints.parquet")
    assert ref.num_rows == 143 and set(ref["status"].to_pylist()) == {"ok"}
    for minor in minors[1:]:
        got = pq.read_table(runs[minor] / "keypoints.parquet")
        assert got.schema.remove_metadata() == ref.schema.remove_metadata()
        for name in ref.column_names:
            if name == "wholebody":
                a, b = (np.asarray(t[name].to_pylist(), np.float64) for t in (got, ref))
                assert a.shape == (143, 133 * 3) and np.abs(a - b).max() <= 1e-3, (minor, name)
            else:
                assert got[name].equals(ref[name]), (minor, name)
    made = {m: json.loads(pq.read_schema(r / "keypoints.parquet").metadata[
        b"phoenix_keypoints.file"])["versions"] for m, r in runs.items()}
    assert {v["opencv-contrib-python"] for v in made.values()} == {version("opencv-contrib-python")}
    assert made["3.11"]["onnxruntime"] == made["3.13"]["onnxruntime"] == version("onnxruntime")


def test_constraints_resolve_on_python_310(tmp_path: Path) -> None:
    """scripts/setup.sh installs with constraints.txt on 3.10-3.12 (the suite's own venv is 3.11,
    and 3.12 reads the same lines): pip must find a wheel of every pinned version on 3.10 too,
    which has none of onnxruntime 1.32, av 18, matplotlib 3.11 and others; its own lines
    (python_version < "3.11") keep the value-relevant pins. A dry run: pip resolves every pinned
    package's metadata and installs nothing."""
    minor = "3.10"
    python = find_python(minor)
    if python is None:
        pytest.skip(f"no Python {minor} found (python{minor} on PATH, or one pyenv has installed)")
    venv = tmp_path / "venv"
    sh([python, "-m", "venv", venv], tmp_path, outside_env())
    upgrade_pip(venv)  # as setup.sh does; 3.10's own pip would download every wheel
    proc = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--dry-run", "-c",
                           REPO / "constraints.txt", f"{REPO}[dev,pose,ray]"], capture_output=True,
                          text=True, env=outside_env(), timeout=900)
    if proc.returncode and any(s in proc.stderr for s in OFFLINE):
        pytest.skip("PyPI cannot be reached: " + proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    wanted = proc.stdout.splitlines()[-1]
    assert "mediapipe-0.10.21" in wanted and "opencv-contrib-python-4.11.0.86" in wanted, wanted
    assert "numpy-1.26.4" in wanted, wanted
