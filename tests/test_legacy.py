"""The older pipeline runs on our output: its command line, its pkl, its [N, 143, 3] model input.

The contract is ../shared/docs/legacy-format.md; every expectation here is written from it, not
from extract/families/holistic/legacy.py. Frames with nothing detected and parts not found are
constructed (by editing a copy of keypoints.parquet), never left to what MediaPipe happens to find
on this CPU.
"""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import LEGACY_FACE_68 as FACE_68
from helpers import assert_no_traceback, run_cli

from phoenix_keypoints.extract.outputs.loader import load_split

pytestmark = pytest.mark.slow

SPLITS = ("train", "dev", "test")
PARTS = {"face": (468, 3), "left_hand": (21, 3), "right_hand": (21, 3), "pose": (33, 4)}
GIVEN = "PHOENIX-2014-T"  # the dataset path as typed on the command line (a relative path)


def older_command(pkl: str = "phoenix_keypoints_full.pkl", conf: str = "0.5") -> list[str]:
    """The older script's command line with every one of its flags."""
    return ["run", "--dataset_path", GIVEN, "--output_path", pkl, "--splits", "train", "dev", "test",
            "--max_samples_per_split", "2", "--min_detection_confidence", conf,
            "--min_tracking_confidence", "0.5", "--num_gpus", "1", "--num_workers_per_gpu", "1",
            "--temp_dir", "temp_keypoints"]


