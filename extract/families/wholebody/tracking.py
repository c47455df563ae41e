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
model ran on) is the largest, the first of equal ones; `persons` counts the boxes (a hand run
keeps every hand: persons.py). At most --max-persons boxes are posed a frame, the largest first
(persons.py), so at most that many are followed. With K = 1 every frame is detected and this is
the tool's output without tracking, exactly.

Batches: a frame's boxes come from the frame before, so within a video the pose model runs one
frame after the other; videos are independent, so several are advanced in lockstep (the
estimator's lanes, extract/keypoints/video_rows.py's extract_videos): frame t of every lane, all
persons of each, in pose-model calls of at most the batch size. The detector runs in one call on
the frames of every lane that will detect if the counts advance; a frame that detects out of that
order (after a stalled count) is detected in a call of its step. A model's answer for a frame or
crop does not depend on what else is in its batch, so the output is the frame-by-frame one
(tests/test_tracking.py).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import cv2
import numpy as np

from phoenix_keypoints.extract.families.wholebody.onnx_outputs import BadOutput

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
    """Each frame's Posed (persons.py) or BadOutput, frame after frame of one video, as
    PoseTracker(det_frequency=tracker.every) gives them (`models`: runner.WholebodyModels). A
    batch that raises leaves the state as it found it, so it can be run again frame by frame."""
    return track_lanes(models, [(tracker, rgbs)])[0]


def track_lanes(models: Any, lanes: list[tuple[Tracker, list[np.ndarray]]]) -> list[list[Any]]:
    """track_batch for several videos at once, each with its own tracker: frame t of every lane
    through the pose model in one call, the detector on every lane's frames due to detect in one.
    Lanes are independent, so each gets what it gets alone. A call that raises leaves every
    tracker as it found it."""
    saved = [replace(t, boxes=list(t.boxes), ids=list(t.ids)) for t, _ in lanes]
    try:
        return _track(models, lanes)
    except BaseException:
        for (tracker, _), was in zip(lanes, saved, strict=True):
            vars(tracker).update(vars(was))
        raise


def _track(models: Any, lanes: list[tuple[Tracker, list[np.ndarray]]]) -> list[list[Any]]:
    bgrs = [[cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR) for rgb in rgbs] for _, rgbs in lanes]
    planned = [(k, i) for k, (t, _) in enumerate(lanes) for i in range(len(bgrs[k])) if t.detects(i)]
    detected = _detect(models, bgrs, planned)
    out: list[list[Any]] = [[] for _ in lanes]
    for i in range(max(map(len, bgrs), default=0)):
        now = [k for k in range(len(lanes)) if i < len(bgrs[k])]
        due = [k for k in now if lanes[k][0].detects()]
        detected |= _detect(models, bgrs, [(k, i) for k in due if (k, i) not in detected])
        boxes = {k: detected[k, i] if k in due else list(lanes[k][0].boxes) for k in now}
        posed = [k for k in now if not isinstance(boxes[k], BadOutput)]
        done = dict(zip(posed, models.frames_on_boxes([bgrs[k][i] for k in posed],
                                                      [list(boxes[k]) for k in posed]),
                        strict=True)) if posed else {}
        for k in now:
            result = done.get(k, boxes[k])
            if isinstance(result, BadOutput):  # PoseTracker's early return: the state is as it was
                out[k].append(result)
                continue
            out[k].append(result)
            lanes[k][0].update(result.xys)
    return out


def _detect(models: Any, bgrs: list[list[np.ndarray]], which: list[tuple[int, int]]
            ) -> dict[tuple[int, int], Any]:
    """The detector's boxes (or BadOutput) for frames (lane, frame), all in one call. A frame due
    out of the planned order (after a count that stopped) is detected in a call of its step."""
    return dict(zip(which, models.detect([bgrs[k][i] for k, i in which]), strict=True)
                ) if which else {}
