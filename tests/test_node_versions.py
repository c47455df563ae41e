"""Past one node, a worker under other versions of what the keypoints depend on is refused before
its first frame: a SLURM shard whose Python differs from the versions run.json recorded when the run
was planned exits 2, and a Ray actor that differs from the run stops it with exit 2; so no
keypoints.parquet holds two pipelines' keypoints.

"Another version" is real to the code that reads it: a folder on the shard's (or the Ray node's)
PYTHONPATH holds an opencv-contrib-python dist-info of another version, so importlib.metadata, which
extract/keypoints/versions.py asks, reports it in that process and no other. Whole-body runs on the
tiny ONNX models (wholebody_options).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import REPO, assert_no_traceback, cli_env, run_cli

OPENCV = "opencv-contrib-python"
OTHER = "9.9.0.1"


@pytest.fixture(scope="module")
def other_opencv_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PYTHONPATH under which importlib.metadata reports opencv-contrib-python OTHER."""
    site = tmp_path_factory.mktemp("other-opencv")
    info = site / f"opencv_contrib_python-{OTHER}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {OPENCV}\nVersion: {OTHER}\n")
    path = f"{site}{os.pathsep}{REPO}"
    seen = subprocess.run([sys.executable, "-c", "from phoenix_keypoints.extract.keypoints.versions "
                           f"import installed; print(installed('{OPENCV}'))"],
                          env=cli_env({"PYTHONPATH": path}), capture_output=True, text=True)
    assert seen.stdout.strip() == OTHER, seen.stderr
    return path


def _parts(out: Path) -> list[Path]:
    return sorted((out / "parts").glob("chunk-*.parquet"))


def _file_opencv(out: Path) -> str:
    meta = pq.read_schema(out / "keypoints.parquet").metadata[b"phoenix_keypoints.file"]
    return json.loads(meta)["versions"][OPENCV]


def test_a_shard_under_other_versions_than_planned_is_refused(
        sample_root: Path, wholebody_options: list[str], other_opencv_path: str, tmp_path: Path):
    """`slurm` plans here; shard 1 starts first on a "node" whose OpenCV differs. With no part
    committed it found nothing to clash with and took its own versions (and every chunk): now it
    exits 2 before claiming a chunk, naming both versions, its host, the pin and how to plan
    where the shards run; run.json is unchanged. Shard 0, as planned, does the run: one OpenCV
    in every part and in the merged file."""
    out = tmp_path / "run"
    plan = run_cli(["slurm", "--dataset", sample_root, "--out", out, "--num-shards", "2",
                    "--chunk-frames", "20", *wholebody_options])
    assert plan.returncode == 0, plan.stderr
    before = (out / "run.json").read_bytes()
    shard = ["run", "--out", out, "--num-shards", "2", "--workers", "1", "--shard-index"]
    other = run_cli([*shard, "1"], env={"PYTHONPATH": other_opencv_path})
    assert other.returncode == 2, other.stderr[-3000:]
    assert_no_traceback(other)
    for said in (f"shard 1 on {socket.gethostname()}", f"{OPENCV} {version(OPENCV)} in the run, "
                 f"{OTHER} here", f"pip install {OPENCV}=={version(OPENCV)}",
                 "`phoenix-keypoints slurm` with this Python"):
        assert said in other.stderr, other.stderr
    assert not _parts(out) and not (out / "keypoints.parquet").exists()
    assert (out / "run.json").read_bytes() == before

    same = run_cli([*shard, "0"])
    assert same.returncode == 0, same.stderr[-3000:]
    assert len(_parts(out)) > 1
    assert {json.loads(pq.read_metadata(p).metadata[b"phoenix_keypoints"])["versions"][OPENCV]
            for p in _parts(out)} == {version(OPENCV)}
    assert _file_opencv(out) == version(OPENCV)
    assert not json.loads((out / "run.json").read_text())["merge"]["mixed_versions"]
