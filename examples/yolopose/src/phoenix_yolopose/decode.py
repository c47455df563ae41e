"""A YOLO-pose model's input and answer, in numpy: the frame letterboxed into the model's input
(scaled to fit, centred, grey 114 around it, as Ultralytics' LetterBox pads), and the answer
[56, anchors] (per anchor: box centre x, y, width, height in input pixels, the person's score,
then 17 x (x, y, visibility)) decoded: anchors at or above the score threshold, greedy NMS on
their boxes, at most MAX_PERSONS, mapped back to the frame's pixels. The signer is the person
with the largest box (the first in score order among equal ones): sign-language video frames
one signer, nearest the camera."""

from __future__ import annotations

import cv2
import numpy as np

POINTS = 17
CHANNELS = 4 + 1 + 3 * POINTS  # the answer's rows: box, score, keypoints
STRIDES = (8, 16, 32)  # YOLO's three grids: anchors = sum of (H / s) x (W / s)
SCORE = 0.25  # a person counts from this score (Ultralytics' default confidence)
IOU = 0.7  # NMS drops a box overlapping a better one by more than this (Ultralytics' default)
MAX_PERSONS = 20  # persons kept a frame, the best first
PAD = 114  # the letterbox's grey


def anchors(height: int, width: int) -> int:
    """The answer's anchors for an input of height x width (8400 for 640 x 640)."""
    return sum((height // s) * (width // s) for s in STRIDES)


def letterbox(rgb: np.ndarray, height: int, width: int
              ) -> tuple[np.ndarray, float, tuple[int, int]]:
    """The model's input [1, 3, height, width] float32 in 0..1 of an RGB uint8 frame, the scale
    from frame to input pixels and the padding (left, top) before the frame."""
    h0, w0 = rgb.shape[:2]
    r = min(height / h0, width / w0)
    nw, nh = round(w0 * r), round(h0 * r)
    left, top = round((width - nw) / 2 - 0.1), round((height - nh) / 2 - 0.1)
    canvas = np.full((height, width, 3), PAD, np.uint8)
    canvas[top:top + nh, left:left + nw] = rgb if (nw, nh) == (w0, h0) else cv2.resize(
        rgb, (nw, nh), interpolation=cv2.INTER_LINEAR)
    return canvas.transpose(2, 0, 1)[None].astype(np.float32) / 255.0, r, (left, top)


def nms(boxes: np.ndarray, iou: float, most: int) -> list[int]:
    """Greedy NMS over boxes [n, 4] (x1, y1, x2, y2) already in score order: the indices kept."""
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    gone = np.zeros(len(boxes), bool)
    kept: list[int] = []
    for i in range(len(boxes)):
        if gone[i]:
            continue
        kept.append(i)
        if len(kept) == most:
            break
        rest = boxes[i + 1:]
        w = np.clip(np.minimum(boxes[i, 2], rest[:, 2]) - np.maximum(boxes[i, 0], rest[:, 0]), 0,
                    None)
        h = np.clip(np.minimum(boxes[i, 3], rest[:, 3]) - np.maximum(boxes[i, 1], rest[:, 1]), 0,
                    None)
        inter = w * h
        gone[i + 1:] |= inter > iou * (area[i] + area[i + 1:] - inter)
    return kept


def persons(answer: np.ndarray, scale: float, pad: tuple[int, int]
            ) -> tuple[np.ndarray, np.ndarray]:
    """One frame's answer [56, anchors] -> (every person [n, 17, 3], their boxes [n, 5]: x1, y1,
    x2, y2, score) in the frame's pixels, in score order (n at most MAX_PERSONS)."""
    scores = answer[4]
    found = np.flatnonzero(scores >= SCORE)
    order = found[np.argsort(-scores[found], kind="stable")]
    cx, cy, w, h = answer[:4, order]
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    kept = order[nms(boxes, IOU, MAX_PERSONS)] if len(order) else order
    left, top = pad
    points = answer[5:, kept].T.reshape(-1, POINTS, 3).copy()
    points[..., 0] = (points[..., 0] - left) / scale
    points[..., 1] = (points[..., 1] - top) / scale
    cx, cy, w, h = answer[:4, kept]
    box = np.stack([(cx - w / 2 - left) / scale, (cy - h / 2 - top) / scale,
                    (cx + w / 2 - left) / scale, (cy + h / 2 - top) / scale, scores[kept]], axis=1)
    return points.astype(np.float32), box.astype(np.float32)


def signer(boxes: np.ndarray) -> int | None:
    """The signer among a frame's persons: the largest box (None: nobody)."""
    if not len(boxes):
        return None
    return int(np.argmax((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])))
