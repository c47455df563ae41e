"""Which of the 543 Holistic points a tensor keeps: named presets, explicit lists, point names.

Indices are global positions in the [543] layout of keypoints.parquet's parts in order: pose 0-32,
face 33-500, left hand 501-521, right hand 522-542 (see extract.keypoints.schema.OFFSETS). A run
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

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from phoenix_keypoints.extract.keypoints.schema import FACE_POINTS_REFINED, PARTS

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


def point_layout(refined: bool = False) -> dict[str, tuple[int, int]]:
    """part -> (first global index, points) of the tensor numbering of a run with or without
    refine_face_landmarks (478 face points, not 468)."""
    out, o = {}, 0
    for part, (n, _) in PARTS.items():
        n = FACE_POINTS_REFINED if refined and part == "face" else n
        out[part] = (o, n)
        o += n
    return out


def num_points(refined: bool = False) -> int:
    """543, or 553 on a refined run."""
    return sum(n for _, n in point_layout(refined).values())


def _part(part: str, local: tuple[int, ...] | range, refined: bool = False) -> list[int]:
    o = point_layout(refined)[part][0]
    return [o + i for i in local]


def _hands(refined: bool = False) -> list[int]:
    return _part("left_hand", range(21), refined) + _part("right_hand", range(21), refined)


def presets(refined: bool = False) -> dict[str, tuple[int, ...]]:
    """The presets in a run's numbering. Only the full set changes in what it holds (the iris on a
    refined run); the others pick mesh points below 468, the same values either way."""
    full = f"holistic-{num_points(refined)}"
    return {
        full: tuple(range(num_points(refined))),
        "compact-187": tuple(_part("pose", UPPER_BODY, refined)
                             + _part("face", sorted(i for r in FACE_CONTOURS.values() for i in r),
                                     refined)
                             + _hands(refined)),
        "hands-body-59": tuple(_part("pose", UPPER_BODY, refined) + _hands(refined)),
        "legacy-143": tuple(_part("face", LEGACY_FACE, refined) + _hands(refined)
                            + _part("pose", range(33), refined)),
    }


PRESETS = presets()
DEFAULT_PRESET = "holistic-543"
FULL_PRESETS = ("holistic-543", "holistic-553")  # everything: the default set, in tensors/ itself
_NO_IRIS = ("the run was made without --refine-face-landmarks, so its face has 468 points and no "
            "iris (468-477); run again with --refine-face-landmarks into a new --out to get them")


class PointsError(ValueError):
    """A --points list that cannot be read; the message says which item and why."""


def part_of(index: int, refined: bool = False) -> tuple[str, int]:
    """Global index -> (part, index within the part)."""
    for part, (o, n) in point_layout(refined).items():
        if o <= index < o + n:
            return part, index - o
    raise PointsError(f"point {index} is outside 0-{num_points(refined) - 1}")


def point_name(index: int, refined: bool = False) -> str:
    """A readable, stable name: pose.LEFT_SHOULDER, face.61, face.iris.470, left_hand.WRIST."""
    part, i = part_of(index, refined)
    if part == "pose":
        return f"pose.{POSE_NAMES[i]}"
    if part == "face":
        return f"face.iris.{i}" if i >= PARTS["face"][0] else f"face.{i}"
    return f"{part}.{HAND_NAMES[i]}"


_ITEM = re.compile(r"^(?:(?P<part>[a-z_]+)(?::(?P<range>.+))?|(?P<glob>[0-9]+(?:-[0-9]+)?))$")


def _number(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes `²` and `٣`, which int() refuses or reads."""
    return text.isascii() and text.isdigit()


def _span(text: str, limit: int, where: str, refined_limit: int | None = None) -> list[int]:
    """refined_limit: the bound on a refined run, for the message when an unrefined one is asked
    for more (the iris)."""
    a, _, b = text.partition("-")
    if not _number(a) or (b and not _number(b)):
        raise PointsError(f"{where}: '{text}' is not N or N-M")
    lo, hi = int(a), int(b) if b else int(a)
    if lo > hi or hi >= limit:
        if lo <= hi and refined_limit is not None and hi < refined_limit:
            raise PointsError(f"{where}: '{text}' needs a refined face (553 points, face:468-477 "
                              f"the iris), but {_NO_IRIS}")
        raise PointsError(f"{where}: '{text}' is not within 0-{limit - 1}")
    return list(range(lo, hi + 1))


def parse_points(spec: str, refined: bool = False) -> tuple[int, ...]:
    """'11-16,501-542' (global) or 'pose:11-16,left_hand,right_hand,face:0-10' -> global indices
    in the run's numbering (`refined`: 553 points, face:468-477 the iris).

    Order is kept as written (it is the tensor's point order); a point listed twice is refused.
    """
    parts = point_layout(refined)
    more = None if refined else point_layout(True)
    out: list[int] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        m = _ITEM.match(item)
        if m is None:
            raise PointsError(f"--points item '{item}': use N, N-M, PART or PART:N-M")
        where = f"--points item '{item}'"
        if m["glob"]:
            out += _span(m["glob"], num_points(refined), where, more and num_points(True))
            continue
        part = m["part"]
        if part not in parts:
            raise PointsError(f"{where}: part must be one of {', '.join(parts)}")
        o, n = parts[part]
        local = range(n) if m["range"] is None else _span(m["range"], n, where,
                                                          more and more[part][1])
        out += [o + i for i in local]
    if not out:
        raise PointsError("--points is empty")
    dup = sorted(i for i, n in Counter(out).items() if n > 1)
    if dup:
        raise PointsError(f"--points lists point(s) {dup[:10]} more than once")
    return tuple(out)


@dataclass(frozen=True)
class PointSet:
    """The points of one tensor set: where they come from (preset or list) and their indices, in
    the numbering of a run with or without a refined face (`refined`: 553 points, not 543)."""

    name: str
    indices: tuple[int, ...]
    refined: bool = False
    spec: str | None = None  # the --points text, read again by for_run for the run's numbering

    @classmethod
    def preset(cls, name: str, refined: bool = False) -> PointSet:
        if name in FULL_PRESETS:  # everything the run has: the iris too when refined
            if name == FULL_PRESETS[1] and not refined:
                raise PointsError(f"preset '{name}' holds the iris points, but {_NO_IRIS}")
            name = FULL_PRESETS[refined]
        table = presets(refined)
        if name not in table:
            raise PointsError(f"unknown preset '{name}'; choose one of {', '.join(PRESETS)}")
        return cls(name, table[name], refined)

    @classmethod
    def from_list(cls, spec: str, refined: bool = False) -> PointSet:
        idx = parse_points(spec, refined)
        digest = hashlib.sha1(",".join(map(str, idx)).encode()).hexdigest()[:8]
        return cls(f"points-{len(idx)}-{digest}", idx, refined, spec)

    def for_run(self, refined: bool) -> PointSet:
        """The same choice in the numbering of a run with (or without) a refined face; raises
        PointsError when it asks for iris points an unrefined run does not have."""
        if refined == self.refined:
            return self
        if self.spec is not None:
            return PointSet.from_list(self.spec, refined)
        return PointSet.preset(self.name, refined)

    @property
    def array(self) -> np.ndarray:
        return np.asarray(self.indices, np.int64)

    def describe(self) -> list[dict[str, object]]:
        """One entry per tensor point: its global index, part, index in the part, and name."""
        out: list[dict[str, object]] = []
        for k, g in enumerate(self.indices):
            part, i = part_of(g, self.refined)
            out.append({"k": k, "index": g, "part": part, "part_index": i,
                        "name": point_name(g, self.refined)})
        return out
