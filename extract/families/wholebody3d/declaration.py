"""What the 3D whole-body family's points are: COCO-WholeBody's 133 points in rtmlib's order, each
with the 2D point in frame pixels, rtmlib's 3D point and its score; the table's schema and what
keypoints.parquet records of them. Data only: the runner and every output read it.

The values are what rtmlib 0.0.16's RTMPose3d returns for the signer's box (its `keypoints_2d`,
`keypoints` and `scores`), in one list per frame so that every output (tensors, show, report,
diff, extract_keypoints) reads them as it reads any family's: x, y first (frame pixels, what a
drawing needs), the score last (what the presence rule reads).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from phoenix_keypoints.extract.families.wholebody.declaration import (
    BATCH_INPUT,
    COLOURS,
    LEGEND,
    LIMBS,
    SCORE_THRESHOLD,
    WHOLEBODY_NAMES,
    WHOLEBODY_PARTS,
    WHOLEBODY_POINTS,
)
from phoenix_keypoints.extract.keypoints.estimator import Declaration, ReportSpec
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS

WHOLEBODY3D = "wholebody3d"
WHOLEBODY3D_CHANNELS = ("x", "y", "x3d", "y3d", "z3d", "score")
# rtmlib's RTMPose3d default (z_range=None): the SimCC z bins span [-Z_RANGE, Z_RANGE]
Z_RANGE = 2.1744869
UNITS = ("x, y: the 2D point, pixels of the frame (origin top left), rtmlib's keypoints_2d; "
         "x3d, y3d: rtmlib's 3D point, pixels of the pose model's input (the signer's box warped "
         "to its W x H, origin its top left); z3d: rtmlib's depth, (z bin / 2 / (H / 2) - 1) x "
         f"{Z_RANGE} (0: the middle of the model's z range; the model's own relative depth, no "
         "unit of length); score: the smaller of the SimCC x and y maxima")

WHOLEBODY3D_SCHEMA = pa.schema(
    [*BASE_FIELDS, pa.field(WHOLEBODY3D, pa.list_(pa.float32())),
     # boxes the detector kept on the frame (the signer is the largest), as the whole-body family
     pa.field("persons", pa.int32())])

DECLARATION = Declaration(
    name=WHOLEBODY3D, parts={WHOLEBODY3D: (WHOLEBODY_POINTS, len(WHOLEBODY3D_CHANNELS))},
    counts=("persons",), values=WHOLEBODY3D_CHANNELS, schema=WHOLEBODY3D_SCHEMA,
    title="COCO-WholeBody 133 points in 3D (RTMW3D)",
    score_threshold=SCORE_THRESHOLD,
    regions={"body": (WHOLEBODY3D, 0, 23), "face": (WHOLEBODY3D, *WHOLEBODY_PARTS["face"]),
             "left_hand": (WHOLEBODY3D, *WHOLEBODY_PARTS["left_hand"]),
             "right_hand": (WHOLEBODY3D, *WHOLEBODY_PARTS["right_hand"])},
    exports=("pose",), units=UNITS, presence_note="rtmlib's cut", names=WHOLEBODY_NAMES,
    subparts=WHOLEBODY_PARTS, batches=True, batch_input=BATCH_INPUT, skeleton=LIMBS,
    colours=COLOURS,
    legend=LEGEND,
    report=ReportSpec(
        "3D whole-body keypoints",
        f"A region is found on a frame when at least half its points score {SCORE_THRESHOLD} or "
        "more. Persons: boxes the detector kept (the signer is the largest). z3d_std: the spread "
        "of rtmlib's depth over found points.",
        counts=(("frames_multi_person", "persons", ">", 1), ("frames_no_person", "persons", "==", 0)),
        flag_counts=("frames_multi_person",), flag_lost=("left_hand", "right_hand")))


def file_record(settings: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """What keypoints.parquet's metadata says of a 3D whole-body file: the estimator, its model
    files (the pose model's head), the point order, channels and units."""
    return {
        "estimator": WHOLEBODY3D,
        WHOLEBODY3D: {k: v for k, v in (settings or {}).items() if k != "estimator"},
        "layout": {WHOLEBODY3D: {
            "points": WHOLEBODY_POINTS, "values": list(WHOLEBODY3D_CHANNELS),
            "width": WHOLEBODY_POINTS * len(WHOLEBODY3D_CHANNELS), "coordinates": UNITS,
            "head": "SimCC x, y, z (RTMW3D: rtmlib's RTMPose3d), split ratio 2",
            "z_range": Z_RANGE, "order": "COCO-WholeBody",
            "parts": {p: list(r) for p, r in WHOLEBODY_PARTS.items()},
            "names": list(WHOLEBODY_NAMES)}},
        "persons": "boxes the detector kept on the frame; the signer is the largest (0: none, the "
                   "pose model ran on the whole frame)",
        "score_threshold": SCORE_THRESHOLD,
    }
