"""Holistic options researchers set (refine, static image mode, smoothing, confidences): recorded,
checked on resume, and passed to MediaPipe exactly: every row equals Holistic run directly with the
same options on the same frames (max abs diff 0), whatever the worker count or a kill between."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import (
    direct_holistic,
    max_abs_diff,
    popen_cli,
    read_keypoints,
    run_cli,
    sha256,
    wait_for,
)

from phoenix_keypoints.extract.families.holistic.points import LEGACY_FACE, layout
from phoenix_keypoints.extract.families.holistic.runner import Extractor, HolisticOptions
from phoenix_keypoints.extract.keypoints.filemeta import file_metadata, read_file_metadata
from phoenix_keypoints.extract.keypoints.frames import read_frame
from phoenix_keypoints.jobs.rundir.parts import META_KEY

REFINE_STATIC = ["--refine-face-landmarks", "--static-image-mode"]
# The videos of the shared sample one Extractor sees in turn (a reset between each): the signer's
# 58 frames, then single frames of other people (tracking would carry over without the reset).
SEQUENCE = ("signer_demo-1", "portrait-1", "two_hands-1")


def _rows_by_video(table, parts: dict) -> dict[str, tuple[list[str], list[dict]]]:
    """video -> (its image paths, its frames' {part: values or None}) in file order."""
    cols = {p: table[p].to_pylist() for p in parts}
    out: dict[str, tuple[list[str], list[dict]]] = {}
    for i, (video, image) in enumerate(zip(table["video"].to_pylist(), table["image"].to_pylist(),
                                           strict=True)):
        images, frames = out.setdefault(video, ([], []))
        images.append(image)
        frames.append({p: cols[p][i] for p in parts})
    return out


def _holistic_kwargs(options: HolisticOptions) -> dict:
    return dict(options.as_dict(), enable_segmentation=False)


@pytest.fixture(scope="module")
def refined_run(shared_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """refine + static image mode over the whole shared sample, 2 workers."""
    out = tmp_path_factory.mktemp("refined") / "run"
    proc = run_cli(["run", "--dataset", shared_sample, "--out", out, "--chunk-frames", "60",
                    "--workers-per-gpu", "2", *REFINE_STATIC])
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
def test_refine_static_run_equals_mediapipe_direct(refined_run: Path, shared_sample: Path):
    options = HolisticOptions(refine_face_landmarks=True, static_image_mode=True)
    recorded = json.loads((refined_run / "run.json").read_text())["options"]["holistic"]
    assert recorded == options.as_dict()
    for part in sorted((refined_run / "parts").glob("chunk-*.parquet")):
        meta = json.loads(pq.read_metadata(part).metadata[META_KEY])
        assert meta["holistic"] == options.as_dict(), part.name
    table = read_keypoints(refined_run)
    faces = {len(v) for v in table["face"].to_pylist() if v is not None}
    assert faces == {478 * 3}, "refined face: 468 mesh + 10 iris points"
    checked = 0
    for video, (images, got) in _rows_by_video(table, options.layout).items():
        ref = direct_holistic(shared_sample, images, **_holistic_kwargs(options))
        assert max_abs_diff(got, ref, video) == 0.0
        checked += sum(r["face"] is not None for r in ref)
    assert checked > 0, "a face was found, so the 478-point face was compared"


@pytest.mark.slow
def test_one_worker_equals_two(refined_run: Path, shared_sample: Path, tmp_path: Path):
    out = tmp_path / "one"
    proc = run_cli(["run", "--dataset", shared_sample, "--out", out, "--chunk-frames", "60",
                    "--workers-per-gpu", "1", *REFINE_STATIC])
    assert proc.returncode == 0, proc.stderr
    assert sha256(out / "keypoints.parquet") == sha256(refined_run / "keypoints.parquet")


@pytest.mark.slow
def test_kill_then_resume_keeps_the_options(refined_run: Path, shared_sample: Path, tmp_path: Path):
    """Killed after a part, resumed without repeating the options: the run's own are used; asking
    for another value of one on the planned folder is refused, naming it."""
    out = tmp_path / "run"
    args = ["run", "--dataset", shared_sample, "--out", out, "--chunk-frames", "60"]
    proc = popen_cli([*args, *REFINE_STATIC, "--workers-per-gpu", "2"],
                     env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.1"})
    wait_for(lambda: list((out / "parts").glob("chunk-*.parquet")), 120, "a committed part", proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not (out / "keypoints.parquet").exists()

    refused = run_cli([*args, "--no-smooth-landmarks"])
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "smooth_landmarks (True when planned, False asked)" in refused.stderr, refused.stderr

    proc = run_cli([*args, "--workers-per-gpu", "1"])
    assert proc.returncode == 0, proc.stderr
    assert "resuming:" in proc.stderr
    assert sha256(out / "keypoints.parquet") == sha256(refined_run / "keypoints.parquet")


@pytest.mark.slow
@pytest.mark.parametrize("options", [
    HolisticOptions(refine_face_landmarks=True),
    HolisticOptions(static_image_mode=True),
    HolisticOptions(smooth_landmarks=False),
    HolisticOptions(min_detection_confidence=0.8, min_tracking_confidence=0.3),
], ids=["refine", "static", "no-smooth", "confidences"])
def test_each_option_equals_mediapipe_direct(options: HolisticOptions, shared_sample: Path):
    """The worker's Extractor over several videos in turn (reset between them) equals a fresh
    Holistic with the same options on each video: static image mode included, where the face and
    hand tracking would otherwise carry over."""
    frames_dir = next(shared_sample.glob("features/*"))
    videos = {v: sorted(p.relative_to(shared_sample).as_posix() for p in d.glob("*.png"))
              for v in SEQUENCE for d in frames_dir.glob(f"*/{v}")}
    with Extractor(options) as ex:
        for video in SEQUENCE:
            ex.start_video()
            got = [ex.process(read_frame(shared_sample / rel)[0]) for rel in videos[video]]
            ref = direct_holistic(shared_sample, videos[video], **_holistic_kwargs(options))
            assert max_abs_diff(got, ref, video) == 0.0
            assert set(got[0]) == set(layout(options.refine_face_landmarks))


def test_refined_run_exports_pose_format_components(refined_run: Path, tmp_path: Path):
    """The .pose export names pose-format's components: a 478-point FACE_LANDMARKS and
    POSE_WORLD_LANDMARKS, each holding the run's own values."""
    pytest.importorskip("pose_format", reason="pose-format not installed (pip install -e '.[pose]')")
    from test_export import check_pose_export

    out = tmp_path / "poses"
    proc = run_cli(["export", "--out", refined_run, "--format", "pose", "--to", out])
    assert proc.returncode == 0, proc.stderr
    check_pose_export(refined_run, out)
    assert read_keypoints(refined_run)["pose_world"].null_count < 143, "pose_world was recorded"


def test_islr_export_rows_match_keypoints(refined_run: Path, tmp_path: Path):
    """Kaggle isolated-sign layout: 543 rows per frame in its order, row_id strings, the run's own
    values (a refined face's first 468 points), NaN exactly where a part was not found."""
    out = tmp_path / "islr"
    proc = run_cli(["export", "--out", refined_run, "--format", "islr", "--to", out])
    assert proc.returncode == 0, proc.stderr
    assert "iris points (468-477) were left out" in proc.stderr
    table = read_keypoints(refined_run)
    order = [("face", 468, 3), ("left_hand", 21, 3), ("pose", 33, 4), ("right_hand", 21, 3)]
    seen = {"nan": 0, "values": 0}
    for video, (_, frames) in _rows_by_video(table, dict.fromkeys(p for p, _, _ in order)).items():
        split = table.filter(pc.equal(table["video"], video))["split"][0].as_py()
        got = pq.read_table(out / split / f"{video}.parquet")
        assert got.column_names == ["frame", "row_id", "type", "landmark_index", "x", "y", "z"]
        assert got.num_rows == 543 * len(frames)
        xyz = np.stack([got[c].to_numpy() for c in "xyz"], 1).reshape(len(frames), 543, 3)
        kinds = np.asarray(got["type"].to_pylist()).reshape(len(frames), 543)
        ids = np.asarray(got["landmark_index"].to_pylist()).reshape(len(frames), 543)
        row_ids = np.asarray(got["row_id"].to_pylist()).reshape(len(frames), 543)
        for t, parts in enumerate(frames):
            o = 0
            for part, k, c in order:
                assert list(kinds[t, o:o + k]) == [part] * k
                assert list(ids[t, o:o + k]) == list(range(k))
                assert list(row_ids[t, o:o + k]) == [f"{t}-{part}-{i}" for i in range(k)]
                if parts[part] is None:
                    assert np.isnan(xyz[t, o:o + k]).all(), (video, t, part)
                    seen["nan"] += 1
                else:
                    want = np.reshape(parts[part], (-1, c))[:k, :3].astype(np.float64)
                    assert np.array_equal(xyz[t, o:o + k], want), (video, t, part)
                    seen["values"] += 1
                o += k
    assert seen["nan"] and seen["values"], seen


def test_file_names_how_it_was_made(refined_run: Path):
    """Copied away from its run folder, keypoints.parquet still says how it was made (pyarrow
    alone reads it), and polars and duckdb read its landmark columns at the recorded widths."""
    import duckdb
    import polars as pl

    path = refined_run / "keypoints.parquet"
    meta = json.loads(pq.read_schema(path).metadata[b"phoenix_keypoints.file"])
    run = json.loads((refined_run / "run.json").read_text())
    assert meta["schema_version"] == 2
    assert meta["holistic"] == HolisticOptions(refine_face_landmarks=True,
                                               static_image_mode=True).as_dict()
    assert meta["dataset_fingerprint"] == run["dataset"]["fingerprint"]
    assert {meta["versions"][k] for k in ("mediapipe", "numpy", "opencv-contrib-python")} == {
        run["versions"][k] for k in ("mediapipe", "numpy", "opencv-contrib-python")}
    assert meta["tool_version"] == run["versions"]["phoenix-keypoints"]
    widths = {p: v["width"] for p, v in meta["layout"].items()}
    assert widths == {"pose": 132, "face": 1434, "left_hand": 63, "right_hand": 63,
                      "pose_world": 132}
    assert meta["layout"]["pose"]["names"][11] == "LEFT_SHOULDER"
    assert meta["layout"]["face"]["names"][468:] == [f"iris.{i}" for i in range(468, 478)]

    table = read_keypoints(refined_run)
    frame = pl.read_parquet(path)
    for part, width in widths.items():
        arr = frame.get_column(part).list.to_array(width)  # a fixed-width Array, nulls kept
        assert arr.dtype == pl.Array(pl.Float32, width)
        assert arr.null_count() == table[part].null_count
        present = [v for v in table[part].to_pylist() if v is not None]
        assert np.array_equal(np.asarray(arr.drop_nulls().to_list(), np.float32),
                              np.asarray(present, np.float32))
    got = duckdb.sql(f"SELECT count(*), count(face), max(len(face)), sum(pose_world[1]) "
                     f"FROM read_parquet('{path}')").fetchall()[0]
    world = [v[0] for v in table["pose_world"].to_pylist() if v is not None]
    assert got[:3] == (143, 143 - table["face"].null_count, 1434)
    assert got[3] == pytest.approx(sum(world), rel=1e-6)


def test_world_coordinate_tensors(refined_run: Path):
    """tensors --coords world: the pose points hold pose_world's x, y, z exactly, masked where no
    pose was found; asking for points that have no world coordinates is refused, saying why."""
    proc = run_cli(["tensors", "--out", refined_run, "--points", "pose", "--coords", "world",
                    "--name", "pose-world"])
    assert proc.returncode == 0, proc.stderr
    table = read_keypoints(refined_run)
    for split in sorted(set(table["split"].to_pylist())):
        rows = table.filter(pc.equal(table["split"], split))
        arr = np.load(refined_run / "tensors" / "pose-world" / f"{split}.npy")
        mask = np.load(refined_run / "tensors" / "pose-world" / f"{split}.mask.npy")
        assert arr.shape == (rows.num_rows, 33, 3)
        for t, v in enumerate(rows["pose_world"].to_pylist()):
            assert mask[t].all() == (v is not None) and mask[t].any() == (v is not None)
            want = np.zeros((33, 3), np.float32) if v is None else \
                np.reshape(np.asarray(v, np.float32), (33, 4))[:, :3]
            assert np.array_equal(arr[t], want), (split, t)
    refused = run_cli(["tensors", "--out", refined_run, "--coords", "world"])
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "pose points only" in refused.stderr, refused.stderr
    refused = run_cli(["tensors", "--out", refined_run, "--points", "pose", "--coords", "world",
                       "--normalize", "shoulders"])
    assert refused.returncode == 2 and "metres around the hip midpoint (pose_world) already" \
        in refused.stderr, refused.stderr


def _unrefined_copy(refined_run: Path, dest: Path) -> Path:
    """The refined run as a run made without refine: its face cut to the 468 mesh points and its
    file metadata saying so (the rows Holistic gives without refine are the same mesh points)."""
    shutil.copytree(refined_run, dest, ignore=shutil.ignore_patterns("tensors"))
    path = dest / "keypoints.parquet"
    record = read_file_metadata(path)
    table = pq.read_table(path)
    face = pa.array([None if v is None else v[:468 * 3] for v in table["face"].to_pylist()],
                    pa.list_(pa.float32()))
    meta = file_metadata(record["versions"], {**record["holistic"], "refine_face_landmarks": False},
                         record["dataset_fingerprint"])
    table = table.set_column(table.schema.get_field_index("face"), "face", face)
    pq.write_table(table.replace_schema_metadata(meta), path)
    return dest


def test_refined_tensors_hold_the_iris(refined_run: Path, tmp_path: Path):
    """On a refined run the default set (written by the merge) has all 553 points, its 478 face
    points equal to keypoints.parquet's face lists; --points face:468-477 gives the iris; the
    legacy preset still reads mesh points; an unrefined run refuses iris points, saying why."""
    table = read_keypoints(refined_run)
    meta = json.loads((refined_run / "tensors" / "points.json").read_text())
    assert (meta["num_points"], meta["face_points"]) == (553, 478)
    assert meta["points"][33 + 468]["name"] == "face.iris.468"
    proc = run_cli(["tensors", "--out", refined_run, "--points", "face:468-477", "--name", "iris"])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(["tensors", "--out", refined_run, "--preset", "legacy-143"])
    assert proc.returncode == 0, proc.stderr
    iris_meta = json.loads((refined_run / "tensors" / "iris" / "points.json").read_text())
    assert [p["name"] for p in iris_meta["points"]] == [f"face.iris.{i}" for i in range(468, 478)]
    for split in sorted(set(table["split"].to_pylist())):
        rows = table.filter(pc.equal(table["split"], split))
        full = np.load(refined_run / "tensors" / f"{split}.npy")
        iris = np.load(refined_run / "tensors" / "iris" / f"{split}.npy")
        legacy = np.load(refined_run / "tensors" / "legacy-143" / f"{split}.npy")
        assert full.shape == (rows.num_rows, 553, 3) and iris.shape == (rows.num_rows, 10, 3)
        for t, v in enumerate(rows["face"].to_pylist()):
            want = np.zeros((478, 3), np.float32) if v is None else \
                np.reshape(np.asarray(v, np.float32), (478, 3))
            assert np.array_equal(full[t, 33:511], want), (split, t)
            assert np.array_equal(iris[t], want[468:]), (split, t)
            assert np.array_equal(legacy[t, :68], want[list(LEGACY_FACE)]), (split, t)
    # the refined numbering asked for by its own name: the default set (553 points) again
    proc = run_cli(["tensors", "--out", refined_run, "--preset", "holistic-553", "--name", "all553"])
    assert proc.returncode == 0, proc.stderr  # 430dbcb refused it, reading it as an unrefined run
    for split in sorted(set(table["split"].to_pylist())):
        assert np.array_equal(np.load(refined_run / "tensors" / "all553" / f"{split}.npy"),
                              np.load(refined_run / "tensors" / f"{split}.npy"))
    unrefined = _unrefined_copy(refined_run, tmp_path / "unrefined")
    refused = run_cli(["tensors", "--out", unrefined, "--points", "face:468-477"])
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "--refine-face-landmarks" in refused.stderr and "iris" in refused.stderr, refused.stderr
    refused = run_cli(["tensors", "--out", unrefined, "--preset", "holistic-553"])
    assert refused.returncode == 2 and "holds the iris points" in refused.stderr, refused.stderr
    proc = run_cli(["tensors", "--out", unrefined, "--preset", "legacy-143"])
    assert proc.returncode == 0, proc.stderr
    for split in sorted(set(table["split"].to_pylist())):
        assert np.array_equal(np.load(unrefined / "tensors" / "legacy-143" / f"{split}.npy"),
                              np.load(refined_run / "tensors" / "legacy-143" / f"{split}.npy"))
