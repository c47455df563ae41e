"""--estimator wholebody3d against rtmlib 0.0.16's RTMPose3d (Wholebody3d's pose model), on tiny
ONNX models the tests build (tests/tiny_onnx.py: a YOLOX and an RTMW3D-style model answering
three SimCC vectors).

The reference is fed each frame as rtmlib's users feed it (BGR: cv2.imread, PyAV's RGB turned
to BGR for video, an archive member decoded), on the signer's box (the largest of rtmlib's
YOLOX boxes). Equality: the 2D points and rtmlib's 3D points (x, y, z) within 0.01, scores within
1e-4, for every row of real runs on a frame folder, an archive and a folder of videos, through
extract_keypoints, and after a SIGKILL and a resume.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import (
    PHX_FRAMES,
    SHARED_SAMPLE,
    VIDEOS,
    assert_no_traceback,
    killed_and_resumed,
    run_cli,
)
from kinds import KINDS
from test_wholebody import reference_bgr
from tiny_onnx import rtmlib_signer3d, rtmlib_wholebody3d, tiny_models

PX, SCORE = 0.01, 1e-4  # the bounds: pixels (and z), scores
KIND = {k.id: k for k in KINDS}
NAME = "wholebody3d"
CHANNELS = ["x", "y", "x3d", "y3d", "z3d", "score"]


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not PHX_FRAMES.is_dir() or not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory.mktemp("models"))


def flags(models: dict[str, Path], detector: str = "detector") -> list:
    return ["--estimator", NAME, "--detector", models[detector], "--pose-model", models["pose3d"]]


def ok(proc: subprocess.CompletedProcess, what: str) -> str:
    assert_no_traceback(proc)
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert_no_traceback(proc)
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)


class Gap:
    """The largest differences seen against rtmlib, per kind of value."""

    def __init__(self) -> None:
        self.d = {"2d": 0.0, "3d": 0.0, "score": 0.0}

    def add(self, got: np.ndarray, ref: dict[str, np.ndarray]) -> None:
        got = got.reshape(133, 6)
        for key, diff in (("2d", got[:, :2] - ref["2d"]), ("3d", got[:, 2:5] - ref["keypoints"]),
                          ("score", got[:, 5] - ref["scores"])):
            self.d[key] = max(self.d[key], float(np.abs(diff).max()))
        # the SimCC-space points rtmlib also returns: x, y are the 3D point's, z its bin / 2
        np.testing.assert_array_equal(got[:, 2:4], ref["simcc"][:, :2])

    def within(self) -> bool:
        return self.d["2d"] <= PX and self.d["3d"] <= PX and self.d["score"] <= SCORE


# --- the models on frames ------------------------------------------------------------------------
@pytest.mark.parametrize("detector", ["detector", "detector_raw"])
def test_models_equal_rtmlib_frame_by_frame_and_in_a_batch(models, detector, tmp_path):
    """Both detector layouts, 40 real frames: rtmlib's 2D points, 3D points, scores and persons,
    frame by frame and in one batch of a dynamic-batch copy; the values vary from frame to frame."""
    from phoenix_keypoints.extract.families.wholebody3d.runner import Wholebody3dModels

    det, pose = rtmlib_wholebody3d(models, detector)
    dynamic = tiny_models(tmp_path / "dyn", dynamic=True)
    ours, batched = (Wholebody3dModels(m[detector], m["pose3d"]) for m in (models, dynamic))
    rgbs = [cv2.cvtColor(cv2.imread(str(f)), cv2.COLOR_BGR2RGB)
            for f in sorted(PHX_FRAMES.glob("*/*/*.png"))[::3][:40]]
    gap, persons = Gap(), []
    for rgb, (together, n2) in zip(rgbs, batched.batch(rgbs), strict=True):
        ref, n = rtmlib_signer3d(det, pose, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        got, k = ours.batch([rgb])[0]
        assert got.dtype == np.float32 and k == n == n2
        np.testing.assert_array_equal(together, got)
        gap.add(got, ref)
        persons.append(n)
    print(f"{detector}: {len(rgbs)} frames, max |d| {gap.d}")
    assert gap.within(), gap.d
    assert len(set(persons)) > 1, "the person count should vary between frames"
    if detector == "detector_raw":
        assert 0 in persons, "a frame without a box (the whole frame's path) should be covered"


# --- real runs against rtmlib --------------------------------------------------------------------
def compare_run(out: Path, root: Path, models: dict[str, Path], detector: str) -> Gap:
    det, pose = rtmlib_wholebody3d(models, detector)
    gap = Gap()
    rows = pq.read_table(out / "keypoints.parquet").select(["image", "status", NAME, "persons"])
    assert rows.num_rows
    zs = set()
    for row in rows.to_pylist():
        assert row["status"] == "ok", row
        ref, n = rtmlib_signer3d(det, pose, reference_bgr(root, row["image"]))
        assert row["persons"] == n, (row["image"], row["persons"], n)
        gap.add(np.asarray(row[NAME], np.float32), ref)
        zs.add(tuple(np.round(ref["keypoints"][:, 2], 3)))
    assert len(zs) > 1, "z should vary between frames"
    return gap


@pytest.mark.parametrize("kind,detector", [("phoenix-T", "detector"), ("phoenix-T", "detector_raw"),
                                           ("archive-top.tar.gz", "detector"),
                                           ("videos", "detector")])
def test_run_equals_rtmlib(models, kind, detector, tmp_path):
    """`run --estimator wholebody3d` on a frame folder corpus, an archive and videos: every row
    equals rtmlib's RTMPose3d on the frame it names."""
    built = KIND[kind].build(tmp_path / "in")
    out = tmp_path / "out"
    ok(run_cli(["run", KIND[kind].flag, built, "--out", out, *flags(models, detector)]), "run")
    gap = compare_run(out, built, models, detector)
    print(f"{kind} ({detector}): max |d| {gap.d}")
    assert gap.within(), gap.d


