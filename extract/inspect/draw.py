"""Draw a frame's keypoints on the real frame: pose, face and each hand in its own colour.

A part MediaPipe did not find is shown as missing in a legend band under the frame (its name struck
through in grey), so a frame without a hand cannot be mistaken for one where the hand was drawn
off-screen. Pose limbs are drawn only between points MediaPipe scores visible (>= 0.5), as its own
drawing utilities do. Images are RGB uint8 throughout.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from phoenix_keypoints.extract.keypoints.points import FACE_CONTOUR_EDGES, HAND_EDGES, POSE_EDGES
from phoenix_keypoints.extract.keypoints.schema import PARTS
from phoenix_keypoints.extract.sources import load_image

# RGB; chosen to stay apart from each other and from PHOENIX's grey-blue background.
COLOURS: dict[str, tuple[int, int, int]] = {
    "pose": (255, 210, 0),
    "face": (0, 220, 255),
    "left_hand": (40, 230, 40),
    "right_hand": (255, 60, 170),
}
LABELS = {"pose": "pose", "face": "face", "left_hand": "L hand", "right_hand": "R hand"}
MISSING = (150, 150, 150)
BAND = 16  # legend band height at scale 1, in pixels
VISIBLE = 0.5
FONT = cv2.FONT_HERSHEY_SIMPLEX


@lru_cache(maxsize=1)
def connections() -> dict[str, np.ndarray]:
    """part -> [edges, 2] point pairs, MediaPipe's own (face: contours only), as points.py spells
    them out so that drawing needs no mediapipe."""
    hand = np.array(HAND_EDGES)
    return {"pose": np.array(POSE_EDGES), "face": np.array(FACE_CONTOUR_EDGES),
            "left_hand": hand, "right_hand": hand}


def load_frame(root: Path | None, image: str) -> np.ndarray | None:
    """The frame's RGB pixels, or None when the dataset or the file is gone or unreadable."""
    if root is None:
        return None
    return load_image(Path(root), image)


def _canvas(rgb: np.ndarray | None, width: int, height: int) -> np.ndarray:
    if rgb is None:
        img = np.full((height, width, 3), 60, np.uint8)
        cv2.putText(img, "frame not found", (6, height // 2), FONT, 0.35 * width / 210,
                    (220, 220, 220), 1, cv2.LINE_AA)
        return img
    if rgb.shape[:2] != (height, width):
        return cv2.resize(rgb, (width, height), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(rgb)


def _draw_part(img: np.ndarray, part: str, vals: np.ndarray, scale: int) -> None:
    h, w = img.shape[:2]
    px = np.round(vals[:, :2] * (w, h)).astype(np.int32)
    edges = connections()[part]
    if part == "pose":
        seen = vals[:, 3] >= VISIBLE
        edges = edges[seen[edges[:, 0]] & seen[edges[:, 1]]]
    thick = max(1, scale // (2 if part == "face" else 1))
    cv2.polylines(img, list(px[edges]), False, COLOURS[part], thick, cv2.LINE_AA)
    if part.endswith("hand"):
        for x, y in px:
            cv2.circle(img, (int(x), int(y)), thick + 1, COLOURS[part], -1, cv2.LINE_AA)


def _legend(width: int, found: dict[str, bool], scale: int,
            colours: dict[str, tuple[int, int, int]] | None = None) -> np.ndarray:
    """The band under a frame naming each part (`found`'s keys, in order; the default family's
    four by default colours), struck through where it was not found."""
    colours = colours or COLOURS
    band = np.full((BAND * scale, width, 3), 25, np.uint8)
    slot = width // max(len(PARTS), len(found))
    size = 0.32 * width / 210  # four labels fit a 210-pixel PHOENIX frame
    for i, part in enumerate(found):
        x0, y = i * slot + 3, int(BAND * scale * 0.7)
        colour = colours[part] if found[part] else MISSING
        name = LABELS.get(part, part)
        cv2.putText(band, name, (x0, y), FONT, size, colour, 1, cv2.LINE_AA)
        if not found[part]:  # struck through: not found in this frame
            (tw, th), _ = cv2.getTextSize(name, FONT, size, 1)
            cv2.line(band, (x0 - 1, y - th // 2), (x0 + tw + 1, y - th // 2), (230, 60, 60),
                     max(1, scale), cv2.LINE_AA)
    return band


def _label(img: np.ndarray, text: str, scale: int) -> None:
    """Text in the top-left corner, outlined so it reads on any background."""
    org, size = (3 * scale, 11 * scale), 0.35 * scale
    cv2.putText(img, text, org, FONT, size, (0, 0, 0), 3 * scale, cv2.LINE_AA)
    cv2.putText(img, text, org, FONT, size, (255, 255, 255), scale, cv2.LINE_AA)


def draw_frame(rgb: np.ndarray | None, parts: dict[str, np.ndarray], width: int, height: int,
               scale: int = 1, label: str = "") -> np.ndarray:
    """The frame (or a grey 'frame not found' canvas) at width*scale x height*scale with each found
    part drawn, plus the legend band. parts: part -> [points, values], NaN when not found."""
    img = _canvas(rgb, width * scale, height * scale)
    found = {p: not np.isnan(parts[p][0, 0]) for p in PARTS}
    for part in ("face", "pose", "left_hand", "right_hand"):  # hands on top
        if found[part]:
            _draw_part(img, part, parts[part], scale)
    if label:
        _label(img, label, scale)
    return np.vstack([img, _legend(img.shape[1], found, scale)])
