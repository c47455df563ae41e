"""Who is posed on a frame, and what its row keeps of them: the cap on the boxes posed
(`--max-persons`), each frame's result (the signer, every person posed, their boxes), and the two
hands of a hand run (HANDS_LAYOUT) chosen by geometry.

The cap. A detector may keep any number of boxes (one answering 20,000 at score 0.9 is a file
anyone can write); rtmlib poses every one where its solution poses every box (`Hand`, and
PoseTracker's persons), so nothing bounded a frame's cost. At most `max_persons` boxes are posed
a frame: the largest by area, the first of equal ones first (so the signer, the largest box, is
always among them), in the detector's own order. `persons` still counts every box the detector
kept, and the row's note says how many were not posed. The default, MAX_PERSONS = 100, is the
most boxes mmdeploy's object-detection configs let an end2end export answer (`keep_top_k`;
rtmlib's detectors are mmdeploy exports): far above a signer's frame, which holds two hands or a
few people.

The two hands. A hand run poses every box (rtmlib's `Hand`) and keeps every hand in `hands`, in
the detector's order, each box in `hand_boxes`. The signer's two are the two largest boxes (the
first of equal ones); with the camera facing the signer, the one whose box centre lies further
left in the image is the signer's right hand (`right_hand21`), the other the left (equal centres:
the first in the detector's order is the right). A hand alone is the right hand where its box
centre lies in the image's left half, else the left. A frame without a box has neither: rtmlib
poses the whole frame then, and that one pose is `hands`' only item, its box the frame's, its
score NaN (no detector scored it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_PERSONS = 100  # --max-persons' default: mmdeploy's keep_top_k (docstring above)


def areas(boxes: np.ndarray) -> np.ndarray:
    """Each box's area (x1, y1, x2, y2 first), in float64 as the signer's choice computes it."""
    return (boxes[:, 2].astype(np.float64) - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def capped(boxes: np.ndarray, cap: int) -> np.ndarray:
    """The indices of the boxes posed: the `cap` largest (the first of equal ones first), in the
    boxes' own order."""
    if len(boxes) <= cap:
        return np.arange(len(boxes))
    return np.sort(np.argsort(-areas(boxes), kind="stable")[:cap])


@dataclass(frozen=True)
class Posed:
    """One frame's keypoints: the signer's row (its largest box's person, [K * 3] float32),
    `persons` (the boxes the detector kept, or tracking followed), and where every box is posed
    each person's (xy, scores) in the boxes' order, with its box [M, 5] (x1, y1, x2, y2, the
    detector's score or NaN), the boxes the cap left out, the cap and the frame's width."""

    row: np.ndarray
    persons: int
    poses: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 5)))
    cut: int = 0
    cap: int = MAX_PERSONS
    width: int = 0

    @property
    def xys(self) -> list[np.ndarray]:
        """Every person's xy as decoded (what tracking follows to the next frame)."""
        return [xy for xy, _ in self.poses]

    def note(self) -> str | None:
        """The row's note where the cap left boxes out."""
        if not self.cut:
            return None
        return (f"{self.cut} of {self.persons} boxes not posed: more than --max-persons "
                f"{self.cap} (the {self.cap} largest were)")


def person_row(xy: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """One person's points as a column stores them: [K * 3] float32 (x, y, score)."""
    row = np.empty((len(xy), 3), np.float32)
    row[:, :2] = xy
    row[:, 2] = scores
    return row.reshape(-1)


def sides_of(posed: Posed) -> tuple[int | None, int | None]:
    """The indices (in posed.poses) of the signer's left and right hand, or None (docstring)."""
    if not posed.persons or not len(posed.boxes):
        return None, None
    two = np.argsort(-areas(posed.boxes), kind="stable")[:2]
    centre = (posed.boxes[:, 0].astype(np.float64) + posed.boxes[:, 2]) / 2
    if len(two) == 1:
        alone = int(two[0])
        return (None, alone) if centre[alone] < posed.width / 2 else (alone, None)
    right, left = sorted((int(j) for j in two), key=lambda j: (centre[j], j))
    return left, right


def hands_columns(posed: Posed, sides: tuple[str, str], lists: tuple[tuple[str, int], ...]
                  ) -> dict[str, Any]:
    """A hand run's columns of one frame: the signer's left and right hand (None: not found),
    every hand posed, and their boxes."""
    left, right = sides_of(posed)
    (hands, _), (boxes, _) = lists
    return {sides[0]: None if left is None else person_row(*posed.poses[left]),
            sides[1]: None if right is None else person_row(*posed.poses[right]),
            hands: np.concatenate([person_row(*p) for p in posed.poses]) if posed.poses
            else np.zeros(0, np.float32),
            boxes: np.asarray(posed.boxes, np.float32).reshape(-1)}
