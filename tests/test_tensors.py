"""Tensor sets on real frames: presets, shoulder normalisation, gap filling, round trips, loader.

Expected values are recomputed here from keypoints.parquet row by row (plain Python lists), not
with the package's own column helpers, so a bug there cannot hide itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import LEGACY_FACE_68, assert_no_traceback, run_cli

from phoenix_keypoints.extract.families.holistic.points import (
    FACE_CONTOUR_EDGES,
    FACE_CONTOURS,
    HAND_EDGES,
    HAND_NAMES,
    POSE_EDGES,
    POSE_NAMES,
    PRESETS,
    point_table,
)
from phoenix_keypoints.extract.keypoints.points import PointSet, parse_points
from phoenix_keypoints.extract.outputs.loader import list_tags, load_split
from phoenix_keypoints.extract.outputs.tensors import TensorSpec, iter_videos, write_tensors

SIZES = {"pose": 33, "face": 468, "left_hand": 21, "right_hand": 21}
STARTS = {"pose": 0, "face": 33, "left_hand": 501, "right_hand": 522}


def reference(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Rows -> (xyz [n, 543, 3] float32, mask [n, 543]) straight from the Python lists."""
    n = table.num_rows
    xyz = np.zeros((n, 543, 3), np.float32)
    mask = np.zeros((n, 543), bool)
    for part, k in SIZES.items():
        c = 4 if part == "pose" else 3
        for r, vals in enumerate(table.column(part).to_pylist()):
            if vals is not None:
                pts = np.asarray(vals, np.float32).reshape(k, c)[:, :3]
                xyz[r, STARTS[part] : STARTS[part] + k] = pts
                mask[r, STARTS[part] : STARTS[part] + k] = True
    return xyz, mask


def videos_of(table: pa.Table) -> dict[str, pa.Table]:
    vids = table["video"].to_pylist()
    out = {}
    for v in dict.fromkeys(vids):
        rows = [i for i, x in enumerate(vids) if x == v]
        out[v] = table.slice(rows[0], len(rows))
        assert rows == list(range(rows[0], rows[0] + len(rows)))  # videos are contiguous
    return out


def tagged_run(tmp_path: Path, table: pa.Table, spec: TensorSpec, **kw) -> Path:
    """A bare folder with `table` as keypoints.parquet and one tensor set written from it."""
    run = tmp_path / "run"
    run.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, run / "keypoints.parquet", row_group_size=kw.pop("row_group_size", 64))
    write_tensors(run / "keypoints.parquet", run / "tensors", point_table(), None, spec, **kw)
    return run


def blank(table: pa.Table, part: str, rows: list[int]) -> pa.Table:
    """A copy of real rows with `part` set to null (not detected) in the given rows."""
    vals = table.column(part).to_pylist()
    for r in rows:
        vals[r] = None
    i = table.schema.get_field_index(part)
    return table.set_column(i, table.schema.field(i), pa.array(vals, table.schema.field(i).type))


# --- presets ---------------------------------------------------------------------------------

def test_point_names_and_face_contours_match_mediapipe() -> None:
    from mediapipe.python.solutions import face_mesh_connections as fm
    from mediapipe.python.solutions import hands, pose

    assert tuple(m.name for m in pose.PoseLandmark) == POSE_NAMES
    assert tuple(m.name for m in hands.HandLandmark) == HAND_NAMES
    regions = {"lips": fm.FACEMESH_LIPS, "left_eye": fm.FACEMESH_LEFT_EYE,
               "right_eye": fm.FACEMESH_RIGHT_EYE, "left_eyebrow": fm.FACEMESH_LEFT_EYEBROW,
               "right_eyebrow": fm.FACEMESH_RIGHT_EYEBROW, "face_oval": fm.FACEMESH_FACE_OVAL}
    for name, edges in regions.items():
        assert FACE_CONTOURS[name] == tuple(sorted({p for e in edges for p in e})), name
    assert {33 + i for r in FACE_CONTOURS.values() for i in r} == {
        33 + p for e in fm.FACEMESH_CONTOURS for p in e}


def test_drawn_skeletons_match_mediapipe() -> None:
    from mediapipe.python.solutions import face_mesh_connections, hands_connections, pose_connections

    assert tuple(sorted(pose_connections.POSE_CONNECTIONS)) == POSE_EDGES
    assert tuple(sorted(hands_connections.HAND_CONNECTIONS)) == HAND_EDGES
    assert tuple(sorted(face_mesh_connections.FACEMESH_CONTOURS)) == FACE_CONTOUR_EDGES


