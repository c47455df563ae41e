"""Holistic's points: MediaPipe's numbering and names, its parts and columns, and the presets of
its tensor sets (the `PointTable`s its declaration carries; extract/keypoints/points.py reads them).

Indices are global positions in the [543] layout of keypoints.parquet's parts in order: pose 0-32,
face 33-500, left hand 501-521, right hand 522-542 (OFFSETS). A run
made with refine_face_landmarks has 553: its face is 478 points (mesh 0-467, then iris 468-477) at
33-510, the left hand 511-531, the right hand 532-552; a set is read against its run's layout
(`refined`).

Presets (the README lists them in full):
- holistic-543: everything, the layout `run` writes (holistic-553 on a refined run: the iris too).
- compact-187: upper body (pose 0-16: head, shoulders, elbows, wrists), both hands (42), and the
  128 face-mesh points on MediaPipe's FACEMESH_CONTOURS (lips, eyes, eyebrows, face oval), the
  reduced face that pose-format's reduce_holistic and many sign-language models keep. The mouth
  and eyebrows carry non-manual signals (mouthings, questions); the other 340 mesh points mostly
  describe the skin surface between them.
- hands-body-59: pose 0-16 and both hands, for models that ignore the face mesh.
- legacy-143: the older pipeline's model input (../shared/docs/legacy-format.md): 68 face-mesh
  points (LEGACY_FACE, in its order), left hand 21, right hand 21, pose 33, in that order.
Pose 17-22 (pinky/index/thumb tips from the pose model) duplicate the hand models' 21 points more
coarsely, and pose 23-32 (hips, legs) lie at or below the bottom of PHOENIX's 210x260 frames, where
MediaPipe guesses rather than sees them; the compact presets drop both.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.points import PointTable
from phoenix_keypoints.extract.keypoints.schema import list_width

# name -> (points, values per point); order is the tensors' point order.
PARTS: dict[str, tuple[int, int]] = {
    "pose": (33, 4),
    "face": (468, 3),
    "left_hand": (21, 3),
    "right_hand": (21, 3),
}
# Recorded beside the image-space parts, not in the 543-point tensor layout: pose_world_landmarks,
# x, y, z in metres around the hip midpoint, and visibility.
WORLD_PARTS: dict[str, tuple[int, int]] = {"pose_world": (33, 4)}
FACE_POINTS_REFINED = 478  # refine_face_landmarks: the 468 mesh points, then 10 iris points


def layout(refine_face: bool = False) -> dict[str, tuple[int, int]]:
    """part -> (points, values) of every landmark column, as Holistic returns them with or without
    refine_face_landmarks (pose_world included)."""
    face = FACE_POINTS_REFINED if refine_face else PARTS["face"][0]
    return {p: ((face, c) if p == "face" else (n, c)) for p, (n, c) in (PARTS | WORLD_PARTS).items()}


def file_layout(keypoints: Path) -> dict[str, tuple[int, int]]:
    """The landmark columns a keypoints file holds and their point counts: a 478-point face when
    it was extracted with refine_face_landmarks, pose_world when the file records it."""
    pf = pq.ParquetFile(keypoints)
    refined = False
    for batch in pf.iter_batches(batch_size=4096, columns=["face"]):
        width = list_width(batch.column(0))
        if width is not None:
            refined = width == FACE_POINTS_REFINED * 3
            break
    return {p: nc for p, nc in layout(refined).items() if p in pf.schema_arrow.names}


# Where each part's points start in the [543, 3] tensor layout.
OFFSETS: dict[str, int] = {}
_o = 0
for _name, (_n, _) in PARTS.items():
    OFFSETS[_name] = _o
    _o += _n
del _o, _name, _n

# MediaPipe's landmark enums (mediapipe.python.solutions.pose.PoseLandmark / hands.HandLandmark),
# spelled out so naming points does not import mediapipe; a test checks they still agree.
POSE_NAMES = (
    "NOSE", "LEFT_EYE_INNER", "LEFT_EYE", "LEFT_EYE_OUTER", "RIGHT_EYE_INNER", "RIGHT_EYE",
    "RIGHT_EYE_OUTER", "LEFT_EAR", "RIGHT_EAR", "MOUTH_LEFT", "MOUTH_RIGHT", "LEFT_SHOULDER",
    "RIGHT_SHOULDER", "LEFT_ELBOW", "RIGHT_ELBOW", "LEFT_WRIST", "RIGHT_WRIST", "LEFT_PINKY",
    "RIGHT_PINKY", "LEFT_INDEX", "RIGHT_INDEX", "LEFT_THUMB", "RIGHT_THUMB", "LEFT_HIP",
    "RIGHT_HIP", "LEFT_KNEE", "RIGHT_KNEE", "LEFT_ANKLE", "RIGHT_ANKLE", "LEFT_HEEL", "RIGHT_HEEL",
    "LEFT_FOOT_INDEX", "RIGHT_FOOT_INDEX",
)
HAND_NAMES = (
    "WRIST", "THUMB_CMC", "THUMB_MCP", "THUMB_IP", "THUMB_TIP", "INDEX_FINGER_MCP",
    "INDEX_FINGER_PIP", "INDEX_FINGER_DIP", "INDEX_FINGER_TIP", "MIDDLE_FINGER_MCP",
    "MIDDLE_FINGER_PIP", "MIDDLE_FINGER_DIP", "MIDDLE_FINGER_TIP", "RING_FINGER_MCP",
    "RING_FINGER_PIP", "RING_FINGER_DIP", "RING_FINGER_TIP", "PINKY_MCP", "PINKY_PIP", "PINKY_DIP",
    "PINKY_TIP",
)

# Face-mesh indices of MediaPipe's FACEMESH_CONTOURS, by region (128 points; a test checks them).
FACE_CONTOURS: dict[str, tuple[int, ...]] = {
    "lips": (0, 13, 14, 17, 37, 39, 40, 61, 78, 80, 81, 82, 84, 87, 88, 91, 95, 146, 178, 181, 185,
             191, 267, 269, 270, 291, 308, 310, 311, 312, 314, 317, 318, 321, 324, 375, 402, 405,
             409, 415),
    "left_eye": (249, 263, 362, 373, 374, 380, 381, 382, 384, 385, 386, 387, 388, 390, 398, 466),
    "right_eye": (7, 33, 133, 144, 145, 153, 154, 155, 157, 158, 159, 160, 161, 163, 173, 246),
    "left_eyebrow": (276, 282, 283, 285, 293, 295, 296, 300, 334, 336),
    "right_eyebrow": (46, 52, 53, 55, 63, 65, 66, 70, 105, 107),
    "face_oval": (10, 21, 54, 58, 67, 93, 103, 109, 127, 132, 136, 148, 149, 150, 152, 162, 172, 176,
                  234, 251, 284, 288, 297, 323, 332, 338, 356, 361, 365, 377, 378, 379, 389, 397, 400,
                  454),
}
# The older pipeline's 68 face points (outline 17, right brow 5, left brow 5, nose 9, right eye 6,
# left eye 6, outer lips 12, inner lips 8), in its order: its models index them by position.
LEGACY_FACE = (
    10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400,
    107, 55, 65, 52, 53,
    336, 296, 334, 293, 300,
    19, 1, 2, 5, 4, 6, 98, 97, 94,
    33, 7, 163, 144, 145, 153,
    362, 382, 381, 380, 374, 373,
    61, 146, 91, 181, 84, 17, 314, 405, 320, 307, 375, 321,
    78, 95, 88, 178, 87, 14, 317, 402,
)
UPPER_BODY = tuple(range(17))  # pose 0-16: nose, eyes, ears, mouth, shoulders, elbows, wrists
SHOULDERS = (11, 12)  # pose LEFT_SHOULDER, RIGHT_SHOULDER

# The skeletons drawn on frames: MediaPipe's POSE_CONNECTIONS, HAND_CONNECTIONS and FACEMESH_CONTOURS
# (mediapipe.python.solutions.*_connections) as sorted local index pairs, spelled out so drawing works
# where mediapipe is not installed (Python 3.13); a test checks they still agree.
POSE_EDGES: tuple[tuple[int, int], ...] = (
    (0, 1), (0, 4), (1, 2), (2, 3), (3, 7), (4, 5), (5, 6), (6, 8), (9, 10), (11, 12), (11, 13),
    (11, 23), (12, 14), (12, 24), (13, 15), (14, 16), (15, 17), (15, 19), (15, 21), (16, 18), (16, 20),
    (16, 22), (17, 19), (18, 20), (23, 24), (23, 25), (24, 26), (25, 27), (26, 28), (27, 29), (27, 31),
    (28, 30), (28, 32), (29, 31), (30, 32)
)

HAND_EDGES: tuple[tuple[int, int], ...] = (
    (0, 1), (0, 5), (0, 17), (1, 2), (2, 3), (3, 4), (5, 6), (5, 9), (6, 7), (7, 8), (9, 10), (9, 13),
    (10, 11), (11, 12), (13, 14), (13, 17), (14, 15), (15, 16), (17, 18), (18, 19), (19, 20)
)

FACE_CONTOUR_EDGES: tuple[tuple[int, int], ...] = (
    (0, 267), (7, 163), (10, 338), (13, 312), (14, 317), (17, 314), (21, 54), (33, 7), (33, 246),
    (37, 0), (39, 37), (40, 39), (46, 53), (52, 65), (53, 52), (54, 103), (58, 132), (61, 146),
    (61, 185), (63, 105), (65, 55), (66, 107), (67, 109), (70, 63), (78, 95), (78, 191), (80, 81),
    (81, 82), (82, 13), (84, 17), (87, 14), (88, 178), (91, 181), (93, 234), (95, 88), (103, 67),
    (105, 66), (109, 10), (127, 162), (132, 93), (136, 172), (144, 145), (145, 153), (146, 91),
    (148, 176), (149, 150), (150, 136), (152, 148), (153, 154), (154, 155), (155, 133), (157, 173),
    (158, 157), (159, 158), (160, 159), (161, 160), (162, 21), (163, 144), (172, 58), (173, 133),
    (176, 149), (178, 87), (181, 84), (185, 40), (191, 80), (234, 127), (246, 161), (249, 390),
    (251, 389), (263, 249), (263, 466), (267, 269), (269, 270), (270, 409), (276, 283), (282, 295),
    (283, 282), (284, 251), (288, 397), (293, 334), (295, 285), (296, 336), (297, 332), (300, 293),
    (310, 415), (311, 310), (312, 311), (314, 405), (317, 402), (318, 324), (321, 375), (323, 361),
    (324, 308), (332, 284), (334, 296), (338, 297), (356, 454), (361, 288), (365, 379), (373, 374),
    (374, 380), (375, 291), (377, 152), (378, 400), (379, 378), (380, 381), (381, 382), (382, 362),
    (384, 398), (385, 384), (386, 385), (387, 386), (388, 387), (389, 356), (390, 373), (397, 365),
    (398, 362), (400, 377), (402, 318), (405, 321), (409, 291), (415, 308), (454, 323), (466, 388)
)


def num_points(refined: bool = False) -> int:
    """543, or 553 on a refined run."""
    return point_table(refined).num_points


def _part(part: str, local: tuple[int, ...] | range, refined: bool = False) -> list[int]:
    o = _tensor_parts(refined)[part][0]
    return [o + i for i in local]


def _tensor_parts(refined: bool) -> dict[str, tuple[int, int]]:
    """part -> (first global index, points), from the columns alone (the table needs presets)."""
    out, o = {}, 0
    for part, (n, _) in layout(refined).items():
        if part in PARTS:
            out[part], o = (o, n), o + n
    return out


def _hands(refined: bool = False) -> list[int]:
    return _part("left_hand", range(21), refined) + _part("right_hand", range(21), refined)


def presets(refined: bool = False) -> dict[str, tuple[int, ...]]:
    """The presets in a run's numbering. Only the full set changes in what it holds (the iris on a
    refined run); the others pick mesh points below 468, the same values either way."""
    n = sum(k for _, k in _tensor_parts(refined).values())
    return {
        FULL_PRESETS[refined]: tuple(range(n)),
        "compact-187": tuple(_part("pose", UPPER_BODY, refined)
                             + _part("face", sorted(i for r in FACE_CONTOURS.values() for i in r),
                                     refined)
                             + _hands(refined)),
        "hands-body-59": tuple(_part("pose", UPPER_BODY, refined) + _hands(refined)),
        "legacy-143": tuple(_part("face", LEGACY_FACE, refined) + _hands(refined)
                            + _part("pose", range(33), refined)),
    }


FULL_PRESETS = ("holistic-543", "holistic-553")  # everything: the default set, in tensors/ itself
PRESETS = presets()
_NO_IRIS = ("the run was made without --refine-face-landmarks, so its face has 468 points and no "
            "iris (468-477); run again with --refine-face-landmarks into a new --out to get them")


def point_names(part: str, points: int) -> list[str]:
    """Names of a part's points in column order (face: mesh indices; 468-477 are the iris)."""
    if part in ("pose", "pose_world"):
        return list(POSE_NAMES)
    if part in ("left_hand", "right_hand"):
        return list(HAND_NAMES)
    return [f"iris.{i}" if i >= 468 else str(i) for i in range(points)]


@cache
def point_table(refined: bool = False) -> PointTable:
    """The tensor numbering of a run with or without refine_face_landmarks (543 or 553 points)."""
    columns = layout(refined)
    parts = {p: nc for p, nc in columns.items() if p in PARTS}
    return PointTable(
        parts, columns, {p: tuple(point_names(p, n)) for p, (n, _) in parts.items()},
        presets(refined), FULL_PRESETS, ("pose", "pose_world"), ("pose", SHOULDERS),
        units="x, y: MediaPipe's normalised image coordinates (x / frame width, y / frame "
              "height); z: MediaPipe's relative depth, as in keypoints.parquet",
        world_units="x, y, z in metres around the hip midpoint (pose_world)",
        mask="True where MediaPipe detected the point; filled or missing points are False",
        meta={"face_points": columns["face"][0]},
        wider=None if refined else point_table(True),
        marker=("face_points", FACE_POINTS_REFINED) if refined else None,
        needs="a refined face (553 points, face:468-477 the iris)", holds="the iris points",
        lacks=_NO_IRIS, wider_run="a refined run")
