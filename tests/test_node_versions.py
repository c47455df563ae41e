"""Past one node, a worker under other versions of what the keypoints depend on is refused before
its first frame: a SLURM shard whose Python differs from the versions run.json recorded when the run
was planned exits 2, and a Ray actor that differs from the run stops it with exit 2; so no
keypoints.parquet holds two pipelines' keypoints.

"Another version" is real to the code that reads it: a folder on the shard's (or the Ray node's)
PYTHONPATH holds an opencv-contrib-python dist-info of another version, so importlib.metadata, which
extract/keypoints/versions.py asks, reports it in that process and no other. Whole-body runs on the
tiny ONNX models (wholebody_options); the shards run by hand, and as two tasks of one array on the
real one-node SLURM cluster of tests/test_slurm.py; Ray as a real `ray start --head` cluster.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import REPO, assert_no_traceback, cli_env, run_cli, wait_for
from test_slurm import _ended, slurm_env  # noqa: F401 (slurm_env: the real cluster fixture)

OPENCV = "opencv-contrib-python"
OTHER = "9.9.0.1"
RAY_ENV = {"RAY_AUTH_MODE": "disabled"}  # a test cluster on 127.0.0.1, without token files


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
    """`slurm` plans here; run again by a Python with another OpenCV, it warns that the script's
    shards would refuse. Shard 1 starts first on a "node" whose OpenCV differs. With no part
    committed it found nothing to clash with and took its own versions (and every chunk): now it
    exits 2 before claiming a chunk, naming both versions, its host, the pin and how to plan
    where the shards run; run.json is unchanged. Shard 0, as planned, does the run: one OpenCV
    in every part and in the merged file."""
    out = tmp_path / "run"
    plan = run_cli(["slurm", "--dataset", sample_root, "--out", out, "--num-shards", "2",
                    "--chunk-frames", "20", *wholebody_options])
    assert plan.returncode == 0, plan.stderr
    before = (out / "run.json").read_bytes()
    again = run_cli(["slurm", "--out", out, "--num-shards", "2"], env={"PYTHONPATH": other_opencv_path})
    assert again.returncode == 0, again.stderr
    assert (f"warning: this Python ({sys.executable}), which the array script runs, has other "
            f"versions") in again.stderr and f"{OPENCV} {version(OPENCV)} in the run, {OTHER} here" \
        in again.stderr, again.stderr
    assert "warning" not in run_cli(["slurm", "--out", out, "--num-shards", "2"]).stderr
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


def _ray_head(env: dict[str, str], temp: str) -> tuple[subprocess.Popen, str]:
    """A one-node Ray cluster whose worker processes see `env` (its own session: stopped by its
    process group, never by `ray stop`, which would stop every Ray of this user)."""
    port = _free_port()
    ray = str(Path(sys.executable).parent / "ray")
    head = subprocess.Popen([ray, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
                             "--num-gpus=0", "--include-dashboard=false", "--disable-usage-stats",
                             "--node-ip-address=127.0.0.1", f"--temp-dir={temp}"],
                            env={**env, **RAY_ENV}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return head, f"127.0.0.1:{port}"


def _stop(head: subprocess.Popen) -> None:
    """The head's whole process group: SIGTERM, and SIGKILL for what is left after a minute."""
    os.killpg(head.pid, signal.SIGTERM)
    try:
        head.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (the "
                    "[ray] extra): pip install -c constraints.txt -e '.[dev,ray]'")
def test_a_ray_actor_under_other_versions_stops_the_run(
        sample_root: Path, wholebody_options: list[str], other_opencv_path: str, tmp_path: Path):
    """A Ray cluster whose node has another OpenCV than the driver: its actors were fed chunks and
    made parts under it beside the driver's record. Now the first chunk an actor gets is refused
    before its first frame: the run stops with exit 2 naming both versions, the node and the pin;
    no part and no keypoints.parquet. The same run then finishes locally under one OpenCV."""
    out = tmp_path / "run"
    temp = tempfile.mkdtemp(prefix="rayv", dir="/tmp")  # short: Ray's socket paths are limited
    head, address = _ray_head(cli_env({"PYTHONPATH": other_opencv_path}), temp)
    try:
        wait_for(lambda: subprocess.run([str(Path(sys.executable).parent / "ray"), "status",
                                         f"--address={address}"], capture_output=True,
                                        env=cli_env(RAY_ENV)).returncode == 0, 180, "the Ray head",
                 interval=2)
        proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                        "--backend", "ray", "--address", address, *wholebody_options], env=RAY_ENV)
    finally:
        _stop(head)
        shutil.rmtree(temp, ignore_errors=True)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert_no_traceback(proc)
    for said in (f"on {socket.gethostname()} has other versions", f"{OPENCV} {version(OPENCV)} in "
                 f"the run, {OTHER} here", f"pip install {OPENCV}=={version(OPENCV)}"):
        assert said in proc.stderr, proc.stderr[-3000:]
    assert not _parts(out) and not (out / "keypoints.parquet").exists()

    local = run_cli(["run", "--out", out, "--workers", "2"])
    assert local.returncode == 0, local.stderr[-3000:]
    assert _file_opencv(out) == version(OPENCV)