# --- the run's records and outputs ---------------------------------------------------------------
@pytest.fixture(scope="module")
def run3d(models, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wb3d") / "run"
    ok(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, *flags(models)]), "run")
    return out


def test_records_head_layout_units_and_models(run3d, models):
    from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata

    options = json.loads((run3d / "run.json").read_text())["options"]
    meta = read_file_metadata(run3d / "keypoints.parquet")
    assert options["estimator"] == meta["estimator"] == NAME
    for record in (options[NAME], meta[NAME]):
        assert record["head"] == "simcc-3d" and record["z_range"] == pytest.approx(2.1744869)
        assert record["pose_model"]["size"] == models["pose3d"].stat().st_size
        assert record["pose_model"]["input_size"] == {"height": 64, "width": 48}
    layout = meta["layout"][NAME]
    assert layout["values"] == CHANNELS and layout["points"] == 133 and layout["width"] == 798
    assert "SimCC x, y, z" in layout["head"] and "frame" in layout["coordinates"]
    assert {NAME, "persons"} <= set(pq.read_schema(run3d / "keypoints.parquet").names)


def test_tensors_are_frames_by_133_by_6_with_a_score_mask(run3d):
    t = pq.read_table(run3d / "keypoints.parquet")
    meta = json.loads((run3d / "tensors" / "points.json").read_text())
    assert meta["channels"] == CHANNELS and meta["num_points"] == 133 and "z3d" in meta["units"]
    for split in ("train", "dev", "test"):
        arr = np.load(run3d / "tensors" / f"{split}.npy")
        mask = np.load(run3d / "tensors" / f"{split}.mask.npy")
        rows = t.filter(t["split"].to_numpy(zero_copy_only=False) == split)
        want = np.asarray(rows[NAME].to_pylist(), np.float32).reshape(-1, 133, 6)
        assert arr.shape == (rows.num_rows, 133, 6) and arr.dtype == np.float32
        np.testing.assert_array_equal(arr, want)
        np.testing.assert_array_equal(mask, want[:, :, 5] >= meta["score_threshold"])


