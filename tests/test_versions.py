"""Versions are part of the output's identity: every part records the versions its values depend on
(extract/keypoints/versions.py), a resume under another OpenCV is refused before a frame is read,
a run with no part yet is made under the versions it runs with and says so, and a file made of
parts of two OpenCVs says so in its metadata, in run.json, in `status` and in `verify`.

"Another OpenCV" is real: a venv whose own site-packages holds opencv-contrib-python 4.10 (from
PyPI) and which reads this suite's venv after it, so that OpenCV is the only difference. The runs
are whole-body runs on the tiny ONNX models (clean_wholebody_run).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import OFFLINE, assert_no_traceback, cli_env, outside_env, run_cli, sh

pytestmark = pytest.mark.slow

OTHER_OPENCV = "4.10.0.84"
OPENCV = "opencv-contrib-python"


@pytest.fixture(scope="module")
def other_opencv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a venv holding opencv-contrib-python 4.10 and, after it, this suite's venv."""
    venv = tmp_path_factory.mktemp("other-opencv") / "venv"
    sh([sys.executable, "-m", "venv", venv], venv.parent, outside_env())
    python = venv / "bin" / "python"
    own = sh([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
             venv.parent, outside_env()).strip()
    suite = sysconfig.get_paths()["purelib"]
    Path(own, "zz-suite-venv.pth").write_text(f"import site; site.addsitedir({suite!r})\n")
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps",
                           f"{OPENCV}=={OTHER_OPENCV}"], env=outside_env(), capture_output=True,
                          text=True, timeout=900)
    if proc.returncode and any(s in proc.stderr for s in OFFLINE):
        pytest.skip("PyPI cannot be reached to install another OpenCV: "
                    + proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr
    found = sh([python, "-c", "import cv2, numpy, importlib.metadata as m; print(cv2.__version__, "
                f"m.version('{OPENCV}'), numpy.__version__)"], venv.parent, outside_env()).split()
    assert found == [OTHER_OPENCV.rsplit(".", 1)[0], OTHER_OPENCV, version("numpy")], found
    return python


def run_with(python: Path, args: list) -> subprocess.CompletedProcess:
    """`phoenix-keypoints ARGS` run by another Python (this tree on its path)."""
    return subprocess.run([str(python), "-m", "phoenix_keypoints", *map(str, args)], env=cli_env(),
                          capture_output=True, text=True, timeout=300)


def part_versions(run: Path) -> dict[int, dict[str, str]]:
    """chunk -> the versions its part's footer records."""
    out = {}
    for p in sorted((run / "parts").glob("chunk-*.parquet")):
        meta = json.loads(pq.read_metadata(p).metadata[b"phoenix_keypoints"])
        out[int(p.stem.removeprefix("chunk-"))] = meta["versions"]
    return out


def file_versions(run: Path) -> dict[str, str]:
    return json.loads(pq.read_schema(run / "keypoints.parquet").metadata[
        b"phoenix_keypoints.file"])["versions"]


def run_json(run: Path) -> dict:
    return json.loads((run / "run.json").read_text())


def test_each_part_records_what_its_values_depend_on(clean_wholebody_run: Path):
    here = {"phoenix-keypoints": version("phoenix-keypoints"), "onnxruntime": version("onnxruntime"),
            OPENCV: version(OPENCV), "numpy": version("numpy")}
    parts = part_versions(clean_wholebody_run)
    assert len(parts) > 1 and all(v == here for v in parts.values()), parts
    assert file_versions(clean_wholebody_run).items() >= here.items()
    assert run_json(clean_wholebody_run)["versions"].items() >= here.items()


def test_a_run_records_its_own_familys_library_and_not_another(clean_wholebody_run: Path,
                                                                 tmp_path: Path):
    """run.json and keypoints.parquet name the library the run's family depends on (onnxruntime for
    a whole-body run), not another family's: every run recorded mediapipe (issue 38). A run planned
    before, whose run.json holds mediapipe, keeps its record through a resume and the merge."""
    planned = run_json(clean_wholebody_run)["versions"]
    assert "mediapipe" not in planned and planned["onnxruntime"] == version("onnxruntime"), planned
    assert "mediapipe" not in file_versions(clean_wholebody_run)
    out = tmp_path / "run"
    shutil.copytree(clean_wholebody_run, out)
    record = run_json(out)
    record["versions"]["mediapipe"] = "0.10.21"  # as the run.json of a run planned before
    (out / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    (out / "keypoints.parquet").unlink()
    max((out / "parts").glob("chunk-*.parquet")).unlink()
    proc = run_cli(["run", "--out", out, "--workers", "2"])
    assert proc.returncode == 0, proc.stderr
    assert run_json(out)["versions"]["mediapipe"] == file_versions(out)["mediapipe"] == "0.10.21"


def test_a_resume_under_another_opencv_is_refused(clean_wholebody_run: Path, other_opencv: Path,
                                                  tmp_path: Path):
    """A run with one chunk left, resumed by a Python with another OpenCV: exit 2 before any frame
    is read, naming both versions, the pip pin that brings the parts' back, --fresh and another
    --out; nothing in the run folder changes. The Python that made the parts then finishes it."""
    out = tmp_path / "run"
    shutil.copytree(clean_wholebody_run, out)
    (out / "keypoints.parquet").unlink()
    last = max((out / "parts").glob("chunk-*.parquet"))
    last.unlink()
    before = (out / "run.json").read_bytes()
    proc = run_with(other_opencv, ["run", "--out", out, "--workers", "2"])
    assert proc.returncode == 2, proc.stderr
    assert_no_traceback(proc)
    for said in (f"{OPENCV} {version(OPENCV)} there, {OTHER_OPENCV} here",
                 f"pip install {OPENCV}=={version(OPENCV)}", "--fresh", "another --out"):
        assert said in proc.stderr, proc.stderr
    assert not last.exists() and not (out / "keypoints.parquet").exists()
    assert (out / "run.json").read_bytes() == before
    again = run_cli(["run", "--out", out, "--workers", "2"])
    assert again.returncode == 0, again.stderr
    assert {v[OPENCV] for v in part_versions(out).values()} == {version(OPENCV)}


def test_versions_of_a_run_made_elsewhere_and_of_a_mixed_one_are_true(
        clean_wholebody_run: Path, other_opencv: Path, tmp_path: Path):
    """A run planned here but with no part yet is made under the other OpenCV: its parts, run.json
    and keypoints.parquet say 4.10. A part of this OpenCV put among them (as a SLURM shard on a
    node with other versions would commit it) makes a mixed file, and every place says so: the
    merge's warning, the file's metadata and run.json (each version with its chunks), `status`
    and `verify` (exit 1)."""
    out = tmp_path / "run"
    shutil.copytree(clean_wholebody_run, out)
    for name in ("keypoints.parquet", "parts", "tensors"):
        shutil.rmtree(out / name) if (out / name).is_dir() else (out / name).unlink()
    proc = run_with(other_opencv, ["run", "--out", out, "--workers", "2"])
    assert proc.returncode == 0, proc.stderr
    parts = part_versions(out)
    assert {v[OPENCV] for v in parts.values()} == {OTHER_OPENCV}, parts
    assert file_versions(out)[OPENCV] == run_json(out)["versions"][OPENCV] == OTHER_OPENCV

    shutil.copy2(clean_wholebody_run / "parts" / "chunk-000000.parquet", out / "parts")
    (out / "keypoints.parquet").unlink()
    merged = run_cli(["merge", "--out", out])
    assert merged.returncode == 0, merged.stderr
    both = (f"{version(OPENCV)} (chunk 0); {OTHER_OPENCV} (chunks "
            + ", ".join(map(str, sorted(parts)[1:6])))
    assert f"{OPENCV} {both}" in merged.stderr, merged.stderr
    assert file_versions(out)[OPENCV].startswith(both)
    record = run_json(out)
    assert record["versions"][OPENCV].startswith(both)
    assert record["merge"]["mixed_versions"] == [OPENCV]
    status = run_cli(["status", "--out", out])
    assert f"versions: the committed parts were made under more than one: {OPENCV} {both}" in \
        status.stdout, status.stdout
    verify = run_cli(["verify", "--out", out])
    assert verify.returncode == 1, verify.stderr
    assert f"-\t-\tkeypoints.parquet\tmade under {OPENCV} {both}" in verify.stdout, verify.stdout