@pytest.fixture(scope="module")
def older(shared_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cwd = tmp_path_factory.mktemp("older")
    (cwd / GIVEN).symlink_to(shared_sample, target_is_directory=True)
    proc = run_cli(older_command(), cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    return {"cwd": cwd, "proc": proc, "pkl": cwd / "phoenix_keypoints_full.pkl",
            "run": cwd / "temp_keypoints" / "phoenix_keypoints_full_run"}


def expected(rows: dict[str, list], split: str) -> tuple[list[int], int]:
    """(rows the split's lists hold, in the contract's order; rows of the split looked at)."""
    mine = [i for i, s in enumerate(rows["split"]) if s == split]
    mine.sort(key=lambda i: (rows["video"][i], PurePosixPath(rows["image"][i]).name))
    kept = [i for i in mine if any(rows[p][i] is not None for p in PARTS)]
    return kept, len(mine)


def part_value(rows: dict[str, list], part: str, i: int) -> np.ndarray | None:
    v = rows[part][i]
    if v is None:
        return None
    a = np.asarray(v, np.float32).reshape(PARTS[part])[:, :3]
    return a[FACE_68] if part == "face" else a


def check_contract(pkl: Path, keypoints: Path, splits: list[str]) -> dict[str, Any]:
    """Every field of the contract, against keypoints.parquet."""
    with open(pkl, "rb") as f:
        data = pickle.load(f)
    rows = pq.read_table(keypoints).to_pydict()
    assert type(data) is dict
    assert list(data) == ["train", "dev", "test", "stats", "keypoint_info", "dataset_info"]
    for split in SPLITS:
        d = data[split]
        assert type(d) is dict and set(d) == {"keypoints", "image_paths", "video_ids"}
        assert all(type(v) is list for v in d.values())
        kept, total = expected(rows, split)
        assert d["video_ids"] == [rows["video"][i] for i in kept]
        assert d["image_paths"] == [
            str(Path(GIVEN) / "features" / "fullFrame-210x260px" / split / rows["video"][i]
                / PurePosixPath(rows["image"][i]).name) for i in kept]
        assert len(d["keypoints"]) == len(kept)
        for frame, i in zip(d["keypoints"], kept, strict=True):
            assert type(frame) is dict
            assert list(frame) == ["face", "left_hand", "right_hand", "pose", "image_shape"]
            for part in PARTS:
                want = part_value(rows, part, i)
                if want is None:
                    assert frame[part] is None
                else:
                    assert type(frame[part]) is np.ndarray and frame[part].dtype == np.float32
                    np.testing.assert_array_equal(frame[part], want)
            shape = frame["image_shape"]
            assert type(shape) is tuple and all(type(x) is int for x in shape)
            assert shape == (rows["height"][i], rows["width"][i])
        st = data["stats"][split]
        assert set(st) == {"total", "success", "failed", "total_time"}
        assert (st["total"], st["success"], st["failed"]) == (total, len(kept), total - len(kept))
        assert type(st["total_time"]) is float and st["total_time"] >= 0
    info = data["keypoint_info"]
    assert {k: info[k]["num_points"] for k in PARTS} == {
        "face": 68, "left_hand": 21, "right_hand": 21, "pose": 33}
    assert info["total_points"] == 143
    ds = data["dataset_info"]
    assert ds["name"] == "PHOENIX-2014-T" and ds["source_path"] == GIVEN
    assert ds["splits"] == splits and type(ds["processing_info"]) is dict
    return data


def prepare_model_input(data: dict[str, Any], out: Path) -> None:
    """The pipeline's prepare_model_input, as the contract describes it."""
    regions = (("face", 0, 68), ("left_hand", 68, 21), ("right_hand", 89, 21), ("pose", 110, 33))
    out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        frames = data[split]["keypoints"]
        if not frames:
            continue
        arr = np.zeros((len(frames), 143, 3), np.float32)
        for i, frame in enumerate(frames):
            for part, o, n in regions:
                if frame[part] is not None:
                    arr[i, o : o + n] = frame[part]
        np.savez_compressed(out / f"{split}_keypoints.npz", keypoints=arr,
                 image_paths=np.array(data[split]["image_paths"]),
                 video_ids=np.array(data[split]["video_ids"]))


def test_older_command_line_writes_the_older_pkl(older: dict[str, Any]) -> None:
    proc, run = older["proc"], older["run"]
    assert (run / "keypoints.parquet").is_file() and older["pkl"].is_file()
    assert "phoenix_keypoints_full.pkl" in proc.stdout
    data = check_contract(older["pkl"], run / "keypoints.parquet", ["train", "dev", "test"])
    # --max_samples_per_split 2: the first two folders by name, not the corpus's first two
    # (the sample's test corpus lists two_hands-1 first)
    plan = pq.read_table(run / "plan.parquet").to_pydict()
    assert sorted(v for v, s in zip(plan["video"], plan["split"], strict=True) if s == "test") == [
        "full_body-1", "portrait-1"]
    assert set(data["test"]["video_ids"]) <= {"full_body-1", "portrait-1"}
    h = data["dataset_info"]["processing_info"]
    assert h["min_detection_confidence"] == 0.5 and h["min_tracking_confidence"] == 0.5
    assert (h["num_workers"], h["distributed"], h["gpu_optimized"]) == (1, False, False)
    # the start-of-run lines, and the warning for 1 worker when more cores are usable
    assert "dataset: phoenix-2014-T at PHOENIX-2014-T:" in proc.stderr
    assert "workers: 1 (GPU(s) 0;" in proc.stderr
    idle = len(os.sched_getaffinity(0)) > 1
    assert ("core(s) will idle" in proc.stderr) == idle, proc.stderr
    if idle:
        assert "--num_workers_per_gpu" in proc.stderr


def test_confidences_reach_run_json_and_a_resume_checks_them(older: dict[str, Any],
                                                              tmp_path: Path) -> None:
    import json

    info = json.loads((older["run"] / "run.json").read_text())
    h = info["options"]["holistic"]
    assert (h["min_detection_confidence"], h["min_tracking_confidence"]) == (0.5, 0.5)
    proc = run_cli(older_command(conf="0.6"), cwd=older["cwd"])
    assert proc.returncode == 2
    assert "min_detection_confidence (0.5 when planned, 0.6 asked)" in proc.stderr
    for bad, said in (("0", "must be greater than 0, not 0"), ("1.5", "must be at most 1, not 1.5"),
                      ("x", "must be a number above 0 and at most 1, not 'x'")):
        proc = run_cli(["run", "--out", tmp_path / "r", "--min-detection-confidence", bad])
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
        assert_no_traceback(proc)


def test_default_options_give_no_idle_warning(shared_sample: Path, tmp_path: Path) -> None:
    proc = run_cli(["run", "--dataset", shared_sample, "--out", tmp_path / "r", "--videos",
                    "portrait-1"])
    assert proc.returncode == 0, proc.stderr
    assert "workers:" in proc.stderr and "will idle" not in proc.stderr
    # the rule itself, whatever this machine's cores: 1 worker on 2 cores warns, 2 on 2 do not
    from phoenix_keypoints.jobs.run.summary import idle_cores

    older = "--num_gpus 1 --num_workers_per_gpu 1"
    assert "1 core(s) will idle" in idle_cores(1, 2, older)
    assert "--num_workers_per_gpu 2" in idle_cores(1, 2, older)
    assert idle_cores(2, 2) is None and idle_cores(4, 2) is None
    # the older script's --num_gpus 4 --num_workers_per_gpu 1, 32 cores
    big = idle_cores(4, 32, "--num_gpus 4 --num_workers_per_gpu 1")
    assert "28 core(s) will idle" in big and "--num_workers_per_gpu 8" in big
    # only flags the user typed are named (issue 34: --workers 1 was told of --num_gpus)
    mine = idle_cores(1, 2, "--workers 1")
    assert "--workers 2" in mine and "gpu" not in mine.lower().replace("gpus only pin", "")
    # and what runs on the CPU: a whole-body run is not told MediaPipe does
    wb = idle_cores(1, 2, "--num_gpus 0 --num_workers_per_gpu 1", "wholebody")
    assert "wholebody estimator (onnxruntime) runs on the CPU" in wb and "MediaPipe" not in wb, wb
    assert "--num_workers_per_gpu 2" in wb
    # a family whose workers run it on their GPUs (as its on_gpu decides) is not told the GPUs
    # only pin workers (issue 38): the cores read and decode frames
    cuda = idle_cores(1, 2, "--num_gpus 1 --num_workers_per_gpu 1", "wholebody", on_gpu=True)
    assert "runs on the workers' GPUs here" in cuda and "only pin" not in cuda, cuda
    assert "--num_workers_per_gpu 2" in cuda
    from phoenix_keypoints.extract.keypoints.estimator import family

    assert family("wholebody").on_gpu("cpu", True) is False  # --device cpu: the CPU
    assert family("wholebody").on_gpu("cuda", False) is False  # a worker without a GPU
    assert family("holistic").on_gpu("cuda", True) is False  # MediaPipe: the CPU, whatever the GPUs


def edited_copy(run: Path, dest: Path) -> dict[str, Any]:
    """A copy of the run whose keypoints.parquet has constructed cases; returns what was made."""
    dest.mkdir()
    for name in ("run.json", "plan.parquet"):
        shutil.copy2(run / name, dest / name)
    table = pq.read_table(run / "keypoints.parquet")
    rows = table.to_pydict()
    train = [i for i, s in enumerate(rows["split"]) if s == "train"]
    video = rows["video"][train[0]]
    first = [i for i in train if rows["video"][i] == video]
    hand = np.linspace(0.1, 0.9, 63, dtype=np.float32).tolist()
    pose = np.linspace(0.2, 0.8, 132, dtype=np.float32).tolist()
    for i in (first[0], first[2]):  # nothing detected at all
        for p in PARTS:
            rows[p][i] = None
    i = first[1]  # only a left hand and a pose
    rows["face"][i], rows["left_hand"][i], rows["right_hand"][i], rows["pose"][i] = \
        None, hand, None, pose
    dev = [i for i, s in enumerate(rows["split"]) if s == "dev"]
    for i, v in enumerate(rows["video"]):
        if rows["split"][i] == "dev" or v == "full_body-1":  # whole videos with nothing detected
            for p in PARTS:
                rows[p][i] = None
        if v == "portrait-1":  # and a pose in the other test video, so that split has frames
            rows["pose"][i] = pose
    pq.write_table(pa.table(rows, schema=table.schema), dest / "keypoints.parquet")
    return {"video": video, "gone": [rows["image"][first[0]], rows["image"][first[2]]],
            "partial": rows["image"][first[1]], "hand": hand, "pose": pose, "dev": len(dev)}


def test_export_legacy_pkl_and_npz_on_constructed_cases(older: dict[str, Any],
                                                         tmp_path: Path) -> None:
    run = tmp_path / "run"
    made = edited_copy(older["run"], run)
    pkl = tmp_path / "legacy.pkl"
    proc = run_cli(["export", "--out", run, "--format", "legacy-pkl", "--to", pkl])
    assert proc.returncode == 0, proc.stderr
    data = check_contract(pkl, run / "keypoints.parquet", ["train", "dev", "test"])
    paths = data["train"]["image_paths"]
    for rel in made["gone"]:
        assert not any(p.endswith(PurePosixPath(rel).name) and made["video"] in p for p in paths)
    k = next(n for n, p in enumerate(paths)
             if made["video"] in p and p.endswith(PurePosixPath(made["partial"]).name))
    frame = data["train"]["keypoints"][k]
    assert frame["face"] is None and frame["right_hand"] is None
    np.testing.assert_array_equal(frame["left_hand"], np.reshape(made["hand"], (21, 3)))
    np.testing.assert_array_equal(frame["pose"], np.reshape(made["pose"], (33, 4))[:, :3])
    assert data["dev"] == {"keypoints": [], "image_paths": [], "video_ids": []}
    assert set(data["test"]["video_ids"]) == {"portrait-1"}  # full_body-1 left out whole
    assert data["stats"]["dev"]["failed"] == data["stats"]["dev"]["total"] == made["dev"]
    assert data["stats"]["train"]["failed"] >= 2

    # the npz export equals what the pipeline's own step makes from that pkl
    npz = tmp_path / "npz"
    proc = run_cli(["export", "--out", run, "--format", "legacy-npz", "--to", npz])
    assert proc.returncode == 0, proc.stderr
    prepare_model_input(data, tmp_path / "ref")
    names = sorted(p.name for p in (tmp_path / "ref").iterdir())
    assert sorted(p.name for p in npz.iterdir()) == names == ["test_keypoints.npz",
                                                              "train_keypoints.npz"]
    for name in names:
        with np.load(npz / name) as a, np.load(tmp_path / "ref" / name) as b:
            assert sorted(a.files) == sorted(b.files) == ["image_paths", "keypoints", "video_ids"]
            for key in b.files:
                assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
                np.testing.assert_array_equal(a[key], b[key])

    # the legacy-143 tensor set: the same 143 points, frames with nothing detected included
    proc = run_cli(["tensors", "--out", run, "--preset", "legacy-143"])
    assert proc.returncode == 0, proc.stderr
    with np.load(npz / "train_keypoints.npz") as ref:
        sets = list(load_split(run, "train", "legacy-143"))
        vals = np.concatenate([s["keypoints"] for s in sets])
        mask = np.concatenate([s["mask"] for s in sets])
        assert vals.shape[1:] == (143, 3) and mask.shape[1] == 143
        np.testing.assert_array_equal(vals[mask.any(axis=1)], ref["keypoints"])
