"""rtmlib's video mode (`--det-every K`): rtmlib 0.0.16's `PoseTracker(solution, det_frequency=K)`
with its tracking rule, so a run gives the keypoints a user of PoseTracker gets.

What PoseTracker does (rtmlib/tools/solution/pose_tracker.py), and so what this module does:
- It counts frames from the start of a video; on a count divisible by K the detector's boxes are
  used, otherwise the boxes kept from the frame before. The pose model runs on each box (on the
  whole frame when there is none).
- Each person's box for the next frame is its points' box widened x1.25 about its centre
  (`pose_to_bbox`). Tracking keeps a person whose box overlaps one of the last frame's by IoU
  > 0.3 (the best, greedily, in order) or, unmatched, whose box covers >= 1000 pixels; the others
  are dropped, so they are not followed to the next frame.
- Its quirks are kept, since its users' keypoints have them: the persons are then reordered by
  indexing them with their track ids; where an id is past the persons' count that raises
  IndexError, which PoseTracker catches and returns early, so the frame count does not advance and
  the boxes kept are what matching left of the last frame's. A detector that fails returns early too
  (here: a frame whose detector answer is nonsense, `bad_detector_output`; a frame whose pose answer
  is nonsense, `bad_pose_output`, likewise leaves the state as it was).
- After such an early return the kept boxes can outnumber their ids; matching a box to one past
  the ids raises IndexError out of PoseTracker, ending its user's loop. There the tool does what
  that user would do to go on: it resets the tracker (the frame keeps its keypoints; the next
  frame detects), as rtmlib's `reset()` does at a new video.

The tool keeps one signer a frame, as without tracking: the person whose box (the one the pose
model ran on) is the largest, the first of equal ones; `persons` counts the boxes. With K = 1
every frame is detected and this is the tool's output without tracking, exactly.

Batches: a frame's boxes come from the frame before, so the pose model runs one frame after the
other (all persons of a frame in one call). The detector runs in one call on the frames of a batch
that will detect if the count advances; a frame that detects out of that order (after a stalled
count) is detected alone. A detector's answer does not depend on its batch, so the output is
the frame-by-frame one (tests/test_tracking.py).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import cv2
import numpy as np

from phoenix_keypoints.extract.keypoints.onnx_outputs import BadOutput

EXPANSION = 1.25  # pose_to_bbox
TRACKING_THR = 0.3  # PoseTracker(tracking_thr=0.3)
MIN_AREA = 1000  # PoseTracker.MIN_AREA: an unmatched box smaller than this is dropped


def pose_to_bbox(xy: np.ndarray) -> np.ndarray:
    """A person's next box: its points' box widened EXPANSION times about its centre (rtmlib's
    operations in rtmlib's order, so the same bits)."""
    x, y = xy[:, 0], xy[:, 1]
    box = np.array([x.min(), y.min(), x.max(), y.max()])
    centre = np.array([box[0] + box[2], box[1] + box[3]]) / 2
    return np.concatenate([centre - (centre - box[:2]) * EXPANSION,
                           centre + (box[2:] - centre) * EXPANSION])


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """rtmlib's compute_iou: areas without +1, an empty union counted as 1e-5."""
    inter = max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))
    union = float((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
    if union == 0:
        union = 1e-5
        warnings.warn("union_area=0 is unexpected", stacklevel=2)
    return inter / union


@dataclass
class Tracker:
    """PoseTracker's state for one video: frame count, next id, the boxes kept and their ids."""

    every: int
    count: int = 0
    next_id: int = 0
    boxes: list[np.ndarray] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)

    def reset(self) -> None:
        """A new video: PoseTracker.reset()."""
        self.count, self.next_id, self.boxes, self.ids = 0, 0, [], []

    def detects(self, ahead: int = 0) -> bool:
        """Whether the frame `ahead` frames on uses the detector (when the count advances)."""
        return (self.count + ahead) % self.every == 0

    def update(self, xys: list[np.ndarray]) -> None:
        """After the pose model ran on this frame's boxes: PoseTracker's tracking step."""
        if not self.ids:
            self.next_id = len(self.boxes)
            self.ids = list(range(self.next_id))
        boxes, ids = [], []
        for xy in xys:
            box = pose_to_bbox(xy)
            try:
                tid = self._match(box)
            except IndexError:  # PoseTracker raises here (more kept boxes than ids): start again
                self.reset()
                return
            if tid > -1:
                ids.append(tid)
                boxes.append(box)
        self.ids = ids
        if any(t >= len(xys) for t in ids):  # its reorder raised IndexError: an early return
            return
        self.boxes = boxes
        self.count += 1

    def _match(self, box: np.ndarray) -> int:
        """PoseTracker.track_by_iou: the best-overlapping kept box's id (taken from the kept
        ones), a new id for a large enough box, or -1."""
        best, index = -1.0, -1
        for i, kept in enumerate(self.boxes):
            score = iou(box, kept)
            if score > best:
                best, index = score, i
        if best > TRACKING_THR:
            self.boxes.pop(index)
            return self.ids.pop(index)
        if (box[2] - box[0]) * (box[3] - box[1]) >= MIN_AREA:
            self.next_id += 1
            return self.next_id - 1
        return -1


def track_batch(models: Any, tracker: Tracker, rgbs: list[np.ndarray]) -> list[Any]:
    """Each frame's (row, persons) or BadOutput, frame after frame of one video, as
    PoseTracker(det_frequency=tracker.every) gives them (`models`: runner.WholebodyModels). A
    batch that raises leaves the state as it found it, so it can be run again frame by frame."""
    saved = replace(tracker, boxes=list(tracker.boxes), ids=list(tracker.ids))
    try:
        return _track(models, tracker, rgbs)
    except BaseException:
        vars(tracker).update(vars(saved))
        raise


def _track(models: Any, tracker: Tracker, rgbs: list[np.ndarray]) -> list[Any]:
    bgrs = [cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR) for rgb in rgbs]
    planned = [i for i in range(len(bgrs)) if tracker.detects(i)]
    detected = dict(zip(planned, models.detect([bgrs[i] for i in planned]), strict=True)
                    ) if planned else {}
    out: list[Any] = []
    for i, bgr in enumerate(bgrs):
        if tracker.detects():
            found = detected[i] if i in detected else models.detect([bgr])[0]
            boxes = found if isinstance(found, BadOutput) else list(found)
        else:
            boxes = list(tracker.boxes)
        done = boxes if isinstance(boxes, BadOutput) else models.one_frame(bgr, boxes)
        if isinstance(done, BadOutput):  # PoseTracker's early return: the state is left as it is
            out.append(done)
            continue
        out.append(done[:2])
        tracker.update(done[2])
    return out
