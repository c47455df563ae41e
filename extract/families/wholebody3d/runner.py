"""3D COCO-WholeBody keypoints from the user's ONNX files: the whole-body family's YOLOX person
detector, then an RTMW3D-style pose model (three SimCC vectors: x, y, z) on the signer's box,
decoded as rtmlib 0.0.16's RTMPose3d decodes them (tests/test_wholebody3d.py).

What is reused, and what differs from the 2D family (extract/families/wholebody/runner.py):
- the detector, the model sessions and their checks, the box, crop and warp: imported as they are,
  so a 3D run finds the same signer and warps the same pixels as a 2D run;
- the decode (rtmlib's get_simcc_maximum3d and RTMPose3d.postprocess): argmax of the three
  vectors; score = the SMALLER of the x and y maxima (the 2D head takes their mean); points whose
  score is <= 0 get bin -1; the bins / split ratio 2 are the 3D point (x, y in the model input's
  pixels); its z becomes (z / (H / 2) - 1) x z_range; the 2D point is x, y mapped back through the
  box's centre and scale into frame pixels.
rtmlib's Wholebody3d runs the pose model on every box; as the 2D family, one signer per frame is
kept (the largest box; the whole frame where none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

from phoenix_keypoints.extract.families.wholebody.onnx_outputs import (
    STATUS_BAD_DETECTOR,
    STATUS_BAD_POSE,
    BadOutput,
    check_answer,
    detector_problem,
    escaped,
    outputs_said,
    run_model,
    values_problem,
)
from phoenix_keypoints.extract.families.wholebody.runner import (
    CUDA,
    Detector,
    DeviceError,
    PoseModel,
    _input_hw,
    _run,
    _session,
    check_batch,
    describe,
    dynamic_batch,
    execution_record,
    fix_shapes,
    largest,
    onnxruntime_version,
    session_limits,
)
from phoenix_keypoints.extract.families.wholebody3d.declaration import (
    DECLARATION,
    WHOLEBODY3D,
    WHOLEBODY3D_CHANNELS,
    Z_RANGE,
)
from phoenix_keypoints.extract.keypoints.estimator import RUNTIME, ModelFileError, runtime

POINTS = 133
SPLIT_RATIO = 2.0
CHANNELS = len(WHOLEBODY3D_CHANNELS)
FLAG = "--pose-model"


def check_pose3d(session: Any, wh: tuple[int, int], path: Path) -> None:
    """Refuse a pose model unless it answers three SimCC vectors of 133 points: x (2w bins),
    y (2h bins) and z (any number of bins)."""
    shapes = [list(o.shape) for o in session.get_outputs()]
    want = [2 * wh[0], 2 * wh[1], None]
    fits = len(shapes) == 3 and all(len(s) == 3 and s[1] == POINTS for s in shapes) and all(
        n is None or not isinstance(s[2], int) or s[2] == n for s, n in zip(shapes, want, strict=True))
    if not fits:
        two = " (two outputs: a 2D SimCC model; run it with --estimator wholebody)" \
            if len(shapes) == 2 else ""
        raise ModelFileError(f"{FLAG} {path}: a model with {escaped(outputs_said(shapes))}{two}. "
                             f"--estimator {WHOLEBODY3D} expects three SimCC outputs [1, {POINTS}, "
                             f"{want[0]}], [1, {POINTS}, {want[1]}] and [1, {POINTS}, Z] for its "
                             "input (an RTMW3D model, as rtmlib's Wholebody3d runs).")


def pose3d_problem(vectors: tuple[np.ndarray, ...]) -> str:
    """Why one crop's three SimCC vectors are nonsense ("" when they are not)."""
    return values_problem([(f"SimCC {axis} vector holds", v)
                           for axis, v in zip("xyz", vectors, strict=True)])


class PoseModel3d(PoseModel):
    """An RTMW3D-style model on one box: the 2D family's crop (inherited), three SimCC vectors,
    rtmlib's RTMPose3d decode."""

    def __init__(self, path: Path, device: str = "cpu", memory: int | None = None,
                 batch: int | None = None) -> None:
        self.path = Path(path)
        self.session = _session(self.path, FLAG, device, memory, batch)
        h, w = _input_hw(self.session, self.path, FLAG)
        self.wh = (w, h)
        self.input = self.session.get_inputs()[0].name
        self.dynamic = dynamic_batch(self.session)
        check_pose3d(self.session, self.wh, self.path)

    def probe(self) -> None:
        """One grey input through the model: its answer must be the three SimCC vectors."""
        x = np.zeros((1, 3, self.wh[1], self.wh[0]), np.float32)
        out = run_model(lambda: _run(self.session, self.input, x, False), FLAG, self.path)
        w, h = self.wh
        check_answer(out, [(1, POINTS, 2 * w), (1, POINTS, 2 * h), (1, POINTS, None)], FLAG,
                     self.path)

    def outputs3d(self, bgrs: list[np.ndarray], boxes: list[np.ndarray]
                  ) -> tuple[list[np.ndarray], list[tuple[np.ndarray, ...]]]:
        """The three SimCC vectors of the frames' crops, and each crop with its centre and scale."""
        crops = [self._crop(b, box) for b, box in zip(bgrs, boxes, strict=True)]
        x = np.ascontiguousarray(np.stack([c[0] for c in crops]).transpose(0, 3, 1, 2), np.float32)
        out = run_model(lambda: _run(self.session, self.input, x, self.dynamic, self.pad), FLAG,
                        self.path, len(x))
        return out[:3], crops

    def decode3d(self, sx: np.ndarray, sy: np.ndarray, sz: np.ndarray, centre: np.ndarray,
                 scale: np.ndarray) -> np.ndarray:
        """One crop's vectors -> [133, 6] float32 (x, y, x3d, y3d, z3d, score), as rtmlib's
        get_simcc_maximum3d and RTMPose3d.postprocess compute them."""
        sx, sy, sz = (v.reshape(POINTS, -1) for v in (sx, sy, sz))
        locs = np.stack([sx.argmax(1), sy.argmax(1), sz.argmax(1)], axis=-1).astype(np.float32)
        scores = np.minimum(sx.max(1), sy.max(1))
        locs[scores <= 0.0] = -1
        kpts = locs / SPLIT_RATIO
        kpts[:, 2:3] = (kpts[:, 2:3] / (self.wh[1] / 2) - 1) * Z_RANGE
        xy = kpts[:, :2] / np.array(self.wh) * scale + centre - 0.5 * scale
        row = np.empty((POINTS, CHANNELS), np.float32)
        row[:, :2], row[:, 2:5], row[:, 5] = xy, kpts, scores
        return row


