"""`run --backend ray` on a local Ray (ray.init(num_cpus=2) in the driver, two actors).

An actor is SIGKILLed mid-chunk: it is replaced, its chunk retried, and the output equals the local
reference run. A Ray run stopped half-way is finished by a local run that keeps Ray's parts. A Ray
run reads a dataset packed as a tar.gz through the one index its driver made at planning.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import (
    KEYPOINT_COLUMNS,
    REPO,
    assert_no_traceback,
    busy_workers,
    popen_cli,
    read_keypoints,
    run_cli,
    wait_for,
)

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (the [ray] extra): pip install -c constraints.txt -e '.[dev,ray]'")

SLOW = {"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.15"}


def _actor_in_video(out: Path) -> tuple[int, int] | None:
    """(pid, chunk) of an actor that is inside a video, from the driver's heartbeat."""
    for w in busy_workers(out):
        return w["pid"], w["chunk"]
    return None


@needs_ray
def test_ray_actor_killed_mid_run(sample_root: Path, clean_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "ray"
    proc = popen_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                      "--backend", "ray", "--workers-per-gpu", "2"], env=SLOW)
    pid, chunk = wait_for(lambda: _actor_in_video(out), 120, "an actor in a video", proc)
    os.kill(pid, signal.SIGKILL)
    said, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    # the same crash line as a local worker's, on stderr
    assert f"(pid {pid}) died (its process died) in chunk {chunk}, video " in err, err[-3000:]
    assert "attempt 1/3" in err and "attempt" not in said
    assert "Traceback" not in err + said
    assert read_keypoints(out).equals(read_keypoints(clean_run))
    ray_beat = json.loads((out / "progress.json").read_text())
    local_beat = json.loads((clean_run / "progress.json").read_text())
    assert set(ray_beat) == set(local_beat) and ray_beat["backend"] == "ray"
    assert {k for w in ray_beat["workers"] for k in w} == {k for w in local_beat["workers"] for k in w}
    assert all(w["pid"] and w["host"] for w in ray_beat["workers"])


@needs_ray
def test_ray_run_resumed_locally(sample_root: Path, clean_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "ray"
    proc = popen_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                      "--backend", "ray", "--workers-per-gpu", "2"], env=SLOW)
    wait_for(lambda: list((out / "parts").glob("chunk-*.parquet")), 120, "a committed part", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]
    assert "stopped; run the same command to resume" in err
    ray_parts = {p.name: p.stat().st_mtime_ns for p in (out / "parts").glob("chunk-*.parquet")}
    assert 0 < len(ray_parts) < 5
    assert not (out / "keypoints.parquet").exists()

    local = run_cli(["run", "--out", out, "--workers-per-gpu", "2"])
    assert local.returncode == 0, local.stderr
    assert_no_traceback(local)
    for name, mtime in ray_parts.items():  # Ray's parts were trusted, not redone
        assert (out / "parts" / name).stat().st_mtime_ns == mtime
    assert read_keypoints(out).equals(read_keypoints(clean_run))


def test_without_the_extra_says_how_to_install(sample_root: Path, tmp_path: Path) -> None:
    """A Python where `import ray` fails (as without the extra): one line saying what to install."""
    hide = tmp_path / "no-ray" / "ray"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    proc = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "run", "--backend", "ray"],
                   env={"PYTHONPATH": f"{hide.parent}{os.pathsep}{REPO}"})
    assert proc.returncode == 2
    assert "pip install 'phoenix-keypoints[ray]'" in proc.stderr
    assert_no_traceback(proc)
    assert not (tmp_path / "run" / "run.json").exists()  # refused before planning anything


class _Cluster:
    """What actor_options reads from Ray: the cluster's resources (as ray.cluster_resources())."""

    def __init__(self, **res: float) -> None:
        self.res = res

    def cluster_resources(self) -> dict[str, float]:
        return self.res


def test_actor_resources_follow_gpus_and_workers() -> None:
    from phoenix_keypoints.jobs.schedule.ray_backend import actor_options

    def opts(num_gpus, workers_per_gpu, **res):
        return actor_options(_Cluster(**res), num_gpus, workers_per_gpu)

    gpu = opts(None, None, CPU=32, GPU=4)  # defaults: every GPU, CPUs shared out: 8 per GPU
    assert len(gpu) == 32 and gpu[0] == {"num_cpus": 1, "num_gpus": 1 / 8}
    assert opts(2, 3, CPU=32, GPU=4) == [{"num_cpus": 1, "num_gpus": 1 / 3}] * 6
    assert opts(None, None, CPU=6) == [{"num_cpus": 1, "num_gpus": 0}] * 6
    assert len(opts(0, 2, CPU=6, GPU=1)) == 2  # --num-gpus 0: CPU actors only
    assert len(opts(None, 16, CPU=4)) == 4  # never more actors than CPUs: they would wait forever


@needs_ray
def test_ray_reads_an_archive_through_the_planned_index(sample_root: Path, clean_run: Path,
                                                         tmp_path: Path) -> None:
    """Actors open the archive themselves with the run folder's index (never build one), and the
    keypoints equal the folder run's; only image (+ #archive=NAME) and mtime columns differ."""
    tgz = tmp_path / "sample.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(sample_root, arcname="release/PHOENIX-2014-T")
    out = tmp_path / "ray"
    proc = run_cli(["run", "--dataset", tgz, "--out", out, "--chunk-frames", "20",
                    "--backend", "ray", "--workers-per-gpu", "2"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_traceback(proc)
    assert (out / "archive" / "archive.json").is_file()  # the driver's index, which actors read
    got, ref = pq.read_table(out / "keypoints.parquet"), pq.read_table(clean_run / "keypoints.parquet")
    cols = ["split", "video", *KEYPOINT_COLUMNS, "file_size", "file_sha256"]
    assert got.num_rows == ref.num_rows > 0 and got.select(cols).equals(ref.select(cols))
    assert {im.rpartition("#")[2] for im in got["image"].to_pylist()} == {f"archive={tgz.name}"}
    beat = json.loads((out / "progress.json").read_text())
    assert beat["backend"] == "ray"
