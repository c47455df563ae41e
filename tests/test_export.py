"""Exports for existing code: the pkl dict, pose-format .pose files, and the older script's flags."""

from __future__ import annotations

import pickle
import pickletools
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import assert_no_traceback, run_cli

from phoenix_keypoints.extract.outputs.loader import load_split


def rows_by_video(run: Path) -> dict[str, dict[str, list]]:
    kp = pq.read_table(run / "keypoints.parquet").to_pydict()
    out: dict[str, dict[str, list]] = {}
    for i, v in enumerate(kp["video"]):
        d = out.setdefault(v, {k: [] for k in kp})
        for k in kp:
            d[k].append(kp[k][i])
    return out


def check_pkl(pkl: Path, run: Path) -> None:
    """The pkl is a plain dict video -> entry holding exactly the run's keypoints and corpus fields."""
    with open(pkl, "rb") as f:
        data = pickle.load(f)
    assert type(data) is dict
    plan = pq.read_table(run / "plan.parquet").to_pandas().set_index("video")
    rows = rows_by_video(run)
    assert set(data) == set(rows)
    for video, entry in data.items():
        assert set(entry) >= {"keypoints", "mask", "split", "gloss", "text"}
        r = rows[video]
        t = len(r["frame"])
        assert entry["keypoints"].shape == (t, 543, 3) and entry["mask"].shape == (t, 543)
        assert entry["split"] == r["split"][0]
        assert entry["gloss"] == plan.loc[video, "gloss"]
        assert entry["text"] == plan.loc[video, "translation"]
        pose = np.array([np.reshape(p, (33, 4))[:, :3] if p else np.zeros((33, 3)) for p in r["pose"]])
        np.testing.assert_array_equal(entry["keypoints"][:, :33], pose.astype(np.float32))
        for part, lo, hi in (("face", 33, 501), ("left_hand", 501, 522), ("right_hand", 522, 543)):
            found = [f is not None for f in r[part]]  # whatever MediaPipe found on this CPU
            np.testing.assert_array_equal(entry["mask"][:, lo:hi], np.repeat(np.c_[found], hi - lo, 1))


def test_pkl_export_is_one_plain_dict(run_copy: Path, tmp_path: Path) -> None:
    pkl = tmp_path / "k.pkl"
    proc = run_cli(["export", "--out", run_copy, "--format", "pkl", "--to", pkl])
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "dis.txt", "w") as f:
        pickletools.dis(pkl.read_bytes(), out=f)  # a well-formed opcode stream, not just loadable
    check_pkl(pkl, run_copy)
    # a tagged set exports the same way, with its own points
    assert run_cli(["tensors", "--out", run_copy, "--preset", "hands-body-59"]).returncode == 0
    proc = run_cli(["export", "--out", run_copy, "--format", "pkl", "--to", tmp_path / "h.pkl",
                    "--tag", "hands-body-59"])
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "h.pkl", "rb") as f:
        small = pickle.load(f)
    for split in ("train", "dev", "test"):
        for sample in load_split(run_copy, split, "hands-body-59"):
            np.testing.assert_array_equal(small[sample["video"]]["keypoints"], sample["keypoints"])


def test_pose_export_reads_back_with_pose_format(run_copy: Path, tmp_path: Path) -> None:
    pytest.importorskip("pose_format", reason="pose-format not installed (pip install -e '.[pose]')")
    out = tmp_path / "poses"
    proc = run_cli(["export", "--out", run_copy, "--format", "pose", "--to", out])
    assert proc.returncode == 0, proc.stderr
    check_pose_export(run_copy, out)


def check_pose_export(run: Path, out: Path) -> None:
    """One .pose per video whose components (pose-format's names, a 478-point face when refined,
    POSE_WORLD_LANDMARKS when recorded) hold exactly the run's values, as pose-format's loader
    would fill them."""
    from pose_format import Pose

    from phoenix_keypoints.extract.families.holistic.points import file_layout
    from phoenix_keypoints.extract.families.holistic.pose import HOLISTIC_COMPONENTS

    rows = rows_by_video(run)
    parts = file_layout(run / "keypoints.parquet")
    files = sorted(out.rglob("*.pose"))
    assert {p.stem for p in files} == set(rows)
    for path in files:
        r = rows[path.stem]
        assert path.parent.name == r["split"][0]
        pose = Pose.read(path.read_bytes())
        h = pose.header
        assert (h.dimensions.width, h.dimensions.height) == (210, 260) and pose.body.fps == 25
        assert [(c.name, len(c.points)) for c in h.components] == [
            (HOLISTIC_COMPONENTS[p], k) for p, (k, _) in parts.items()]
        data = np.asarray(pose.body.data.data)[:, 0]
        conf = np.asarray(pose.body.confidence)[:, 0]
        assert data.shape == (len(r["frame"]), sum(k for k, _ in parts.values()), 3)
        o = 0
        for part, (k, c) in parts.items():
            for t, vals in enumerate(r[part]):
                if vals is None:
                    assert not data[t, o : o + k].any() and not conf[t, o : o + k].any()
                    continue
                v = np.reshape(vals, (k, c)).astype(np.float32)
                want = v[:, :3] * np.float32([r["width"][t], r["height"][t], 1])
                np.testing.assert_allclose(data[t, o : o + k], want, rtol=1e-6, atol=1e-4)
                np.testing.assert_array_equal(conf[t, o : o + k], v[:, 3] if c == 4 else 1)
            o += k


def test_old_script_command_line_writes_its_pkl(sample_root: Path, clean_run: Path,
                                                tmp_path: Path) -> None:
    proc = run_cli(["run", "--dataset_path", sample_root, "--output_path",
                    "phoenix_keypoints_full.pkl", "--num_gpus", "4", "--num_workers_per_gpu", "1"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    pkl, run = tmp_path / "phoenix_keypoints_full.pkl", tmp_path / "phoenix_keypoints_full_run"
    assert pkl.is_file() and (run / "keypoints.parquet").is_file()
    assert "phoenix_keypoints_full.pkl" in proc.stdout
    with open(pkl, "rb") as f:  # the older script's layout (every field: tests/test_legacy.py)
        data = pickle.load(f)
    assert list(data) == ["train", "dev", "test", "stats", "keypoint_info", "dataset_info"]
    rows = pq.read_table(run / "keypoints.parquet", columns=["split"])["split"].to_pylist()
    assert {s: data["stats"][s]["total"] for s in ("train", "dev", "test")} == {
        s: rows.count(s) for s in ("train", "dev", "test")}
    assert data["dataset_info"]["source_path"] == str(sample_root)
    # 4 "GPUs" x 1 worker on a CPU machine: the same keypoints as the reference run
    a = pq.read_table(run / "keypoints.parquet").drop(["image"])
    b = pq.read_table(clean_run / "keypoints.parquet").drop(["image"])
    assert a.equals(b)
