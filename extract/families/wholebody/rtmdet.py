"""rtmlib's RTMDet detector (rtmlib 0.0.16, tools/object_detection/rtmdet.py), the detector of its
`Hand` solution, and which of the two detectors a run's point set takes.

What rtmlib's RTMDet does that its YOLOX (runner.Detector's default) does not, and so what a
detector of kind `rtmdet` does:
- Its input is normalised: the same letterbox (bilinear resize into the top left of a 114-grey
  canvas of the model's size, the frame as it is when it has that size), then (pixel - mean) / std
  with mean (103.53, 116.28, 123.675) and std (57.375, 57.12, 58.395) on the BGR channels, in
  float64, given to the model as float32. YOLOX takes the raw pixels.
- A raw grid output (cx, cy, log w, log h, objectness, class scores per cell, as YOLOX's) keeps
  boxes scoring above 0.3 (YOLOX: 0.7), suppressed per class at IoU 0.45, and only class 0's
  boxes (its `human` mode filters the class ids; YOLOX's `human` mode keeps every class).
- A model with NMS inside (`dets` [1, N, 5], as rtmlib's published hand detector, an mmdeploy
  export) is read as YOLOX's: boxes scoring above 0.3, divided by the letterbox ratio.

Why the kind follows the point set instead of the file: both detectors' mmdeploy exports answer
the same outputs (`dets` [1, N, 5] and `labels` [1, N], or the same raw grid), and what differs,
the input normalisation, lives in mmdeploy's pipeline file, not in the ONNX graph. rtmlib pairs
them by solution: `Hand` runs RTMDet, `Body`, `BodyWithFeet`, `Wholebody` run YOLOX; a run's
layout (layouts.py) names its solution, so a hand21 run with --detector reads it as RTMDet
(`--detector-kind` says otherwise: an RTMDet person detector, say) and records that (run.json's
detector record: `"kind": "rtmdet"`; no kind is YOLOX, as every run made before this module
recorded). rtmlib's `Hand` then poses every box the detector kept (runner.WholebodyModels,
`every_box`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

YOLOX, RTMDET = "yolox", "rtmdet"
KIND_NAMES = (YOLOX, RTMDET)  # --detector-kind's choices
HAND_SOLUTION = "Hand"  # the rtmlib solution whose detector is RTMDet


@dataclass(frozen=True)
class DetectorKind:
    """How one of rtmlib's detectors reads its model: the input's normalisation (None: raw
    pixels), a raw output's score cut and NMS IoU, and the classes it keeps (None: every class)."""

    name: str
    mean: tuple[float, float, float] | None
    std: tuple[float, float, float] | None
    raw_score: float
    raw_nms: float
    classes: tuple[int, ...] | None

    def model_input(self, canvases: np.ndarray) -> np.ndarray:
        """Letterboxed uint8 canvases [N, H, W, 3] -> the model's float32 input [N, 3, H, W]."""
        x = canvases if self.mean is None else (canvases - np.array(self.mean)) / np.array(self.std)
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2), np.float32)

    def keeps(self, cls: int) -> bool:
        return self.classes is None or cls in self.classes


RTMDET_KIND = DetectorKind(RTMDET, (103.53, 116.28, 123.675), (57.375, 57.12, 58.395), 0.3, 0.45,
                           (0,))


def kind_for(solution: str, asked: str | None = None) -> str:
    """The detector kind asked (--detector-kind), else the one rtmlib's solution of a layout
    runs: RTMDet for `Hand`, YOLOX otherwise."""
    if asked is not None:
        return asked
    return RTMDET if solution == HAND_SOLUTION else YOLOX


def kind_of(record: dict[str, Any] | None) -> str:
    """A recorded detector's kind (a record without one: YOLOX, as every run before RTMDet)."""
    return (record or {}).get("kind", YOLOX)


def kind_words(record: dict[str, Any] | None) -> str:
    """' (read as RTMDet, as rtmlib's Hand)' after a recorded RTMDet detector's name, '' for
    YOLOX (said at start and by status)."""
    return " (read as RTMDet, as rtmlib's Hand)" if kind_of(record) == RTMDET else ""
