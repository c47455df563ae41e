"""Draw a frame's keypoints on the real frame, for a family whose parts are landmark lists (its
declaration's QualitySpec): each region in its declared colour and limbs, in the declared order
(the last on top).

A part the estimator did not find is shown as missing in a legend band under the frame (its name
struck through in grey), so a frame without a hand cannot be mistaken for one where the hand was
drawn off-screen. Body limbs are drawn only between points the estimator scores visible (the
channel and cut-off the family's declaration gives). Images are RGB
uint8 throughout.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from phoenix_keypoints.extract.keypoints.estimator import Declaration
from phoenix_keypoints.extract.sources import load_image, source_of_image

MISSING = (150, 150, 150)
BAND = 16  # legend band height at scale 1, in pixels
LEGEND_SLOTS = 4  # the band has room for at least this many labels: a few do not spread out
FONT = cv2.FONT_HERSHEY_SIMPLEX


def load_frame(root: Path | None, image: str) -> np.ndarray | None:
    """The frame's RGB pixels, or None when the dataset or the file is gone or unreadable.

    A video frame of a full-range stream (yuvj420p: most phone and webcam mp4s) makes FFmpeg's
    swscale say `deprecated pixel format used` as it turns it into RGB: true and harmless for a
    picture to draw on, so it is caught here rather than printed through show's and report's lines.
    """
    if root is None:
        return None
    if source_of_image(image) == "folder":
        return load_image(Path(root), image)
    import av

    with av.logging.Capture(local=True):
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


def _draw_part(img: np.ndarray, decl: Declaration, region: str, vals: np.ndarray,
               scale: int) -> None:
    """One region's limbs (the body's between visible points only) and, where declared, a dot on
    each of its points. vals: the region's column [points, values]; limbs index the column."""
    spec = decl.quality
    assert spec is not None, "drawn as landmark lists: the declaration has a QualitySpec"
    _, lo, hi = decl.regions[region]
    h, w = img.shape[:2]
    px = np.round(vals[:, :2] * (w, h)).astype(np.int32)
    edges = np.array(decl.skeleton.get(region, ()), np.int64).reshape(-1, 2)
    if region == "body":
        seen = vals[:, spec.visibility] >= spec.visible
        edges = edges[seen[edges[:, 0]] & seen[edges[:, 1]]]
    colour = decl.colours[region]
    thick = max(1, scale // (2 if region in spec.thin else 1))
    cv2.polylines(img, list(px[edges]), False, colour, thick, cv2.LINE_AA)
    if region in spec.dotted:
        for x, y in px[lo:hi]:
            cv2.circle(img, (int(x), int(y)), thick + 1, colour, -1, cv2.LINE_AA)


def _legend(width: int, found: dict[str, bool], scale: int,
            colours: dict[str, tuple[int, int, int]]) -> np.ndarray:
    """The band under a frame naming each part (`found`'s keys, in order, in `colours`), struck
    through where it was not found."""
    band = np.full((BAND * scale, width, 3), 25, np.uint8)
    slot = width // max(LEGEND_SLOTS, len(found))
    size = 0.32 * width / 210  # four labels fit a 210-pixel PHOENIX frame
    for i, part in enumerate(found):
        x0, y = i * slot + 3, int(BAND * scale * 0.7)
        colour = colours[part] if found[part] else MISSING
        name = part
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


def draw_frame(decl: Declaration, rgb: np.ndarray | None, parts: dict[str, np.ndarray],
               width: int, height: int, scale: int = 1, label: str = "") -> np.ndarray:
    """The frame (or a grey 'frame not found' canvas) at width*scale x height*scale with each found
    region drawn, plus the legend band. parts: column -> [points, values], NaN when not found."""
    img = _canvas(rgb, width * scale, height * scale)
    found = {r: not np.isnan(parts[col][lo, 0]) for r, (col, lo, _) in decl.regions.items()}
    for region in decl.colours:  # in the declared order: the last on top
        if found[region]:
            _draw_part(img, decl, region, parts[decl.regions[region][0]], scale)
    if label:
        _label(img, label, scale)
    legend = {decl.legend.get(r, r): f for r, f in found.items()}
    colours = {decl.legend.get(r, r): c for r, c in decl.colours.items()}
    return np.vstack([img, _legend(img.shape[1], legend, scale, colours)])
