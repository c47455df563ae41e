"""What the Holistic family's points are: MediaPipe Holistic's pose (33 x, y, z, visibility), face
(468 or, refined, 478 x, y, z), hands (21 x, y, z each) and pose_world, in normalised image
coordinates; a part is found where its landmark list exists. Data only."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from phoenix_keypoints.extract.keypoints.estimator import Declaration, QualitySpec
from phoenix_keypoints.extract.keypoints.points import (
    FACE_CONTOUR_EDGES,
    HAND_EDGES,
    HAND_NAMES,
    POSE_EDGES,
    POSE_NAMES,
)
from phoenix_keypoints.extract.keypoints.schema import FACE_POINTS_REFINED, is_earlier_schema, layout

HOLISTIC = "holistic"
VALUES = {3: ["x", "y", "z"], 4: ["x", "y", "z", "visibility"]}
EXPORTS = ("pkl", "pose", "islr", "legacy-pkl", "legacy-npz")
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
    parts = layout(bool((settings or {}).get("refine_face_landmarks")))
    return Declaration(
        HOLISTIC, parts, title="MediaPipe Holistic's points",
        regions={"body": ("pose", 0, parts["pose"][0]), "face": ("face", 0, parts["face"][0]),
                 "left_hand": ("left_hand", 0, 21), "right_hand": ("right_hand", 0, 21)},
        skeleton={"body": POSE_EDGES, "face": FACE_CONTOUR_EDGES, "left_hand": HAND_EDGES,
                  "right_hand": HAND_EDGES},
        colours=COLOURS, legend=LEGEND, quality=QUALITY,
        exports=EXPORTS, error_status="mediapipe_error", tensor_presets=True)


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    return declaration(None) if is_earlier_schema(schema) else None


def point_names(part: str, points: int) -> list[str]:
    """Names of a part's points in column order (face: mesh indices; 468-477 are the iris)."""
    if part in ("pose", "pose_world"):
        return list(POSE_NAMES)
    if part in ("left_hand", "right_hand"):
        return list(HAND_NAMES)
    return [f"iris.{i}" if i >= 468 else str(i) for i in range(points)]


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
