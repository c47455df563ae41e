"""What the whole-body family's points are: COCO-WholeBody's 133 points in rtmlib's order, their
names, units, the presence rule, the table's schema and what keypoints.parquet records of them.
Data only: every other module of the family, and every output through the registry, reads it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from phoenix_keypoints.extract.keypoints.estimator import Declaration, ReportSpec
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS

WHOLEBODY = "wholebody"
WHOLEBODY_POINTS = 133
# COCO-WholeBody's point order (what rtmlib's models and pose-format's header use).
WHOLEBODY_PARTS: dict[str, tuple[int, int]] = {
    "body": (0, 17), "feet": (17, 23), "face": (23, 91), "left_hand": (91, 112),
    "right_hand": (112, 133),
}
_BODY = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
         "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip",
         "left_knee", "right_knee", "left_ankle", "right_ankle")
_FEET = ("left_big_toe", "left_small_toe", "left_heel", "right_big_toe", "right_small_toe",
         "right_heel")
# The 133 names in point order, as pose-format's COCO-WholeBody header spells them (hands: the
# part says the side; 21 points each, wrist first, in MediaPipe's hand order).
WHOLEBODY_NAMES: tuple[str, ...] = (
    _BODY + _FEET + tuple(f"face-{i}" for i in range(68)) + tuple(f"hand_{i}" for i in range(21)) * 2)
# A whole-body point counts as found (tensor mask, report presence) at or above this score:
# rtmlib's own drawing and Wholebody.format_result keep points from 0.3.
SCORE_THRESHOLD = 0.3
UNITS = ("x, y: pixels of the frame (origin top left), as rtmlib returns them; score: the pose "
         "model's SimCC confidence")

WHOLEBODY_SCHEMA = pa.schema(
    [*BASE_FIELDS, pa.field(WHOLEBODY, pa.list_(pa.float32())),
     # boxes the detector kept on the frame (the signer is the largest): 0 on a frame it found
     # nobody on (the pose model then ran on the whole frame), null where no frame was read
     pa.field("persons", pa.int32())])

# what `show` draws: COCO-WholeBody's limbs (body with the feet, each hand: wrist, then 4 a finger)
COLOURS = {"face": (0, 220, 255), "body": (255, 210, 0), "left_hand": (40, 230, 40),
           "right_hand": (255, 60, 170)}  # in drawing order: hands on top
_BODY_LIMBS = ((15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
               (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
               (15, 17), (15, 18), (15, 19), (16, 20), (16, 21), (16, 22))
_HAND_LIMBS = tuple((0 if j % 4 == 1 else j - 1, j) for j in range(1, 21))
LIMBS = {"body": _BODY_LIMBS, "left_hand": tuple((91 + a, 91 + b) for a, b in _HAND_LIMBS),
         "right_hand": tuple((112 + a, 112 + b) for a, b in _HAND_LIMBS), "face": ()}

DECLARATION = Declaration(
    WHOLEBODY, {WHOLEBODY: (WHOLEBODY_POINTS, 3)}, ("persons",), ("x", "y", "score"),
    WHOLEBODY_SCHEMA, title="COCO-WholeBody 133 points", score_threshold=SCORE_THRESHOLD,
    regions={"body": (WHOLEBODY, 0, 23), "face": (WHOLEBODY, *WHOLEBODY_PARTS["face"]),
             "left_hand": (WHOLEBODY, *WHOLEBODY_PARTS["left_hand"]),
             "right_hand": (WHOLEBODY, *WHOLEBODY_PARTS["right_hand"])},
    exports=("pose", "twostream-pkl", "unisign-pkl"), units=UNITS, presence_note="rtmlib's cut",
    names=WHOLEBODY_NAMES, subparts=WHOLEBODY_PARTS, batches=True, skeleton=LIMBS,
    colours=COLOURS, legend={"body": "pose"},
    report=ReportSpec(
        "Whole-body keypoints",
        f"A part is found on a frame when at least half its points score {SCORE_THRESHOLD} or "
        "more. Persons: boxes the detector kept (the signer is the largest).",
        counts=(("frames_multi_person", "persons", ">", 1), ("frames_no_person", "persons", "==", 0)),
        flag_counts=("frames_multi_person",), flag_lost=("left_hand", "right_hand")))



def file_record(settings: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """What keypoints.parquet's metadata says of a whole-body file: the estimator, its model
    files, the point order and units."""
    return {
        "estimator": WHOLEBODY,
        "wholebody": {k: v for k, v in (settings or {}).items() if k != "estimator"},
        "layout": {WHOLEBODY: {
            "points": WHOLEBODY_POINTS, "values": ["x", "y", "score"], "width": WHOLEBODY_POINTS * 3,
            "coordinates": "x, y in pixels of the frame (origin top left), as rtmlib returns them; "
                           "score: the pose model's SimCC confidence",
            "order": "COCO-WholeBody",
            "parts": {p: list(r) for p, r in WHOLEBODY_PARTS.items()},
            "names": list(WHOLEBODY_NAMES)}},
        "persons": "boxes the detector kept on the frame; the signer is the largest (0: none, the "
                   "pose model ran on the whole frame)",
        "score_threshold": SCORE_THRESHOLD,
    }
