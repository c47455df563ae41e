"""Shared fixtures: the embedded sample (always there), the shared sample and the release index
(skipped with a reason when ../shared is absent), reference runs (Holistic and, on tiny ONNX
models, whole-body). Helpers are in helpers.py.

Under pytest-xdist (`./scripts/test.sh` runs `-n`), the session fixtures that build files are made
once for all workers (`_once`), and `--dist loadgroup` (GroupScheduling) keeps together on one
worker the tests that share a costly module fixture or a machine-wide service, longest first
(docs/development.md)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    REPO,
    SHARED_INDEX,
    SHARED_SAMPLE,
    assert_no_traceback,
    build_wheel,
    install_over_suite,
    run_cli,
)

from phoenix_keypoints.extract.sample import build_sample

# Module fixtures that only write a few small files or skip: tests using them may spread over
# workers. Any other module fixture (a run, a packed corpus) keeps its module's tests together.
LIGHT_MODULE_FIXTURES = frozenset({"_shared", "models", "batch_models", "listener", "base",
                                   "root_2014", "broken", "video_tree", "videos", "run_copy"})


def _group(item: pytest.Item) -> str | None:
    """The xdist group an item must share a worker with, None where it may run anywhere. One SLURM
    cluster and one local Ray serve the machine: their tests start and stop them, one worker at a
    time; a costly module fixture would otherwise be made again on every worker."""
    if "slurm_env" in item.fixturenames:
        return "slurm-cluster"
    module = item.module.__name__ if isinstance(item, pytest.Function) else item.nodeid
    if module == "test_ray":
        return "ray"
    defs = item._fixtureinfo.name2fixturedefs
    if any(defs[n][-1].scope in ("module", "class") for n in item.fixturenames
           if n in defs and n not in LIGHT_MODULE_FIXTURES):
        return module
    return None


def _shared_temp(config: pytest.Config) -> Path:
    """The session's temp folder all xdist workers see: the controller's basetemp, which is the
    parent of each worker's."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, on each worker (all collect the same): put the groups and the tests marked
    slow first, so the longest units start early instead of ending the run alone on one worker,
    and write each test's group for the controller's scheduler (GroupScheduling)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # a plain run keeps its order
        return
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_group(item) or item.nodeid, []).append(item)
    slow_first = sorted(units.items(), key=lambda unit: not any(
        i.get_closest_marker("slow") for i in unit[1]))
    items[:] = [item for _, unit in slow_first for item in unit]
    groups = {item.nodeid: name for name, unit in units.items() for item in unit}
    path = _shared_temp(config) / "xdist-groups.json"
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(groups))
    tmp.replace(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` by this suite's groups (`_group`), read from the file the workers wrote
    at collection. xdist's own loadgroup reads `xdist_group` marks into node ids, which pytest 9
    no longer lets it change: it would spread every test."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """LoadScopeScheduling whose scope is the test's group (its own node id where none)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # called once the workers' collections are in
                self.groups = json.loads((_shared_temp(config) / "xdist-groups.json").read_text())
            return self.groups.get(nodeid, nodeid)

    config.option.loadscopereorder = False  # the workers' order (slow first), not the group sizes
    return GroupScheduling(config, log)


def _once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Path]) -> Path:
    """make(an empty folder) once for the whole test session, whatever the number of xdist workers:
    the first worker to ask makes it under a lock in the session's shared temp folder, the others
    wait and reuse it (a make that failed is tried again by the next). Tests only read these."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make(factory.mktemp(name))
    root = factory.getbasetemp().parent / "shared-fixtures"
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            return Path(done.read_text())
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        made = make(folder)
        done.write_text(str(made))
        return made


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded sample dataset (5 videos, 82 frames), built once per test session."""
    return _once(tmp_path_factory, "embedded", build_sample)


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
    def make(folder: Path) -> Path:
        proc = run_cli(["run", "--dataset", sample_root, "--out", folder / "run", "--chunk-frames",
                        "20", "--workers-per-gpu", "2"])
        assert proc.returncode == 0, proc.stderr
        return folder / "run"

    return _once(tmp_path_factory, "clean", make)


@pytest.fixture(scope="session")
def wholebody_options(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The options of a whole-body run on tests/tiny_onnx.py's tiny models (built once a session):
    real onnxruntime on real frames, a few milliseconds a frame, for tests about the job."""
    from tiny_onnx import tiny_models

    folder = _once(tmp_path_factory, "tiny-models", lambda f: tiny_models(f)["pose"].parent)
    models = tiny_models(folder)  # written already: the same paths for every worker
    return ["--estimator", "wholebody", "--detector", str(models["detector"]), "--pose-model",
            str(models["pose"])]


@pytest.fixture(scope="session")
def clean_wholebody_run(sample_root: Path, wholebody_options: list[str],
                        tmp_path_factory: pytest.TempPathFactory) -> Path:
    """clean_run's run with `--estimator wholebody` on the tiny models: the reference of the
    job-level tests that kill, stop and resume whole-body runs."""
    def make(folder: Path) -> Path:
        proc = run_cli(["run", "--dataset", sample_root, "--out", folder / "run", "--chunk-frames",
                        "20", "--workers-per-gpu", "2", *wholebody_options])
        assert proc.returncode == 0, proc.stderr
        assert_no_traceback(proc)
        return folder / "run"

    return _once(tmp_path_factory, "clean-wholebody", make)


@pytest.fixture(scope="session")
def shared_run(shared_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run over the shared sample (real PHOENIX frames): the reference there."""
    def make(folder: Path) -> Path:
        proc = run_cli(["run", "--dataset", shared_sample, "--out", folder / "run", "--chunk-frames",
                        "60"])
        assert proc.returncode == 0, proc.stderr
        assert_no_traceback(proc)
        return folder / "run"

    return _once(tmp_path_factory, "shared", make)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this tree (tests/test_wheel.py and tests/test_py313.py install it)."""
    return _once(tmp_path_factory, "dist", build_wheel)


@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (made once a session) with the wheel of this tree and its `pose` extra, as a
    user installs it (`pip install "WHEEL[pose]"`), and the example plugins' (examples/openpose25
    and examples/yolopose, built here), installed, not editable, over the suite's own
    dependencies (helpers.install_over_suite: every requirement resolved against constraints.txt's
    set, no index): tests/test_wheel.py and tests/test_example_plugin.py run the installed tool
    from it, outside the source tree."""
    def make(folder: Path) -> Path:
        plugins = [build_wheel(folder / f"{name}-dist", REPO / "examples" / name)
                   for name in ("openpose25", "yolopose")]
        venv = folder / "venv"
        install_over_suite(venv, (f"{wheel}[pose]", *plugins))
        return venv

    return _once(tmp_path_factory, "installed", make)


@pytest.fixture(scope="module")
def run_copy(clean_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run's run.json, plan, keypoints and tensors in a folder a test may add to."""
    out = tmp_path_factory.mktemp("runcopy") / "run"
    out.mkdir()
    for name in ("run.json", "plan.parquet", "keypoints.parquet"):
        shutil.copy2(clean_run / name, out / name)
    shutil.copytree(clean_run / "tensors", out / "tensors")
    return out
