"""The whole job as a user runs it: outputs, schema, order, fidelity to MediaPipe, worker-count
independence, and Ctrl-C then resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import direct_holistic, popen_cli, read_keypoints, run_cli, wait_for

from phoenix_keypoints.extract.families.holistic.declaration import SCHEMA
from phoenix_keypoints.extract.families.holistic.points import OFFSETS, PARTS


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fresh_holistic_keypoints(root: Path, images: list[str]) -> list[dict]:
    """The reference: a fresh default Holistic (same options) straight over one video's frames."""
    return direct_holistic(root, images, static_image_mode=False, model_complexity=1)


def assert_faithful(run_dir: Path, root: Path) -> int:
    """Every video's keypoints equal a fresh graph's over its frames (max abs diff 0)."""
    table = read_keypoints(run_dir)
    videos = table["video"].to_pylist()
    images = table["image"].to_pylist()
    checked = 0
    for video in dict.fromkeys(videos):
        rows = [i for i, v in enumerate(videos) if v == video]
        ref = fresh_holistic_keypoints(root, [images[i] for i in rows])
        for part in PARTS:
            got = table[part].to_pylist()
            for r, i in zip(ref, rows, strict=True):
                if r[part] is None:
                    assert got[i] is None, (video, i, part)
                else:
                    assert got[i] is not None, (video, i, part)
                    assert np.array_equal(np.asarray(got[i], np.float32), r[part]), (video, i, part)
                    checked += 1
    return checked


def test_shared_sample_outputs(shared_run: Path, shared_sample: Path):
    table = read_keypoints(shared_run)
    assert table.num_rows == 143
    assert table.schema.remove_metadata().equals(SCHEMA)
    keys = list(zip(table["split"].to_pylist(), table["video"].to_pylist(),
                    table["frame"].to_pylist(), strict=True))
    assert keys == sorted(keys), "sorted by split, video, frame"
    assert len(set(keys)) == 143
    assert set(table["status"].to_pylist()) == {"ok"}
    for img in table["image"].to_pylist():
        assert (shared_sample / img).is_file()
    assert set(table["width"].to_pylist()) == {210} and set(table["height"].to_pylist()) == {260}
    # Which parts were detected in which frames is checked against MediaPipe run directly, frame
    # by frame (test_fidelity_shared_sample), not assumed here: it may differ between CPUs.
    for part, (n, c) in PARTS.items():
        lengths = {len(v) for v in table[part].to_pylist() if v is not None}
        assert lengths <= {n * c}
    meta = json.loads((shared_run / "run.json").read_text())
    assert meta["versions"]["mediapipe"] == "0.10.21"
    assert meta["dataset"]["frames"] == 143 and meta["merge"]["rows"] == 143


def test_tensors_hold_the_same_numbers(shared_run: Path):
    table = read_keypoints(shared_run)
    splits = np.asarray(table["split"].to_pylist())
    for split in np.unique(splits):
        rows = np.flatnonzero(splits == split)
        arr = np.load(shared_run / "tensors" / f"{split}.npy", mmap_mode="r")
        mask = np.load(shared_run / "tensors" / f"{split}.mask.npy", mmap_mode="r")
        assert arr.dtype == np.float32 and arr.shape == (len(rows), 543, 3)
        assert mask.shape == (len(rows), 543)
        for j, i in enumerate(rows):
            for part, (n, c) in PARTS.items():
                v = table[part][int(i)].as_py()
                o = OFFSETS[part]
                if v is None:
                    assert not mask[j, o:o + n].any() and not arr[j, o:o + n].any()
                else:
                    assert mask[j, o:o + n].all()
                    assert np.array_equal(arr[j, o:o + n], np.asarray(v, np.float32)
                                          .reshape(n, c)[:, :3])
        index = pq.read_table(shared_run / "tensors" / f"{split}.index.parquet").to_pylist()
        assert sum(r["length"] for r in index) == len(rows)
        vids = table["video"].to_pylist()
        for r in index:
            assert set(vids[rows[r["start"]]:rows[r["start"]] + r["length"]]) == {r["video"]}


def test_fidelity_shared_sample(shared_run: Path, shared_sample: Path):
    assert assert_faithful(shared_run, shared_sample) > 0


def test_fidelity_embedded_sample(clean_run: Path, sample_root: Path):
    assert assert_faithful(clean_run, sample_root) > 0


@pytest.mark.slow
def test_default_plans_for_one_or_two_workers_same_bytes(shared_run: Path, shared_sample: Path,
                                                         tmp_path: Path):
    """Default options cut the chunks for the worker count; the outputs do not depend on it: runs
    planned for 1 and for 2 workers and the reference (fixed --chunk-frames 60) are the same bytes."""
    plans = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        proc = run_cli(["run", "--dataset", shared_sample, "--out", out, "--workers-per-gpu",
                        workers])
        assert proc.returncode == 0, proc.stderr
        plans.append(json.loads((out / "run.json").read_text())["plan"])
        assert sha256(out / "keypoints.parquet") == sha256(shared_run / "keypoints.parquet")
        for f in sorted((shared_run / "tensors").glob("*.*")):
            assert sha256(out / "tensors" / f.name) == sha256(f), (workers, f.name)
    assert [p["workers"] for p in plans] == [1, 2]
    assert plans[0]["cuts"] != plans[1]["cuts"], "two plans, cut for 1 and for 2 workers"


def test_one_and_two_workers_identical(clean_run: Path, sample_root: Path, tmp_path: Path):
    out = tmp_path / "one"
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                    "--workers-per-gpu", "1"])
    assert proc.returncode == 0, proc.stderr
    assert sha256(out / "keypoints.parquet") == sha256(clean_run / "keypoints.parquet")
    for f in sorted((clean_run / "tensors").iterdir()):
        assert sha256(out / "tensors" / f.name) == sha256(f), f.name


def test_ctrl_c_then_resume(clean_run: Path, sample_root: Path, tmp_path: Path):
    """Ctrl-C, then resumed with another worker count: the plan and the parts are found as they are."""
    out = tmp_path / "run"
    args = ["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20"]
    proc = popen_cli([*args, "--workers-per-gpu", "2"],
                     env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.15"})
    wait_for(lambda: list((out / "parts").glob("chunk-*.parquet")), 120, "a committed part", proc)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "resume" in err
    committed = {p.name: p.stat().st_mtime_ns for p in (out / "parts").glob("chunk-*.parquet")}
    assert 1 <= len(committed) < 5
    assert not list((out / "parts").glob(".*.tmp")), "no temp part left behind"
    assert not (out / "keypoints.parquet").exists()

    proc = run_cli([*args, "--workers-per-gpu", "1"])
    assert proc.returncode == 0, proc.stderr
    assert "resuming:" in proc.stderr
    for name, mtime in committed.items():  # only the missing chunks ran again
        assert (out / "parts" / name).stat().st_mtime_ns == mtime
    assert sha256(out / "keypoints.parquet") == sha256(clean_run / "keypoints.parquet")
