"""What the tool computes on a model's answer is bounded, and a call's memory is a frame's whatever
the detector answers (issue 52 items 1 and 3), on tiny models built in tests/tiny_onnx.py.

- A raw grid whose boxes never overlap: greedy NMS is quadratic in its candidates, so at most
  K = 5,000 (mmdeploy's pre_top_k: extract/families/wholebody/raw_grid.py) reach it; a grid of
  fewer gives rtmlib's boxes bit for bit, one of more gives rtmlib's NMS on the K best.
- A frame of 100 boxes whose crops each make the pose model grow: the crops go in calls that keep
  the process within one frame's --model-memory (they went in calls of up to 32 crops, each
  limited at 32 times it).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from tiny_onnx import (
    grid_boxes_detector,
    many_boxes_detector,
    pose_growing,
    pose_model,
    rtmlib_reference,
)

# At collection, before any test imports rtmlib: the runner turns onnxruntime's telemetry off
from phoenix_keypoints.extract.families.wholebody.runner import Detector, WholebodyModels

K = 5000  # the candidates NMS may see, as docs/wholebody.md says (mmdeploy's pre_top_k)
GRID_HW = (640, 640)  # 8,400 cells: more than K, and NMS on all of them still takes seconds


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bounded")


def rtmlib_yolox(path: Path, hw: tuple[int, int]) -> object:
    return rtmlib_reference().YOLOX(str(path), model_input_size=hw, backend="onnxruntime",
                                    device="cpu")


def test_a_grid_of_boxes_that_never_overlap_reaches_nms_as_at_most_k_candidates(folder):
    """8,400 cells, each a 1-pixel box at score 0.9 (none overlaps: NMS keeps every one it is
    given): the detector keeps K, the first K cells (equal scores: the grid's order), equal to
    rtmlib's NMS on those K; on a597681 it kept all 8,400 (and 86,016 of a 2048x2048 grid took
    minutes a frame)."""
    det = Detector(grid_boxes_detector(folder / "grid640.onnx", GRID_HW))
    frame = np.full((*GRID_HW, 3), 128, np.uint8)  # the model's own size: boxes in its pixels
    t0 = time.monotonic()
    boxes = det(frame)
    took = time.monotonic() - t0
    assert len(boxes) == K, len(boxes)
    ref = rtmlib_yolox(folder / "grid640.onnx", GRID_HW)
    every = ref(frame)  # rtmlib: no pre_top_k, every cell kept
    assert len(every) == 8400
    post = rtmlib_reference().tools.object_detection.post_processings
    out = ref.inference(ref.preprocess(frame)[0])[0]
    first = _decoded(out, GRID_HW)[:K]  # equal scores: the first K cells are the K best
    scores = out[0, :K, 4:5] * out[0, :K, 5:]
    dets, _ = post.multiclass_nms(first, scores, 0.45, 0.7)  # rtmlib's own NMS on them
    assert np.array_equal(boxes, dets[:, :4]), (boxes[:3], dets[:3])
    assert took < 30, took  # K boxes' NMS: well under a second here


def _decoded(out: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """rtmlib's YOLOX decode of a raw grid to x1, y1, x2, y2 (its operations, ratio 1)."""
    grids, strides = [], []
    for s in (8, 16, 32):
        xv, yv = np.meshgrid(np.arange(hw[1] // s), np.arange(hw[0] // s))
        grids.append(np.stack((xv, yv), 2).reshape(-1, 2))
        strides.append(np.full((grids[-1].shape[0], 1), s))
    pred = out[0].copy()
    pred[:, :2] = (pred[:, :2] + np.concatenate(grids)) * np.concatenate(strides)
    pred[:, 2:4] = np.exp(pred[:, 2:4]) * np.concatenate(strides)
    xyxy = np.ones_like(pred[:, :4])
    xyxy[:, 0], xyxy[:, 1] = pred[:, 0] - pred[:, 2] / 2., pred[:, 1] - pred[:, 3] / 2.
    xyxy[:, 2], xyxy[:, 3] = pred[:, 0] + pred[:, 2] / 2., pred[:, 1] + pred[:, 3] / 2.
    return xyxy


@pytest.mark.parametrize("side", [1.0, 12.0], ids=["apart", "overlapping"])
def test_a_grid_of_fewer_candidates_than_k_gives_rtmlibs_boxes(folder, side):
    """A grid of 1,344 cells (fewer than K): the boxes rtmlib's YOLOX gives, bit for bit, whether
    NMS keeps them all or suppresses most (12-pixel boxes overlap their neighbours)."""
    hw = (256, 224)
    path = grid_boxes_detector(folder / f"grid-small-{side:g}.onnx", hw, side=side)
    det, ref = Detector(path), rtmlib_yolox(path, hw)
    for frame in (np.full((*hw, 3), 128, np.uint8), np.full((300, 200, 3), 90, np.uint8)):
        got, want = det(frame), ref(frame)
        assert got.dtype == want.dtype and np.array_equal(got, want), (side, got[:3], want[:3])
    assert 0 < len(det(frame)) < (1344 if side > 1 else 1345)


def _peak_growth(run: object) -> tuple[object, int]:
    """run() while a thread samples this process's own resident memory every 2 ms: its answer
    and the most the process grew by meanwhile (bytes)."""
    from phoenix_keypoints.extract.keypoints.model_calls import resident_bytes

    base, peak, done = resident_bytes(), [0], threading.Event()

    def watch() -> None:
        while not done.wait(0.002):
            peak[0] = max(peak[0], resident_bytes() - base)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        out = run()
    finally:
        done.set()
        t.join()
    return out, max(peak[0], resident_bytes() - base)


def crops_of_one_frame(det: str, plain: str, grows: str) -> None:
    """In a process of its own (memory a test before freed would hide what a call takes): one
    frame of the 100 boxes through rtmlib's PoseTracker (--det-every 3) at --model-memory 128,
    printing how much the process grew by and whether every hand is the plain model's alone."""
    import json

    from phoenix_keypoints.extract.families.wholebody.tracking import Tracker, track_batch
    from phoenix_keypoints.extract.keypoints.model_calls import set_limits

    rgb = np.full((260, 210, 3), 100, np.uint8)
    rgb[60:200, 50:160] = 180
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    want = WholebodyModels(Path(det), Path(plain), detector_kind="rtmdet")
    alone = want.pose(bgr, want.detect([bgr])[0][0, :4])
    set_limits(memory_mib=128)
    models = WholebodyModels(Path(det), Path(grows), detector_kind="rtmdet")
    posed, grew = _peak_growth(lambda: track_batch(models, Tracker(3), [rgb])[0])
    same = all(np.array_equal(xy, alone[0]) and np.array_equal(s, alone[1])
               for xy, s in posed.poses)
    print(json.dumps({"persons": posed.persons, "posed": len(posed.poses), "same": same,
                      "grew": grew}))


def test_the_crops_of_one_frame_stay_within_one_frames_memory(folder):
    """A detector answering 100 equal boxes, a pose model growing 16 MiB a crop, --det-every 3
    (rtmlib's PoseTracker poses every box), --model-memory 128, one frame: the process grows by
    at most 128 MiB, every hand still posed and equal to the pose model alone on its box. On
    a597681 the crops went in calls of 32, each limited at 32 x 128 MiB: about 1 GiB."""
    import json
    import subprocess
    import sys

    det = many_boxes_detector(folder / "equal100.onnx", boxes=100, hw=(64, 96), equal=True)
    plain = pose_model(folder, "simcc", 17, dynamic=True)
    grows = pose_growing(plain, folder / "grows16.onnx", 16)
    code = ("import sys; sys.path.insert(0, 'tests'); from test_decoders_bounded import "
            f"crops_of_one_frame as f; f({str(det)!r}, {str(plain)!r}, {str(grows)!r})")
    from helpers import REPO, cli_env

    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cli_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["persons"] == 100 and got["posed"] == 100 and got["same"], got
    assert got["grew"] <= 128 << 20, f"grew {got['grew'] / 2**20:.0f} MiB, more than 128 MiB"
