"""What the yolopose family writes, as data: the signer's COCO-17 points in one landmark column
(the person with the largest box: decode.py's rule), every person's points in a list column
declared as `people` (so `.pose` holds them all), each person's box in another list column, and
the number of persons a frame. The hooks that hand it to the tool are in __init__.py."""

from __future__ import annotations

import pyarrow as pa

from phoenix_keypoints.extract.keypoints.estimator import Declaration
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS

NAME = "yolopose"  # --estimator NAME, the signer's landmark column, settings' `estimator`
PEOPLE = "people"  # every person's 17 x (x, y, score): the signer first, then by score
BOXES = "boxes"  # every person's box (x1, y1, x2, y2, score), in the same order
PERSONS = "persons"  # the count column: persons found in the frame
# COCO's 17 keypoints, in order (as YOLO-pose models answer them)
NAMES = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
         "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
         "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")
# COCO's skeleton, numbered from 0 (point pairs in the column)
LIMBS = ((15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
         (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6))
SCORE_THRESHOLD = 0.5  # a point whose visibility score is under this is absent (as YOLO draws)
SCHEMA = pa.schema([*BASE_FIELDS, pa.field(NAME, pa.list_(pa.float32())),
                    pa.field(PEOPLE, pa.list_(pa.float32())),
                    pa.field(BOXES, pa.list_(pa.float32())), pa.field(PERSONS, pa.int32())])

DECLARATION = Declaration(
    name=NAME,
    parts={NAME: (len(NAMES), 3)},
    counts=(PERSONS,),
    values=("x", "y", "score"),
    schema=SCHEMA,
    title="YOLO-pose COCO-17 points",
    score_threshold=SCORE_THRESHOLD,
    regions={"body": (NAME, 0, len(NAMES))},
    skeleton={"body": LIMBS},
    colours={"body": (255, 140, 0)},
    exports=("pose",),
    error_status="yolopose_error",
    units="x, y: pixels of the frame (origin top left); score: the model's visibility, 0..1",
    presence_note="the visibility YOLO-pose's own drawing uses",
    names=NAMES,
    subparts={"body": (0, len(NAMES))},
    lists={PEOPLE: len(NAMES) * 3, BOXES: 5},
    people={PEOPLE: NAME},  # every person as the signer's points: .pose writes them all
)
