"""Shared fixtures: the embedded sample (always there), the shared sample and the release index
(skipped with a reason when ../shared is absent), reference runs (Holistic and, on tiny ONNX
models, whole-body). Helpers are in helpers.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import SHARED_INDEX, SHARED_SAMPLE, assert_no_traceback, build_wheel, run_cli

from extract.sample import build_sample


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


@pytest.fixture(scope="session")
def clean_run(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted 2-worker run over the embedded sample: the reference other runs must equal."""
    out = tmp_path_factory.mktemp("clean") / "run"
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                    "--workers-per-gpu", "2"])
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="session")
def wholebody_options(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The options of a whole-body run on tests/tiny_onnx.py's tiny models (built once a session):
    real onnxruntime on real frames, a few milliseconds a frame, for tests about the job."""
    from tiny_onnx import tiny_models

    models = tiny_models(tmp_path_factory.mktemp("tiny-models"))
    return ["--estimator", "wholebody", "--detector", str(models["detector"]), "--pose-model",
            str(models["pose"])]


@pytest.fixture(scope="session")
def clean_wholebody_run(sample_root: Path, wholebody_options: list[str],
                        tmp_path_factory: pytest.TempPathFactory) -> Path:
    """clean_run's run with `--estimator wholebody` on the tiny models: the reference of the
    job-level tests that kill, stop and resume whole-body runs."""
    out = tmp_path_factory.mktemp("clean-wholebody") / "run"
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                    "--workers-per-gpu", "2", *wholebody_options])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    return out


@pytest.fixture(scope="session")
def shared_run(shared_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run over the shared sample (real PHOENIX frames): the reference there."""
    out = tmp_path_factory.mktemp("shared") / "run"
    proc = run_cli(["run", "--dataset", shared_sample, "--out", out, "--chunk-frames", "60"])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    return out


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this tree (tests/test_wheel.py and tests/test_py313.py install it)."""
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def run_copy(clean_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run's run.json, plan, keypoints and tensors in a folder a test may add to."""
    out = tmp_path_factory.mktemp("runcopy") / "run"
    out.mkdir()
    for name in ("run.json", "plan.parquet", "keypoints.parquet"):
        shutil.copy2(clean_run / name, out / name)
    shutil.copytree(clean_run / "tensors", out / "tensors")
    return out
