"""A hand model with a detector runs as rtmlib 0.0.16's `Hand` (issue 39 item 3): its RTMDet
detector (normalised input, a 0.3 cut, class 0 kept; rtmdet.py) and the pose model on every box,
the row the largest box's hand and `persons` the boxes, on tiny RTMDet-style models built in
tests/tiny_onnx.py (one with NMS inside, one raw grid of two classes). Through a video and an
archive: tests/test_heads.py's hand21 cases; extract_keypoints: its heatmap hand21 case;
--det-every (rtmlib's PoseTracker around Hand): its tracking test's hand case.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import SHARED_SAMPLE, killed_and_resumed, run_cli
from test_wholebody import ok, reference_bgr, refused
from tiny_onnx import (
    RTMDET_HW,
    pose_model,
    rtmdet_models,
    rtmlib_hand,
    rtmlib_hand_row,
    rtmlib_pose,
    rtmlib_signer,
)

# At collection, before any test imports rtmlib: the runner turns onnxruntime's telemetry off when it
# loads, which must come before onnxruntime's first import.
from phoenix_keypoints.extract.families.wholebody.runner import Detector, WholebodyModels

PX, SCORE = 0.01, 1e-4  # the bounds: pixels, scores


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not Path(SHARED_SAMPLE).is_dir():
        pytest.skip("shared data not found beside the repo (../shared/data)")
    return tmp_path_factory.mktemp("hand")


def hand_args(folder: Path, det: str, *more: str) -> list:
    return ["--estimator", "wholebody", "--detector", rtmdet_models(folder)[det],
            "--pose-model", pose_model(folder, "simcc", 21), *more]


@pytest.mark.parametrize("det", ["rtmdet", "rtmdet_raw"])
def test_a_hand_run_on_frame_folders_equals_rtmlib_hand(folder, det, tmp_path):
    """`run` on the shared sample's frame folders with a hand model and an RTMDet-style detector
    (NMS inside, or a raw grid): each row is rtmlib's Hand's hand of the largest box (the whole
    frame's where it found none), `persons` its boxes; the detector's kind is said, recorded and
    shown by status; the report counts frames of more than two hands and of none."""
    out = tmp_path / "out"
    proc = run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, *hand_args(folder, det)])
    ok(proc, "run")
    assert "read as RTMDet, as rtmlib's Hand" in proc.stderr + proc.stdout
    settings = json.loads((out / "run.json").read_text())["options"]["wholebody"]
    assert settings["detector"]["kind"] == "rtmdet" and settings["point_set"] == "hand21"
    status = run_cli(["status", "--out", out])
    assert "RTMDet" in status.stdout + status.stderr
    from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata

    assert read_file_metadata(out / "keypoints.parquet")["persons"].startswith("hands: ")
    hand = rtmlib_hand(rtmdet_models(folder)[det], pose_model(folder, "simcc", 21))
    rows = pq.read_table(out / "keypoints.parquet").select(["image", "status", "hand21", "persons"])
    dxy = dscore = 0.0
    persons = []
    for row in rows.to_pylist():
        want, n, _ = rtmlib_hand_row(hand, reference_bgr(Path(SHARED_SAMPLE), row["image"]))
        got = np.asarray(row["hand21"], np.float32).reshape(21, 3)
        assert row["status"] == "ok" and row["persons"] == n, (row["image"], row["persons"], n)
        dxy = max(dxy, float(np.abs(got[:, :2] - want[:, :2]).max()))
        dscore = max(dscore, float(np.abs(got[:, 2] - want[:, 2]).max()))
        persons.append(n)
    print(f"{det}: {len(persons)} rows, boxes {np.bincount(persons)}, max |dx,dy| {dxy:.2e} px, "
          f"max |dscore| {dscore:.2e}")
    assert dxy <= PX and dscore <= SCORE
    assert max(persons) > 1, "no frame with several boxes: the largest was never chosen"
    # the report counts hands: two are a signer's, a video is flagged for more
    ok(run_cli(["report", "--out", out]), "report")
    videos = pq.read_table(out / "report" / "videos.parquet").to_pandas()
    over = videos["frames_over_two_hands"].sum()
    assert over == sum(n > 2 for n in persons) and "frames_multi_person" not in videos
    assert videos["frames_no_hand_box"].sum() == persons.count(0)


def test_the_rtmdet_detector_gives_rtmlib_rtmdets_boxes(folder):
    """The family's detector of kind rtmdet gives rtmlib's RTMDet's boxes bit for bit (both
    layouts; a frame of the model's own size, which is not letterboxed, too; in a batch as alone),
    and reading the same file as YOLOX gives other boxes: the kind is what makes them equal."""
    frames = [cv2.imread(str(f)) for f in sorted(Path(SHARED_SAMPLE).rglob("*.png"))[::12]]
    frames.append(cv2.resize(frames[0], RTMDET_HW[::-1]))
    differs = 0
    for key in ("rtmdet", "rtmdet_raw"):
        ref = rtmlib_hand(rtmdet_models(folder)[key], pose_model(folder, "simcc", 21)).det_model
        ours = Detector(rtmdet_models(folder)[key], kind="rtmdet")
        batched = Detector(rtmdet_models(folder, dynamic=True)[key], kind="rtmdet").batch(frames)
        yolox = Detector(rtmdet_models(folder)[key])
        for bgr, in_batch in zip(frames, batched, strict=True):
            want = ref(bgr)
            got = ours(bgr)
            assert got.dtype == want.dtype and np.array_equal(got, want), (key, got, want)
            assert np.array_equal(in_batch, want)
            other = yolox(bgr)
            differs += other.shape != want.shape or not np.array_equal(other, want)
    assert differs >= len(frames), differs


def test_a_hand_run_killed_and_resumed_equals_the_uninterrupted_run(folder, tmp_path):
    """A hand run (raw RTMDet, every box posed) SIGKILLed once a chunk is committed and run
    again: the same bytes as a run never killed."""
    killed_and_resumed(["--dataset", SHARED_SAMPLE, *hand_args(folder, "rtmdet_raw"),
                        "--workers-per-gpu", "1", "--chunk-frames", "30"], tmp_path)


def test_a_run_whose_detector_was_read_as_yolox_is_not_resumed_as_rtmdet(folder, tmp_path):
    """A hand run recorded before RTMDet (its detector record has no kind: read as YOLOX) asked
    again with its files is refused, naming both readings, instead of mixing two detectors'
    boxes in one file."""
    out = tmp_path / "out"
    common = ["--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1"]
    ok(run_cli(["run", *common, *hand_args(folder, "rtmdet")]), "run")
    run_json = out / "run.json"
    record = json.loads(run_json.read_text())
    del record["options"]["wholebody"]["detector"]["kind"]
    run_json.write_text(json.dumps(record))
    refused(run_cli(["run", *common, *hand_args(folder, "rtmdet")]), "--detector read as yolox",
            "as rtmdet now", "--detector-kind yolox")
    ok(run_cli(["run", *common, *hand_args(folder, "rtmdet", "--detector-kind", "yolox")]),
       "the advised --detector-kind")


def test_detector_kind_reads_an_rtmdet_person_detector_for_a_body_model(folder, tmp_path):
    """--detector-kind rtmdet (detector_kind= in extract_keypoints) with a 17-point model: rtmlib's
    RTMDet's boxes, the pose model on the largest (as for YOLOX), equal to rtmlib; recorded; a
    kind without a detector, or not one of the two, refused naming the choices."""
    from phoenix_keypoints import extract_keypoints

    frames = sorted(Path(SHARED_SAMPLE).rglob("*.png"))[::10]
    det, pose = rtmdet_models(folder)["rtmdet_raw"], pose_model(folder, "simcc", 17)
    kp = extract_keypoints([str(f) for f in frames], estimator="wholebody", detector=det,
                           pose_model=pose, detector_kind="rtmdet")
    rtmdet = rtmlib_hand(det, pose_model(folder, "simcc", 21)).det_model
    ref_pose = rtmlib_pose(pose, "simcc")
    for got, f in zip(kp["coco17"], frames, strict=True):
        want, _ = rtmlib_signer(rtmdet, ref_pose, cv2.imread(str(f)))
        assert np.abs(got[:, :2] - want[:, :2]).max() <= PX
        assert np.abs(got[:, 2] - want[:, 2]).max() <= SCORE
    out = tmp_path / "out"
    ok(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1",
                "--estimator", "wholebody", "--detector", det, "--pose-model", pose,
                "--detector-kind", "rtmdet"]), "run")
    settings = json.loads((out / "run.json").read_text())["options"]["wholebody"]
    assert settings["detector"]["kind"] == "rtmdet" and settings["point_set"] == "coco"
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", tmp_path / "o2", "--estimator",
                     "wholebody", "--pose-model", pose, "--detector-kind", "rtmdet"]),
            "--detector-kind", "--detector")
    with pytest.raises(ValueError, match="yolox, rtmdet"):
        extract_keypoints([str(frames[0])], estimator="wholebody", detector=det, pose_model=pose,
                          detector_kind="ssd")


def test_a_batch_of_frames_gives_each_the_hand_it_gives_alone(folder):
    """Every box of a batch's frames posed in calls of the batch's size (models with a dynamic
    batch axis, and fixed at 1): each frame's row and count are rtmlib's Hand's, as alone."""
    frames = [cv2.imread(str(f)) for f in sorted(Path(SHARED_SAMPLE).rglob("*.png"))[::9]]
    rgbs = [cv2.cvtColor(f, cv2.COLOR_BGR2RGB) for f in frames]
    hand = rtmlib_hand(rtmdet_models(folder)["rtmdet_raw"], pose_model(folder, "simcc", 21))
    want = [rtmlib_hand_row(hand, f)[:2] for f in frames]
    for dynamic in (True, False):
        models = WholebodyModels(rtmdet_models(folder, dynamic)["rtmdet_raw"],
                                 pose_model(folder, "simcc", 21, dynamic), detector_kind="rtmdet",
                                 every_box=True)
        for batch in (models.batch(rgbs[:5]) + models.batch(rgbs[5:]), [models(r) for r in rgbs]):
            for (row, n), (ref, count) in zip(batch, want, strict=True):
                got = row.reshape(21, 3)
                assert n == count and np.abs(got[:, :2] - ref[:, :2]).max() <= PX
                assert np.abs(got[:, 2] - ref[:, 2]).max() <= SCORE
    assert max(n for _, n in want) > 5 > min(n for _, n in want)
