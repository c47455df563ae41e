"""Shared fixtures: the embedded sample (always there), the shared sample (skip when absent), and a
helper that runs the real command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from extract.sample import build_sample

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SHARED_SAMPLE = SHARED_DATA / "phoenix-sample" / "PHOENIX-2014-T"
SHARED_INDEX = SHARED_DATA / "phoenix-2014-T-index"


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded sample dataset (5 videos, 82 frames), built once per test session."""
    return build_sample(tmp_path_factory.mktemp("embedded"))


@pytest.fixture(scope="session")
def shared_sample() -> Path:
    if not (SHARED_SAMPLE / "annotations").is_dir():
        pytest.skip(f"shared sample not found at {SHARED_SAMPLE} (../shared/data beside the repo)")
    return SHARED_SAMPLE


@pytest.fixture(scope="session")
def shared_index() -> Path:
    if not (SHARED_INDEX / "PHOENIX-2014-T.train.frame_counts.tsv").is_file():
        pytest.skip(f"full-release index not found at {SHARED_INDEX} (../shared/data beside the repo)")
    return SHARED_INDEX


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PHOENIX_KEYPOINTS_FAULTS", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 300,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`phoenix-keypoints ARGS` in a subprocess, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli", *map(str, args)], env=cli_env(env), cwd=cwd or REPO,
        capture_output=True, text=True, timeout=timeout,
    )


def popen_cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `phoenix-keypoints ARGS` in its own process group (so a test can signal all of it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", *map(str, args)], env=cli_env(env), cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def assert_no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


def read_keypoints(run_dir: Path):
    return pq.read_table(Path(run_dir) / "keypoints.parquet")


@pytest.fixture(scope="session")
def clean_run(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted 2-worker run over the embedded sample: the reference other runs must equal."""
    out = tmp_path_factory.mktemp("clean") / "run"
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                    "--workers-per-gpu", "2"])
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def run_copy(clean_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run's run.json, plan, keypoints and tensors in a folder a test may add to."""
    out = tmp_path_factory.mktemp("runcopy") / "run"
    out.mkdir()
    for name in ("run.json", "plan.parquet", "keypoints.parquet"):
        shutil.copy2(clean_run / name, out / name)
    shutil.copytree(clean_run / "tensors", out / "tensors")
    return out