def _sbatch(env: dict[str, str], script: Path, index: int) -> str:
    """Submit one index of the array script with `env` (sbatch exports it to the task)."""
    proc = subprocess.run(["sbatch", "--parsable", f"--array={index}", str(script)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split(";")[0]


@pytest.mark.slow
def test_real_array_task_on_a_node_with_other_versions_is_refused(
        slurm_env: dict[str, str], sample_root: Path, wholebody_options: list[str],  # noqa: F811
        other_opencv_path: str, tmp_path: Path):
    """The two tasks of the array `slurm` wrote, submitted together to the real one-node cluster;
    task 1 with the other OpenCV on its PYTHONPATH (as a node with another install). It fails with
    exit 2 and says why in its log; task 0 does every chunk and merges: one OpenCV in the file."""
    out = tmp_path / "run"
    plan = run_cli(["slurm", "--dataset", sample_root, "--out", out, "--num-shards", "2",
                    "--chunk-frames", "20", "--cpus-per-task", "1", "--time", "0:10:00",
                    *wholebody_options], env=slurm_env)
    assert plan.returncode == 0, plan.stderr
    script = out / "slurm" / "shards.sbatch"
    other = _sbatch(cli_env({**slurm_env, "PYTHONPATH": other_opencv_path}), script, 1)
    same = _sbatch(cli_env(slurm_env), script, 0)
    refused = wait_for(lambda: _ended(slurm_env, other), 300, "task 1", interval=1)
    assert refused["1"]["JobState"] == "FAILED" and refused["1"]["ExitCode"] == "2:0", refused
    log = (out / "logs" / f"slurm-{other}_1.out").read_text()
    assert f"{OPENCV} {version(OPENCV)} in the run, {OTHER} here" in log and "shard 1 on " in log
    done = wait_for(lambda: _ended(slurm_env, same), 300, "task 0", interval=1)
    assert done["0"]["JobState"] == "COMPLETED", done
    assert _file_opencv(out) == version(OPENCV)
    assert {json.loads(pq.read_metadata(p).metadata[b"phoenix_keypoints"])["versions"][OPENCV]
            for p in _parts(out)} == {version(OPENCV)}


def test_a_second_actors_refusal_keeps_the_runs_exit_2() -> None:
    """Both actors of the Ray run above refuse their first chunk, each in its own words (its slot
    and host). On a loaded host both refusals reach the scheduler before the run has stopped, and
    the second one turned the run's exit 2 into 1 (the run's error stays the first's, which the
    second's words are not: seen on a fresh Debian 12 machine's suite). Both refusals, one after
    the other, through the real scheduler on simulated workers: the run's error is the first's
    and the run ends with exit 2; a library's fault (code 1) first ends it with 1 whatever follows."""
    from test_scheduler import CHUNKS, make_task

    from phoenix_keypoints.jobs.run.summary import ended
    from phoenix_keypoints.jobs.schedule.events import Refused
    from phoenix_keypoints.jobs.schedule.progress import Progress
    from phoenix_keypoints.jobs.schedule.scheduler import Scheduler
    from phoenix_keypoints.jobs.schedule.simulation import FakeBackend, SimClock
    from phoenix_keypoints.jobs.schedule.workqueue import ChunkQueue

    def outcome(*refusals: Refused):
        clock = SimClock()
        backend = FakeBackend(clock, 2, speed=lambda slot: 20.0)
        progress = Progress("", backend.name, 100, 0, len(CHUNKS), None, show_bar=False,
                            clock=clock.now)
        sched = Scheduler(backend, ChunkQueue(list(CHUNKS)), make_task, progress, None, clock.now,
                          chunks_wanted=len(CHUNKS))
        sched.begin()
        for ev in refusals:
            sched.handle(ev)
        return sched.outcome

    first, second = (Refused(k, k, f"worker {k} on sim has other versions") for k in (0, 1))
    got = outcome(first, second)
    assert got.error == first.why and got.refused and ended(got, "") == 2
    assert not outcome(Refused(0, 0, "the library failed", 1), second).refused
