"""Exits that tell the truth: a run with nothing to do is refused with where it looked, a refused
run leaves no folder behind, a full disk while writing tensors exits 1 without its temp folder,
`status` right after the coordinator was SIGKILLed says it is not running and how to resume, and
no message advises an option the command lacks. Every case runs the real command line on real
files; nothing is mocked."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    RUN_ARGS,
    alive,
    assert_no_traceback,
    assert_same_output,
    copy_dataset,
    popen_cli,
    progress,
    run_cli,
    run_with_file_size_limit,
    session_members,
    sha256,
    wait_for,
)

FRAMES = "features/fullFrame-210x260px"
TEST_VIDEOS = ("full_body-1", "portrait-1", "two_hands-1")


def _refused(args: list, out: Path) -> str:
    """Run `run ARGS --out out`; it must be refused (exit 2, no traceback) and leave no folder."""
    proc = run_cli(["run", *args, "--out", out, "--workers-per-gpu", "1"])
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert not out.exists(), f"a refused run left {sorted(out.rglob('*'))}"
    return proc.stderr


# --- nothing to do is refused, saying where it looked --------------------------------------------
def _one_folder_too_deep(root: Path) -> str:
    for video in TEST_VIDEOS:
        folder = root / FRAMES / "test" / video
        (folder / "1").mkdir()
        for frame in folder.glob("images*.png"):
            frame.rename(folder / "1" / frame.name)
    return (f"of the 3 listed video(s), 3 have a folder without frames (test/full_body-1, "
            f"test/portrait-1, test/two_hands-1); frames are one folder too deep, e.g. "
            f"{root / FRAMES}/test/full_body-1/1/images0001.png (expected {root / FRAMES}/"
            "<split>/<name>/images0001.png, images0002.png, ...)")


def _no_split_folder(root: Path) -> str:
    for video in TEST_VIDEOS:  # the videos lie directly under the frames folder
        (root / FRAMES / "test" / video).rename(root / FRAMES / video)
    (root / FRAMES / "test").rmdir()
    return (f"of the 3 listed video(s), 3 have no folder under {root / FRAMES}/<split>/ "
            f"(test/full_body-1, test/portrait-1, test/two_hands-1); {root / FRAMES}/test/ missing; "
            f"{root / FRAMES}/full_body-1/ exists without its split folder (move it to "
            f"{root / FRAMES}/test/full_body-1/)")


@pytest.mark.parametrize("damage", [_one_folder_too_deep, _no_split_folder],
                         ids=["one-folder-too-deep", "no-split-folder"])
def test_no_frame_to_process_is_refused(damage, shared_sample: Path, tmp_path: Path):
    root = copy_dataset(shared_sample, tmp_path / "PHOENIX-2014-T", writable=True)
    said = damage(root)
    err = _refused(["--dataset", root, "--splits", "test"], tmp_path / "run")
    assert err.startswith(f"error: no frames found: {said}"), err
    assert "Check that --dataset is the folder holding annotations/ and features/." in err


def test_refused_runs_leave_no_folder(sample_root: Path, tmp_path: Path):
    _refused(["--dataset", tmp_path / "nowhere"], tmp_path / "a" / "run")
    assert not (tmp_path / "a").exists()
    err = _refused(["--dataset", sample_root, "--model-complexity", "2"], tmp_path / "run")
    assert "pose_landmark_heavy.tflite" in err
    mine = tmp_path / "mine"  # a folder the user made is theirs: kept (with a hidden lock file)
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    proc = run_cli(["run", "--dataset", tmp_path / "nowhere", "--out", mine])
    assert proc.returncode == 2, proc.stderr
    assert sorted(p.name for p in mine.iterdir() if p.name != ".run.lock") == ["notes.txt"]


# --- a full disk while writing tensors: exit 1, no temp folder, nothing else changed ------------
def _temps(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.name.startswith((".tmp", ".old")) or
            p.name.endswith(".tmp")]


def test_disk_full_while_writing_a_tensor_set(run_copy: Path, clean_run: Path):
    before = {p.name: sha256(p) for p in [run_copy / "keypoints.parquet", run_copy / "run.json"]}
    proc = run_with_file_size_limit(["tensors", "--out", run_copy, "--name", "big"], 100_000)
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert f"cannot write the tensor set in {run_copy / 'tensors'}" in proc.stderr
    assert "File too large" in proc.stderr
    assert "the same `tensors` command again" in proc.stderr
    assert not _temps(run_copy) and not (run_copy / "tensors" / "big").exists()
    assert {p.name: sha256(p) for p in [run_copy / "keypoints.parquet", run_copy / "run.json"]} \
        == before
    for ref in sorted((clean_run / "tensors").glob("*.npy")):
        np.testing.assert_array_equal(np.load(run_copy / "tensors" / ref.name), np.load(ref))
    again = run_cli(["tensors", "--out", run_copy, "--name", "big"])
    assert again.returncode == 0, again.stderr
    np.testing.assert_array_equal(np.load(run_copy / "tensors" / "big" / "train.npy"),
                                  np.load(clean_run / "tensors" / "train.npy"))


def test_disk_full_while_merging_tensors(shared_run: Path, tmp_path: Path):
    """keypoints.parquet fits, train.npy does not: exit 1 (not 2), tensors' temp folder gone,
    and `merge` once there is room writes the same outputs."""
    out = tmp_path / "run"
    shutil.copytree(shared_run, out)
    (out / "keypoints.parquet").unlink()
    shutil.rmtree(out / "tensors")
    merged = (shared_run / "keypoints.parquet").stat().st_size
    biggest = max(p.stat().st_size for p in (shared_run / "tensors").glob("*.npy"))
    assert merged < biggest
    proc = run_with_file_size_limit(["merge", "--out", out], (merged + biggest) // 2)
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert "cannot write the merged outputs" in proc.stderr and "File too large" in proc.stderr
    assert not _temps(out), _temps(out)
    assert json.loads((out / "run.json").read_text())["merge"] is None, "no record of a merge"
    again = run_cli(["merge", "--out", out])
    assert again.returncode == 0, again.stderr
    assert_same_output(out, shared_run)


# --- status right after the coordinator was SIGKILLed --------------------------------------------
def test_status_after_coordinator_sigkill(sample_root: Path, tmp_path: Path):
    out = tmp_path / "run"
    proc = popen_cli(["run", "--dataset", sample_root, "--out", out, *RUN_ARGS],
                     env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.2"})
    try:
        wait_for(lambda: progress(out).get("frames_done", 0) > 0, 120, "frames done", proc)
        live = run_cli(["status", "--out", out]).stdout
        assert f"running:  pid {proc.pid} on" in live and "ETA" in live, live
    finally:
        proc.kill()  # SIGKILL to the coordinator only; not reaped yet: a zombie
    wait_for(lambda: not alive(proc.pid), 10, "the coordinator to be a zombie")
    assert os.path.exists(f"/proc/{proc.pid}"), "reaped too early: the zombie case is the point"
    for when in ("before it is reaped", "after"):
        status = run_cli(["status", "--out", out])
        assert status.returncode == 0, status.stderr
        lines = status.stdout
        assert f"running:  no (pid {proc.pid} on" in lines, (when, lines)
        assert "stopped without finishing" in lines
        assert f"Resume with `phoenix-keypoints run --out {out}`" in lines
        assert "ETA" not in lines and "frames/s" not in lines, (when, lines)
        proc.wait(timeout=10)
    wait_for(lambda: not session_members(proc.pid), 10, "its workers to stop")
    proc.communicate(timeout=10)


# --- messages name the command that has the option ----------------------------------------------
def test_fresh_is_advised_as_the_run_command(run_copy: Path, tmp_path: Path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    advice = f"`phoenix-keypoints run --out {broken} --fresh --dataset CORPUS`"  # its kind unknown
    for cmd in (["status"], ["merge"], ["verify"], ["tensors"], ["export", "--format", "pkl",
                                                                  "--to", tmp_path / "x.pkl"]):
        proc = run_cli([*cmd, "--out", broken])
        assert_no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert advice in proc.stderr, (cmd, proc.stderr)
    slurm = run_cli(["slurm", "--out", run_copy, "--num-shards", "2"])  # slurm has no --fresh
    assert slurm.returncode == 2 and "other num_shards" in slurm.stderr, slurm.stderr
    given = json.loads((run_copy / "run.json").read_text())["dataset"]["given"]  # as typed
    assert f"`phoenix-keypoints run --out {run_copy} --fresh --dataset {given}`" in slurm.stderr
