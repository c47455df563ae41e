"""A detector's raw grid (YOLOX, RTMDet exported without NMS: one row per grid cell of strides 8,
16, 32), decoded and suppressed as rtmlib 0.0.16 does it (YOLOX/RTMDet.postprocess and
post_processings.multiclass_nms), with one bound rtmlib lacks: at most MAX_CANDIDATES boxes reach
the NMS.

Why the bound. Greedy NMS compares each kept box with every box left, so its cost grows with the
square of the candidates where they do not overlap. A grid has a row per cell (86,016 for a
2048x2048 input, 344,064 at the 4,096 a side a model's input may declare), and a file anyone can
write may score every cell 0.9 with boxes that never overlap: rtmlib then suppresses nothing in
minutes a frame (the tool took 135-188 s for 3 frames, issue 52). mmdeploy, which exports rtmlib's
detectors, keeps the `pre_top_k` best before its NMS; its object-detection configs set 5,000
(mmdeploy 0.x's configs/mmdet/_base_/base_static.py, mmyolo's deploy configs), and so does this
module: the MAX_CANDIDATES best
(box, class) pairs above the score cut, the higher score first, the earlier cell and class first
among equal ones, then the per-class NMS on them in the grid's order. A frame of more candidates
than that gives other boxes than rtmlib (which keeps them all); a frame of at most MAX_CANDIDATES
gives rtmlib's, bit for bit: the same arrays reach the same NMS. A published detector keeps a few
hundred at most above its cut (0.7 for YOLOX, 0.3 for RTMDet).

Pairs rather than mmdeploy's boxes (which it ranks by their best class): the NMS runs per class,
so the pairs are what it works on; for a one-class grid (rtmlib's person and hand detectors) the
two are the same. The decode itself is linear in the grid, and the caller runs it inside the
detector's bounded call (extract/keypoints/model_calls.py: its deadline and memory watch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MAX_CANDIDATES = 5000  # mmdeploy's pre_top_k (docstring)
STRIDES = (8, 16, 32)


def grid(hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Each grid cell's (x, y) and stride, in the model's output order."""
    cells, strides = [], []
    for s in STRIDES:
        gy, gx = np.mgrid[0:hw[0] // s, 0:hw[1] // s]
        cells.append(np.stack([gx.ravel(), gy.ravel()], 1))
        strides.append(np.full((gx.size, 1), s))
    return np.concatenate(cells), np.concatenate(strides)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """Greedy NMS, areas counted with +1 pixel as rtmlib counts them."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = scores.argsort()[::-1]
    keep = []
    while order.size:
        i, rest = order[0], order[1:]
        keep.append(int(i))
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + 1)
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + 1)
        inter = w * h
        order = rest[inter / (areas[i] + areas[rest] - inter) <= iou]
    return keep


def candidates(scores: np.ndarray, cut: float, classes: tuple[int, ...] | None,
               most: int = MAX_CANDIDATES) -> tuple[np.ndarray, np.ndarray]:
    """The (row, class) pairs scoring above `cut` in the classes kept (None: every class), in
    the grid's order (row, then class), at most `most` of them: the best (docstring)."""
    above = scores > cut
    if classes is not None:
        above[:, [c for c in range(scores.shape[1]) if c not in classes]] = False
    rows, cls = np.nonzero(above)
    if len(rows) > most:
        best = np.sort(np.argsort(-scores[rows, cls], kind="stable")[:most])
        rows, cls = rows[best], cls[best]
    return rows, cls


def decode(out: np.ndarray, hw: tuple[int, int], ratio: float, kind: Any) -> np.ndarray:
    """A raw grid [1, cells, 5 + classes] -> [N, 5] float64 (x1, y1, x2, y2 in frame pixels,
    score), per class (ascending) in NMS order, as rtmlib's detector of `kind` (rtmdet.py's
    DetectorKind: its score cut, IoU and classes) gives them."""
    cell, stride = grid(hw)
    pred = out[0].copy()
    pred[:, :2] = (pred[:, :2] + cell) * stride
    pred[:, 2:4] = np.exp(pred[:, 2:4]) * stride
    scores = pred[:, 4:5] * pred[:, 5:]
    half = pred[:, 2:4] / 2.0
    boxes = np.concatenate([pred[:, :2] - half, pred[:, :2] + half], axis=1) / ratio
    rows, cls = candidates(scores, kind.raw_score, kind.classes)
    kept = []
    for c in np.unique(cls):
        sel = rows[cls == c]
        b, score = boxes[sel], scores[sel, c]
        best = nms(b, score, kind.raw_nms)
        kept.append(np.hstack([b[best], score[best][:, None]]).astype(np.float64))
    return np.concatenate(kept) if kept else np.zeros((0, 5))