def record(detector: Path, pose_model: Path) -> dict[str, Any]:
    """What a 3D run records of its models (run.json, part footers, file metadata)."""
    det, pose = describe(detector, "--detector"), describe(pose_model, FLAG)
    Detector(Path(detector)).probe()
    PoseModel3d(Path(pose_model)).probe()
    return {"detector": det.as_dict(), "pose_model": pose.as_dict(), "head": "simcc-3d",
            "z_range": Z_RANGE, "onnxruntime": onnxruntime_version()}


class Wholebody3dModels:
    """Detector and 3D pose model of one process: RGB frames -> ([133 * 6] float32, persons)."""

    def __init__(self, detector: Path, pose_model: Path, device: str = "cpu",
                 batch: int | None = None, memory: dict[str, int] | None = None) -> None:
        memory = memory or {}
        self.detector = Detector(Path(detector), device, memory=memory.get("detector"),
                                 batch=batch)
        self.pose = PoseModel3d(Path(pose_model), device, memory.get("pose_model"), batch)
        fix_shapes(self, batch, None)
        if device == "cuda" and CUDA not in self.providers():
            raise DeviceError("--device cuda: onnxruntime could not start CUDA on this worker's GPU "
                              "(the worker's log has onnxruntime's warning). Fix that, or pass "
                              "--device auto or cpu.")

    def providers(self) -> list[str]:
        return list(dict.fromkeys(self.detector.session.get_providers()
                                  + self.pose.session.get_providers()))

    def batch(self, rgbs: list[np.ndarray]) -> list[tuple[np.ndarray, int] | BadOutput]:
        """Each frame's keypoints: the detector on all frames, then the pose model on the crops
        of the frames whose boxes are sane; a frame whose outputs are nonsense gets BadOutput."""
        bgrs = [cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR) for rgb in rgbs]
        raw, ratios = self.detector.outputs(bgrs)
        found = [self.detector._boxes(raw[i:i + 1], r) for i, r in enumerate(ratios)]
        out: list[tuple[np.ndarray, int] | BadOutput] = []
        for i, (b, bgr) in enumerate(zip(found, bgrs, strict=True)):
            why = detector_problem(raw[i:i + 1], b, bgr.shape)
            out.append(BadOutput(STATUS_BAD_DETECTOR, why) if why else (np.empty(0), len(b)))
        keep = [i for i, o in enumerate(out) if not isinstance(o, BadOutput)]
        if not keep:
            return out
        boxes = [largest(found[i]) if len(found[i]) else
                 np.array([0, 0, bgrs[i].shape[1], bgrs[i].shape[0]]) for i in keep]
        vectors, crops = self.pose.outputs3d([bgrs[i] for i in keep], boxes)
        for k, i in enumerate(keep):
            mine = tuple(v[k] for v in vectors)
            why = pose3d_problem(mine)
            out[i] = BadOutput(STATUS_BAD_POSE, why) if why else (
                self.pose.decode3d(*mine, crops[k][1], crops[k][2]).reshape(-1), len(found[i]))
        return out


class Wholebody3dEstimator:
    """rtmlib's YOLOX + RTMPose3d on the signer: no state between frames, batches allowed."""

    def __init__(self, settings: dict[str, Any]) -> None:
        run = runtime() | settings.get(RUNTIME, {})
        self.settings = {k: v for k, v in settings.items() if k != RUNTIME}
        self.declaration = DECLARATION
        self.batch_size = int(run["batch_size"])
        self._models = Wholebody3dModels(settings["detector"]["path"],
                                         settings["pose_model"]["path"], run["device"],
                                         self.batch_size, session_limits(settings, run))
        self.providers = self._models.providers()
        check_batch(self.batch_size, self._models.detector, self._models.pose)
        self.execution = execution_record(self._models)

    def start_video(self) -> None:
        pass

    def process(self, rgb: np.ndarray) -> dict[str, Any]:
        return self.process_batch([rgb])[0]

    def process_batch(self, rgbs: list[np.ndarray]) -> list[dict[str, Any]]:
        """Each frame's result, as `process` gives it alone."""
        return [r.as_result() if not isinstance(r, tuple) else {WHOLEBODY3D: r[0], "persons": r[1]}
                for r in self._models.batch(rgbs)]

    def blame(self, status: str) -> str:
        """The model file a frame status says is at fault (KeepsFailing's message)."""
        det, pose = self.settings["detector"]["path"], self.settings["pose_model"]["path"]
        return {STATUS_BAD_DETECTOR: f"--detector {det}", STATUS_BAD_POSE: f"{FLAG} {pose}"}.get(
            status, f"--detector {det} or {FLAG} {pose}")

    def close(self) -> None:
        self._models = None