def test_report_show_diff_verify_status_and_refused_exports(run3d, tmp_path):
    for cmd in (["status", "--out", run3d], ["verify", "--out", run3d],
                ["report", "--out", run3d], ["diff", run3d, run3d]):
        ok(run_cli(cmd), cmd[0])
    videos = pq.read_table(run3d / "report" / "videos.parquet").to_pandas()
    assert {"left_hand_found", "right_hand_found", "z3d_std"} <= set(videos.columns)
    assert (videos["z3d_std"] > 0).all()
    video = videos["video"][0]
    ok(run_cli(["show", "--out", run3d, "--video", video, "--to", tmp_path / "sheet.png"]), "show")
    assert cv2.imread(str(tmp_path / "sheet.png")) is not None
    for fmt in ("twostream-pkl", "unisign-pkl", "legacy-pkl", "islr"):
        refused(run_cli(["export", "--out", run3d, "--format", fmt, "--to", tmp_path / fmt]),
                f"--format {fmt} is made from", f"is a {NAME} run", "Its exports: pose.")
    refused(run_cli(["tensors", "--out", run3d, "--preset", "compact-187"]), NAME)


def test_pose_export_is_cocowholebody_xyzc_and_equals_to_pose(run3d, models, tmp_path):
    """The .pose holds x, y (frame pixels) and z3d with the score as confidence (0 for a point
    under the score threshold), in pose-format's COCO-WholeBody components with format XYZC;
    extract_keypoints' to_pose gives the same body."""
    pytest.importorskip("pose_format")
    from pose_format import Pose

    from phoenix_keypoints import extract_keypoints

    ok(run_cli(["export", "--out", run3d, "--format", "pose", "--to", tmp_path / "poses"]), "export")
    t = pq.read_table(run3d / "keypoints.parquet")
    video = "25October_2010_Monday_tagesschau-17"
    pose = Pose.read((tmp_path / "poses" / "dev" / f"{video}.pose").read_bytes())
    assert [(c.name, c.format, len(c.points)) for c in pose.header.components] == [
        ("BODY", "XYZC", 23), ("FACE", "XYZC", 68), ("LEFT_HAND", "XYZC", 21),
        ("RIGHT_HAND", "XYZC", 21)]
    rows = t.filter(t["video"].to_numpy(zero_copy_only=False) == video)
    want = np.asarray(rows[NAME].to_pylist(), np.float32).reshape(-1, 133, 6)
    found = want[..., 5] >= 0.3  # a point under the score threshold: confidence 0, masked
    np.testing.assert_array_equal(np.asarray(pose.body.data)[:, 0],
                                  np.where(found[..., None], want[..., [0, 1, 4]], 0))
    np.testing.assert_array_equal(np.asarray(pose.body.confidence)[:, 0],
                                  np.where(found, want[..., 5], 0))
    kp = extract_keypoints(PHX_FRAMES / "dev" / video, estimator=NAME,
                           detector=models["detector"], pose_model=models["pose3d"], progress=False)
    np.testing.assert_array_equal(kp[NAME], want)
    assert kp["right_hand"].shape == (len(want), 21, 6)
    mine = kp.to_pose()
    np.testing.assert_array_equal(np.asarray(mine.body.data), np.asarray(pose.body.data))
    assert mine.header.components[0].format == "XYZC"


@pytest.mark.parametrize("source", ["frames", "video"])
def test_extract_keypoints_equals_rtmlib(models, source):
    """extract_keypoints(..., estimator="wholebody3d") on a frame folder and a video file."""
    from phoenix_keypoints import extract_keypoints

    where = PHX_FRAMES / "dev" / "25October_2010_Monday_tagesschau-17"
    path = where if source == "frames" else VIDEOS / "signer_demo.mp4"
    kp = extract_keypoints(path, estimator=NAME, detector=models["detector"],
                           pose_model=models["pose3d"], progress=False)
    det, pose = rtmlib_wholebody3d(models)
    gap = Gap()
    for i, image in enumerate(kp.image):
        root = where if source == "frames" else VIDEOS
        name = Path(image).name if source == "frames" else image
        ref, _ = rtmlib_signer3d(det, pose, reference_bgr(root, name))
        gap.add(kp[NAME][i], ref)
    assert len(kp.image) > 1 and gap.within(), gap.d