def test_presets_pick_the_documented_indices(run_copy: Path) -> None:
    documented = {
        "compact-187": [*range(0, 17), *sorted(33 + i for r in FACE_CONTOURS.values() for i in r),
                        *range(501, 543)],
        "hands-body-59": [*range(0, 17), *range(501, 543)],
        "holistic-543": list(range(543)),
        "legacy-143": [*(33 + i for i in LEGACY_FACE_68), *range(501, 543), *range(0, 33)],
    }
    assert set(documented) == set(PRESETS)
    kp = pq.read_table(run_copy / "keypoints.parquet")
    for name, want in documented.items():
        assert len(want) == int(name.rsplit("-", 1)[1])
        proc = run_cli(["tensors", "--out", run_copy, "--preset", name, "--name", f"p-{name}"])
        assert proc.returncode == 0, proc.stderr
        meta = json.loads((run_copy / "tensors" / f"p-{name}" / "points.json").read_text())
        assert meta["indices"] == want
        assert [p["index"] for p in meta["points"]] == want
        names = [p["name"] for p in meta["points"]]
        if name in ("compact-187", "hands-body-59"):
            assert names[11:13] == ["pose.LEFT_SHOULDER", "pose.RIGHT_SHOULDER"]
            assert names[-21] == "right_hand.WRIST"
        for split in meta["splits"]:
            data = load_split(run_copy, split, f"p-{name}")
            rows = kp.filter(pc.equal(kp["split"], split))
            xyz, mask = reference(rows)
            got = np.concatenate([s["keypoints"] for s in data])
            np.testing.assert_array_equal(got, xyz[:, want])
            np.testing.assert_array_equal(np.concatenate([s["mask"] for s in data]), mask[:, want])


def test_points_lists() -> None:
    t = point_table()
    assert parse_points("pose:11-12,left_hand:0,540-542", t) == (11, 12, 501, 540, 541, 542)
    assert parse_points("right_hand", t) == tuple(range(522, 543))
    for bad in ("pose:30-40", "543", "hand", "1,1", "", "pose:x"):
        with pytest.raises(ValueError):
            parse_points(bad, t)
    assert PointSet.from_list("pose:11-12", t).name == PointSet.from_list("11,12", t).name


# --- round trips -----------------------------------------------------------------------------

def test_default_tensors_round_trip_to_keypoints_parquet(run_copy: Path) -> None:
    kp = pq.read_table(run_copy / "keypoints.parquet")
    plan = pq.read_table(run_copy / "plan.parquet").to_pandas().set_index("video")
    assert "" in list_tags(run_copy)
    seen = 0
    for split in ("train", "dev", "test"):
        data = load_split(run_copy, split)
        assert data.keypoints.dtype == np.float32 and data.keypoints.shape[1:] == (543, 3)
        rows = videos_of(kp.filter(pc.equal(kp["split"], split)))
        assert data.videos == list(rows)
        for sample in data:
            xyz, mask = reference(rows[sample["video"]])
            np.testing.assert_array_equal(sample["keypoints"], xyz)
            np.testing.assert_array_equal(sample["mask"], mask)
            for field in ("speaker", "gloss", "translation"):
                assert sample[field] == plan.loc[sample["video"], field]
            seen += 1
    assert seen == len(kp["video"].unique()) and seen > 0


def test_float16_and_streaming_batches(run_copy: Path, tmp_path: Path) -> None:
    kp = pq.read_table(run_copy / "keypoints.parquet")
    spec = TensorSpec(dtype="float16", name="h")
    run = tagged_run(tmp_path, kp, spec, batch_size=5, row_group_size=7)  # videos straddle batches
    got = list(iter_videos(run / "keypoints.parquet", ["pose"], batch_size=5))
    assert [(s, v, t.num_rows) for s, v, t in got] == [
        (t["split"][0].as_py(), v, t.num_rows) for v, t in videos_of(kp).items()]
    for split in ("train", "dev", "test"):
        half = load_split(run, split, "h")
        full = load_split(run_copy, split)
        assert half.keypoints.dtype == np.float16
        np.testing.assert_allclose(half.keypoints, full.keypoints, atol=1e-3, rtol=1e-3)
        np.testing.assert_array_equal(half.mask, full.mask)


# --- shoulder normalisation ------------------------------------------------------------------

