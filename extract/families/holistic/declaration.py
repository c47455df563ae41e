"""What the Holistic family's points are: MediaPipe Holistic's pose (33 x, y, z, visibility), face
(468 or, refined, 478 x, y, z), hands (21 x, y, z each) and pose_world, in normalised image
coordinates; a part is found where its landmark list exists. Data only."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from phoenix_keypoints.extract.families.holistic.points import (
    FACE_CONTOUR_EDGES,
    FACE_POINTS_REFINED,
    HAND_EDGES,
    PARTS,
    POSE_EDGES,
    WORLD_PARTS,
    layout,
    point_names,
    point_table,
)
from phoenix_keypoints.extract.keypoints.estimator import Declaration, QualitySpec
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS, BASE_OPTIONAL

HOLISTIC = "holistic"
VALUES = {3: ["x", "y", "z"], 4: ["x", "y", "z", "visibility"]}
EXPORTS = ("pkl", "pose", "islr", "legacy-pkl", "legacy-npz")
# Columns files of earlier versions lack (time_s: before video input; pose_world: before schema 2);
# readers treat them as absent, not damage, and a merge fills them with nulls.
OPTIONAL_COLUMNS: tuple[str, ...] = (*BASE_OPTIONAL, *WORLD_PARTS)
SCHEMA = pa.schema(BASE_FIELDS + [pa.field(name, pa.list_(pa.float32()))
                                  for name in (*PARTS, *WORLD_PARTS)])
# The schema of files written before time_s and pose_world existed (still read: OPTIONAL_COLUMNS).
EARLIEST_SCHEMA = pa.schema([f for f in SCHEMA if f.name not in OPTIONAL_COLUMNS])


def is_earlier_schema(schema: pa.Schema) -> bool:
    """This version's schema, or one that lacks only some OPTIONAL_COLUMNS (an earlier version's)."""
    missing = set(SCHEMA.names) - set(schema.names)
    return missing <= set(OPTIONAL_COLUMNS) and schema.equals(
        pa.schema([f for f in SCHEMA if f.name not in missing]))


# What the quality report reads: pose 0-12 (head and shoulders; the model rightly guesses arms and
# hips below the crop), shoulders 11 and 12, MediaPipe's own cut-off for drawing a pose point
# (visibility, its 4th value, >= 0.5), the wrist (hand point 0); show draws the face's contours
# thin and a dot on each hand point.
QUALITY = QualitySpec(engine="MediaPipe", head=13, shoulders=(11, 12), visibility=3, visible=0.5,
                      wrist=0, thin=("face",), dotted=("left_hand", "right_hand"))
# RGB, drawn in this order (hands on top); chosen to stay apart from each other and from PHOENIX's
# grey-blue background.
COLOURS = {"face": (0, 220, 255), "body": (255, 210, 0), "left_hand": (40, 230, 40),
           "right_hand": (255, 60, 170)}
LEGEND = {"body": "pose", "left_hand": "L hand", "right_hand": "R hand"}


def declaration(settings: dict[str, Any] | None = None) -> Declaration:
    """Holistic's declaration: its settings are its options dict (refine_face_landmarks: 478)."""
    refined = bool((settings or {}).get("refine_face_landmarks"))
    parts = layout(refined)
    return Declaration(
        name=HOLISTIC, parts=parts, schema=SCHEMA, optional=OPTIONAL_COLUMNS,
        title="MediaPipe Holistic's points",
        regions={"body": ("pose", 0, parts["pose"][0]), "face": ("face", 0, parts["face"][0]),
                 "left_hand": ("left_hand", 0, 21), "right_hand": ("right_hand", 0, 21)},
        skeleton={"body": POSE_EDGES, "face": FACE_CONTOUR_EDGES, "left_hand": HAND_EDGES,
                  "right_hand": HAND_EDGES},
        colours=COLOURS, legend=LEGEND, quality=QUALITY,
        exports=EXPORTS, error_status="mediapipe_error", points=point_table(refined))


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    return declaration(None) if is_earlier_schema(schema) else None


def layout_record(parts: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """keypoints.parquet's `layout`, `face_points` and `iris_points` for these columns."""
    return {
        "layout": {p: {"points": n, "values": VALUES[c], "width": n * c,
                       "coordinates": ("metres around the hip midpoint" if p == "pose_world"
                                       else "x, y normalised by image width and height"),
                       "names": point_names(p, n)}
                   for p, (n, c) in parts.items()},
        "face_points": parts["face"][0],
        "iris_points": parts["face"][0] == FACE_POINTS_REFINED,
    }