def test_slurm_shards_build_the_3d_models_from_run_json(models, run3d, tmp_path):
    out = tmp_path / "array"
    ok(run_cli(["slurm", "--dataset", SHARED_SAMPLE, "--out", out, "--num-shards", "2",
                *flags(models)]), "slurm")
    for shard in ("0", "1"):
        ok(run_cli(["run", "--out", out, "--num-shards", "2", "--shard-index", shard]), shard)
    assert pq.read_table(out / "keypoints.parquet").select([NAME, "persons"]).equals(
        pq.read_table(run3d / "keypoints.parquet").select([NAME, "persons"]))


# --- resume, refusals ----------------------------------------------------------------------------
@pytest.mark.slow
def test_resume_after_sigkill_equals_the_uninterrupted_run(models, run3d, tmp_path):
    b = killed_and_resumed(["--dataset", SHARED_SAMPLE, *flags(models), "--workers-per-gpu", "1",
                            "--chunk-frames", "30"], tmp_path)
    np.testing.assert_array_equal(pq.read_table(b / "keypoints.parquet")[NAME].to_pylist(),
                                  pq.read_table(run3d / "keypoints.parquet")[NAME].to_pylist())


def test_a_2d_model_is_refused_for_3d_and_a_3d_model_for_2d(models, tmp_path):
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", tmp_path / "a", "--estimator", NAME,
                     "--detector", models["detector"], "--pose-model", models["pose"]]),
            "three SimCC outputs", "--estimator wholebody")
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", tmp_path / "b", "--estimator",
                     "wholebody", "--detector", models["detector"], "--pose-model",
                     models["pose3d"]]), "--pose-model")
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", tmp_path / "c", "--estimator",
                     NAME]), "--detector")
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", tmp_path / "d", "--estimator",
                     NAME, "--pose-model", models["pose3d"]]), f"--estimator {NAME} needs both")
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", tmp_path / "e", "--estimator",
                     NAME, "--models", "balanced"]), "--models NAME", "--estimator wholebody")


def test_a_resume_given_moved_models_without_estimator_checks_them_as_3d(tmp_path):
    """The model files moved; the resume names them where they are now, without --estimator:
    they are checked and recorded as the run's own family's (a 3D head), not as 2D ones."""
    old = tiny_models(tmp_path / "old")
    out = tmp_path / "run"
    args = ["run", "--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1"]
    ok(run_cli([*args, *flags(old)]), "run")
    (tmp_path / "old").rename(tmp_path / "new")
    new = {k: tmp_path / "new" / p.name for k, p in old.items()}
    for part in [out / "keypoints.parquet", *(out / "parts").glob("chunk-*.parquet")]:
        part.unlink()  # work left: the resume needs the models
    proc = run_cli([*args, "--detector", new["detector"], "--pose-model", new["pose3d"]])
    ok(proc, "resume from the moved models")
    assert "the model file(s) moved" in proc.stderr, proc.stderr
    record = json.loads((out / "run.json").read_text())["options"]
    assert record["estimator"] == NAME and record[NAME]["head"] == "simcc-3d"
    assert record[NAME]["pose_model"]["path"] == str(new["pose3d"].resolve())
    ok(run_cli(["verify", "--out", out]), "verify")
    # --fresh starts a new run: the old run's family no longer reads the flags (2D models: 2D)
    ok(run_cli([*args, "--fresh", "--detector", new["detector"], "--pose-model", new["pose"]]),
       "a fresh 2D run in the 3D run's folder")
    assert json.loads((out / "run.json").read_text())["options"]["estimator"] == "wholebody"