def shoulder_check(sample: dict, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per frame with a pose: the output's shoulder midpoint (x, y) and shoulder width."""
    a, b = names.index("pose.LEFT_SHOULDER"), names.index("pose.RIGHT_SHOULDER")
    kp, m = sample["keypoints"].astype(np.float64), sample["mask"]
    has = m[:, a] & m[:, b]
    mid = (kp[has, a, :2] + kp[has, b, :2]) / 2
    width = np.linalg.norm(kp[has, a, :2] - kp[has, b, :2], axis=1)
    return mid, width


def test_shoulders_mean_midpoint_zero_and_width_one(run_copy: Path, tmp_path: Path) -> None:
    kp = pq.read_table(run_copy / "keypoints.parquet")
    vids = videos_of(kp)
    # Real frames with the pose taken away in some frames, and in every frame of another video.
    first = next(v for v, t in vids.items() if t.num_rows >= 6)
    none_video = next(v for v in vids if v != first)
    start = {v: sum(t.num_rows for t in list(vids.values())[:i]) for i, v in enumerate(vids)}
    gone = [start[first] + 1, start[first] + 2, start[first] + 4]
    gone += list(range(start[none_video], start[none_video] + vids[none_video].num_rows))
    table = blank(kp, "pose", gone)
    run = tagged_run(tmp_path, table, TensorSpec(PointSet.ask("compact-187"), "shoulders", name="s"))
    pf = tagged_run(tmp_path, table, TensorSpec(PointSet.ask("compact-187"), "shoulders-per-frame",
                                                 name="f"))
    default = {s: load_split(run_copy, s) for s in ("train", "dev", "test")}
    idx = np.asarray(PRESETS["compact-187"])
    checked = 0
    for split in ("train", "dev", "test"):
        vid_data, frame_data = load_split(run, split, "s"), load_split(pf, split, "f")
        names = vid_data.point_names
        for sample, per_frame in zip(vid_data, frame_data, strict=True):
            v = sample["video"]
            raw = default[split].video(v)
            np.testing.assert_array_equal(sample["mask"], per_frame["mask"])
            rows = [r - start[v] for r in gone if start[v] <= r < start[v] + vids[v].num_rows]
            want_mask = raw["mask"][:, idx].copy()
            want_mask[rows, :17] = False  # pose points of the blanked frames
            np.testing.assert_array_equal(sample["mask"], want_mask)  # the mask says what was found
            assert not sample["keypoints"][~sample["mask"]].any()  # missing points stay 0
            if v == none_video:
                assert not sample["normalized"] and v in vid_data.meta["not_normalized"]
                np.testing.assert_array_equal(sample["keypoints"], np.where(
                    want_mask[..., None], raw["keypoints"][:, idx], 0))
                continue
            assert sample["normalized"] and sample["pose_frames"] == len(sample["mask"]) - len(rows)
            mid, width = shoulder_check(sample, names)
            np.testing.assert_allclose(mid.mean(axis=0), 0, atol=1e-5)
            assert width.mean() == pytest.approx(1, abs=1e-5)
            fmid, fwidth = shoulder_check(per_frame, names)
            np.testing.assert_allclose(fmid, 0, atol=1e-5)
            np.testing.assert_allclose(fwidth, 1, atol=1e-5)
            # the same numbers by hand: pixels, minus the stored origin, over the stored scale
            w, h = vids[v]["width"].to_numpy(), vids[v]["height"].to_numpy()
            px = raw["keypoints"][:, idx].astype(np.float64) * np.stack([w, h, w], 1)[:, None, :]
            want = (px - [sample["origin_x"], sample["origin_y"], 0]) / sample["scale"]
            m = sample["mask"]
            np.testing.assert_allclose(sample["keypoints"][m], want[m], rtol=1e-5, atol=1e-5)
            if rows:  # frames without a pose are normalised per frame with the video's means
                np.testing.assert_allclose(per_frame["keypoints"][rows][m[rows]],
                                           want[rows][m[rows]], rtol=1e-5, atol=1e-5)
            checked += 1
    assert checked >= 2


# --- gap filling -----------------------------------------------------------------------------

def runs_of_missing(present: np.ndarray) -> list[tuple[int, int, bool]]:
    """(start, length, interior) for each run of False in present."""
    out, t = [], 0
    while t < len(present):
        if present[t]:
            t += 1
            continue
        s = t
        while t < len(present) and not present[t]:
            t += 1
        out.append((s, t - s, s > 0 and t < len(present)))
    return out


def check_fill(sample: dict, raw: dict, idx: np.ndarray, max_gap: int) -> int:
    """Filled values are the linear blend of the detections around gaps <= max_gap; 0 elsewhere."""
    got, mask = sample["keypoints"].astype(np.float64), sample["mask"]
    ref = raw["keypoints"][:, idx].astype(np.float64)
    np.testing.assert_array_equal(mask, raw["mask"][:, idx])  # the mask stays the detections
    np.testing.assert_array_equal(got[mask], ref[mask])
    filled = 0
    for k in range(mask.shape[1]):
        for s, n, interior in runs_of_missing(mask[:, k]):
            if interior and n <= max_gap:
                for j in range(n):
                    w = (j + 1) / (n + 1)
                    blend = (1 - w) * ref[s - 1, k] + w * ref[s + n, k]
                    np.testing.assert_allclose(got[s + j, k], blend, rtol=1e-6, atol=1e-7)
                filled += n
            else:
                assert not got[s : s + n, k].any(), (k, s, n)
    return filled


def test_interpolation_fills_only_gaps_up_to_max_gap(run_copy: Path, tmp_path: Path) -> None:
    kp = pq.read_table(run_copy / "keypoints.parquet")
    vids = videos_of(kp)
    v, t = max(vids.items(), key=lambda item: item[1].num_rows)
    assert t.num_rows >= 18, "the embedded sample's longest video is too short for this test"
    start = sum(x.num_rows for x in list(vids.values())[: list(vids).index(v)])
    # face gaps of 1, 2, 3 and 4 frames between detections, a leading and a trailing gap
    holes = [0, 1, 3, 5, 6, 8, 9, 10, 12, 13, 14, 15, t.num_rows - 1]
    table = blank(kp, "face", [start + h for h in holes])
    run = tagged_run(tmp_path, table, TensorSpec(fill="interpolate", max_gap=3, name="i"))
    split = t["split"][0].as_py()
    sample = load_split(run, split, "i").video(v)
    raw_run = tagged_run(tmp_path / "raw", table, TensorSpec())
    raw = load_split(raw_run, split).video(v)
    face = np.arange(33, 501)
    assert check_fill(sample, raw, np.arange(543), 3) == (1 + 2 + 3) * 468
    assert not sample["keypoints"][[0, 1, 12, 13, 14, 15, t.num_rows - 1]][:, face].any()
    assert sample["keypoints"][[3, 5, 6, 8, 9, 10]][:, face].any(axis=-1).all()


def test_interpolation_on_real_hand_gaps(shared_sample: Path, tmp_path_factory) -> None:
    out = tmp_path_factory.mktemp("shared") / "run"
    proc = run_cli(["run", "--dataset", shared_sample, "--out", out, "--videos", "signer_demo-1",
                    "--chunk-frames", "100"])
    assert proc.returncode == 0, proc.stderr
    # Gaps of 1 and 3 frames between real right hands are constructed (a real hand from the run
    # placed around them), so the test does not depend on where MediaPipe loses the hand on this
    # CPU; the video's own gaps stay as they are and are filled by the same rule.
    t = pq.read_table(out / "keypoints.parquet")
    hands = t["right_hand"].to_pylist()
    hand = next(h for h in hands + t["left_hand"].to_pylist() if h is not None)
    hands[10:17] = [hand, None, hand, None, None, None, hand]
    t = t.set_column(t.schema.get_field_index("right_hand"), "right_hand",
                     pa.array(hands, t.schema.field("right_hand").type))
    pq.write_table(t, out / "keypoints.parquet")
    assert run_cli(["tensors", "--out", out, "--name", "raw"]).returncode == 0
    right = np.arange(522, 543)
    raw = load_split(out, "train", "raw").video("signer_demo-1")
    gaps = [n for s, n, inner in runs_of_missing(raw["mask"][:, 522]) if inner]
    assert {1, 3} <= set(gaps), gaps
    for gap in sorted({0, max(gaps) - 1, max(gaps)}):  # none filled, all but the longest, all
        proc = run_cli(["tensors", "--out", out, "--fill", "interpolate", "--max-gap", gap,
                        "--name", f"g{gap}"])
        assert proc.returncode == 0, proc.stderr
        sample = load_split(out, "train", f"g{gap}").video("signer_demo-1")
        assert check_fill(sample, raw, np.arange(543), gap) == 21 * sum(n for n in gaps if n <= gap)
        assert sample["keypoints"][:, right].any()


# --- command line ----------------------------------------------------------------------------

def test_tensors_command_errors_are_messages(run_copy: Path, tmp_path: Path) -> None:
    for args, words in [
        (["--out", tmp_path], "no run"),
        (["--out", run_copy, "--points", "pose:40"], "within 0-32"),
        (["--out", run_copy, "--name", "../x"], "--name"),
    ]:
        proc = run_cli(["tensors", *args])
        assert proc.returncode == 2, proc.stderr
        assert words in proc.stderr and proc.stderr.startswith("error:")
        assert_no_traceback(proc)
    proc = run_cli(["export", "--out", run_copy, "--format", "pkl", "--to", tmp_path / "x.pkl",
                    "--tag", "nope"])
    assert proc.returncode == 2 and "no tensor set 'nope'" in proc.stderr
    assert_no_traceback(proc)
