"""Per-video arithmetic on keypoints: pixels, gap interpolation, shoulder normalisation.

Everything here works on one whole video at a time ([T, K, 3] with a [T, K] detection mask), so
streaming code only has to hand over complete videos.

Units. A family with tensor presets keeps normalised image coordinates: x / frame width, y / frame
height, so one unit of x (210 px in PHOENIX) is not one unit of y (260 px). Shoulder normalisation
therefore first goes to pixels (x * width, y * height, and z * width, the scale its z is given in)
so that the shoulder width is a true length, then shifts x, y by the shoulder midpoint and divides
x, y, z by the shoulder width. z is scaled but not shifted: its origin is each part's own (hips for
pose, wrist for a hand, face centre), which a shoulder shift would not make more comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NORMALIZE_MODES = ("none", "shoulders", "shoulders-per-frame")
FILL_MODES = ("zero", "interpolate")
MIN_SHOULDER_PX = 1.0  # a narrower "shoulder width" is a degenerate detection, not a scale


def to_pixels(xyz: np.ndarray, width: np.ndarray, height: np.ndarray) -> np.ndarray:
    """[T, K, 3] normalised image coordinates -> pixels (x*w, y*h, z*w); width/height per frame.

    Frames with an unknown size (unreadable images, which hold no points) borrow the video's
    median size so that the arithmetic stays finite.
    """
    w = np.asarray(width, np.float64)
    h = np.asarray(height, np.float64)
    for a in (w, h):
        bad = ~np.isfinite(a) | (a <= 0)
        if bad.any():
            a[bad] = np.median(a[~bad]) if (~bad).any() else 1.0
    scale = np.stack([w, h, w], axis=1)[:, None, :]  # [T, 1, 3]
    return xyz.astype(np.float64) * scale


def interpolate_gaps(xyz: np.ndarray, mask: np.ndarray, max_gap: int) -> tuple[np.ndarray, np.ndarray]:
    """Linearly fill runs of at most max_gap missing frames that lie between two detections.

    Returns (filled copy, filled) where filled [T, K] is True only where a value was made up; mask
    itself is never changed. Gaps longer than max_gap, and gaps before the first or after the last
    detection (nothing to interpolate towards), stay 0. Points are grouped by their detection
    pattern over time (a whole part is found or not), so the work is per part, not per
    point.
    """
    out = xyz.copy()
    filled = np.zeros(mask.shape, bool)
    t_len = mask.shape[0]
    if max_gap < 1 or t_len < 3:
        return out, filled
    patterns, which = np.unique(mask.T, axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    for p, pattern in enumerate(patterns):
        det = np.flatnonzero(pattern)
        if det.size < 2:
            continue
        gaps = np.diff(det) - 1
        ok = (gaps >= 1) & (gaps <= max_gap)
        if not ok.any():
            continue
        prev = np.repeat(det[:-1][ok], gaps[ok])
        nxt = np.repeat(det[1:][ok], gaps[ok])
        t = np.concatenate([np.arange(a + 1, b) for a, b in zip(det[:-1][ok], det[1:][ok], strict=True)])
        w = ((t - prev) / (nxt - prev))[:, None, None]
        cols = np.flatnonzero(which == p)
        out[t[:, None], cols[None, :]] = (
            (1 - w) * xyz[prev[:, None], cols[None, :]] + w * xyz[nxt[:, None], cols[None, :]]
        )
        filled[t[:, None], cols[None, :]] = True
    return out, filled


@dataclass
class ShoulderFrame:
    """The reference frame a video was normalised with (per video, or the per-frame fallback)."""

    normalized: bool
    origin_x: float | None = None
    origin_y: float | None = None
    scale: float | None = None
    pose_frames: int = 0  # frames whose shoulders were measured


def shoulder_stats(shoulders_px: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[T, 2, >=2] pixel positions of pose 11 and 12 -> (midpoint [T, 2], width [T]) per frame.

    Only frames where present is True (and the width is not degenerate) are meaningful; the rest
    are NaN so that they cannot leak into a mean.
    """
    xy = shoulders_px[:, :, :2].astype(np.float64)
    mid = xy.mean(axis=1)
    width = np.linalg.norm(xy[:, 0] - xy[:, 1], axis=1)
    good = present & (width >= MIN_SHOULDER_PX)
    mid[~good] = np.nan
    width = np.where(good, width, np.nan)
    return mid, width


def normalize_shoulders(xyz_px: np.ndarray, valid: np.ndarray, shoulders_px: np.ndarray,
                        present: np.ndarray, per_frame: bool) -> tuple[np.ndarray, ShoulderFrame]:
    """Centre on the shoulder midpoint and scale by the shoulder width (see the module docstring).

    Per video: one midpoint and width, the means over frames with a pose. Per frame: each frame's
    own; frames without a pose use the video's means. Only valid points change; the rest are 0.
    A video with no pose at all is returned as given, with normalized=False.
    """
    mid, width = shoulder_stats(shoulders_px, present)
    good = np.isfinite(width)
    out = np.zeros_like(xyz_px)
    if not good.any():
        out[valid] = xyz_px[valid]
        return out, ShoulderFrame(False)
    mean_mid = mid[good].mean(axis=0)
    mean_w = float(width[good].mean())
    if per_frame:
        origin = np.where(good[:, None], mid, mean_mid)  # [T, 2]
        scale = np.where(good, width, mean_w)  # [T]
    else:
        origin = np.broadcast_to(mean_mid, (len(xyz_px), 2))
        scale = np.full(len(xyz_px), mean_w)
    shift = np.concatenate([origin, np.zeros((len(xyz_px), 1))], axis=1)[:, None, :]
    res = (xyz_px - shift) / scale[:, None, None]
    out[valid] = res[valid]
    return out, ShoulderFrame(True, float(mean_mid[0]), float(mean_mid[1]), mean_w, int(good.sum()))
