"""Which of the 543 Holistic points a tensor keeps: named presets, explicit lists, point names.

Indices are global positions in the [543] layout of keypoints.parquet's parts in order: pose 0-32,
face 33-500, left hand 501-521, right hand 522-542 (see extract.schema.OFFSETS).

Presets (the README lists them in full):
- holistic-543: everything, the layout `run` writes.
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

from extract.schema import NUM_POINTS, OFFSETS, PARTS

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


def _part(part: str, local: tuple[int, ...] | range) -> list[int]:
    return [OFFSETS[part] + i for i in local]


def _hands() -> list[int]:
    return _part("left_hand", range(21)) + _part("right_hand", range(21))


PRESETS: dict[str, tuple[int, ...]] = {
    "holistic-543": tuple(range(NUM_POINTS)),
    "compact-187": tuple(_part("pose", UPPER_BODY)
                         + _part("face", sorted(i for r in FACE_CONTOURS.values() for i in r))
                         + _hands()),
    "hands-body-59": tuple(_part("pose", UPPER_BODY) + _hands()),
    "legacy-143": tuple(_part("face", LEGACY_FACE) + _hands() + _part("pose", range(33))),
}
DEFAULT_PRESET = "holistic-543"


class PointsError(ValueError):
    """A --points list that cannot be read; the message says which item and why."""


def part_of(index: int) -> tuple[str, int]:
    """Global index -> (part, index within the part)."""
    for part, (n, _) in PARTS.items():
        o = OFFSETS[part]
        if o <= index < o + n:
            return part, index - o
    raise PointsError(f"point {index} is outside 0-{NUM_POINTS - 1}")


def point_name(index: int) -> str:
    """A readable, stable name: pose.LEFT_SHOULDER, face.61, left_hand.WRIST."""
    part, i = part_of(index)
    if part == "pose":
        return f"pose.{POSE_NAMES[i]}"
    if part == "face":
        return f"face.{i}"
    return f"{part}.{HAND_NAMES[i]}"


_ITEM = re.compile(r"^(?:(?P<part>[a-z_]+)(?::(?P<range>.+))?|(?P<glob>\d+(?:-\d+)?))$")


def _span(text: str, limit: int, where: str) -> list[int]:
    a, _, b = text.partition("-")
    if not a.isdigit() or (b and not b.isdigit()):
        raise PointsError(f"{where}: '{text}' is not N or N-M")
    lo, hi = int(a), int(b) if b else int(a)
    if lo > hi or hi >= limit:
        raise PointsError(f"{where}: '{text}' is not within 0-{limit - 1}")
    return list(range(lo, hi + 1))


def parse_points(spec: str) -> tuple[int, ...]:
    """'11-16,501-542' (global) or 'pose:11-16,left_hand,right_hand,face:0-10' -> global indices.

    Order is kept as written (it is the tensor's point order); a point listed twice is refused.
    """
    out: list[int] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        m = _ITEM.match(item)
        if m is None:
            raise PointsError(f"--points item '{item}': use N, N-M, PART or PART:N-M")
        if m["glob"]:
            out += _span(m["glob"], NUM_POINTS, f"--points item '{item}'")
            continue
        part = m["part"]
        if part not in PARTS:
            raise PointsError(f"--points item '{item}': part must be one of {', '.join(PARTS)}")
        n = PARTS[part][0]
        local = range(n) if m["range"] is None else _span(m["range"], n, f"--points item '{item}'")
        out += _part(part, tuple(local))
    if not out:
        raise PointsError("--points is empty")
    dup = sorted(i for i, n in Counter(out).items() if n > 1)
    if dup:
        raise PointsError(f"--points lists point(s) {dup[:10]} more than once")
    return tuple(out)


@dataclass(frozen=True)
class PointSet:
    """The points of one tensor set: where they come from (preset or list) and their indices."""

    name: str
    indices: tuple[int, ...]

    @classmethod
    def preset(cls, name: str) -> PointSet:
        if name not in PRESETS:
            raise PointsError(f"unknown preset '{name}'; choose one of {', '.join(PRESETS)}")
        return cls(name, PRESETS[name])

    @classmethod
    def from_list(cls, spec: str) -> PointSet:
        idx = parse_points(spec)
        digest = hashlib.sha1(",".join(map(str, idx)).encode()).hexdigest()[:8]
        return cls(f"points-{len(idx)}-{digest}", idx)

    @property
    def array(self) -> np.ndarray:
        return np.asarray(self.indices, np.int64)

    def describe(self) -> list[dict[str, object]]:
        """One entry per tensor point: its global index, part, index in the part, and name."""
        out: list[dict[str, object]] = []
        for k, g in enumerate(self.indices):
            part, i = part_of(g)
            out.append({"k": k, "index": g, "part": part, "part_index": i, "name": point_name(g)})
        return out
