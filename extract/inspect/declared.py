"""`show` for a family without a drawing of its own, read from its declaration: its regions (which
points make the body, face and hands), the presence rule, the skeleton and colours.

A region counts as found on a frame when at least half of its points are found: score at least
the declared threshold, or, for a family without scores, its values present. Points under the
threshold are left out of the drawing, and limbs between them; the legend band names each region,
struck through where it was not found.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.inspect.draw import _canvas, _label, _legend, load_frame
from phoenix_keypoints.extract.inspect.rows import part_arrays
from phoenix_keypoints.extract.keypoints.estimator import Declaration


def kept(decl: Declaration, values: np.ndarray) -> np.ndarray:
    """bool [..., points]: each point found (score >= threshold, or present where no score)."""
    if decl.score_threshold is None:
        return ~np.isnan(values[..., 0])
    return np.nan_to_num(values[..., -1], nan=0.0) >= decl.score_threshold


def found(decl: Declaration, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """region -> bool [frames]: at least half its points found (NaN: not read)."""
    return {r: kept(decl, arrays[col][:, lo:hi]).mean(axis=1) >= 0.5
            for r, (col, lo, hi) in decl.regions.items()}


def draw_declared(decl: Declaration, rgb: np.ndarray | None, arrays: dict[str, np.ndarray],
                  width: int, height: int, scale: int = 1, label: str = "") -> np.ndarray:
    """One frame ({column: [points, channels]}) with its regions' points and limbs, drawn in the
    order of the declaration's colours (the last on top), and the legend band."""
    img = _canvas(rgb, width * scale, height * scale)
    parts = found(decl, {c: a[None] for c, a in arrays.items()})
    for region, colour in decl.colours.items():
        col, lo, hi = decl.regions[region]
        keep = kept(decl, arrays[col])
        xy = np.nan_to_num(arrays[col][:, :2]) * scale
        for a, b in decl.skeleton.get(region, ()):
            if keep[a] and keep[b]:
                cv2.line(img, _pt(xy[a]), _pt(xy[b]), colour, scale, cv2.LINE_AA)
        for i in range(lo, hi):
            if keep[i]:
                cv2.circle(img, _pt(xy[i]), scale, colour, -1, cv2.LINE_AA)
    if label:
        _label(img, label, scale)
    legend = {decl.legend.get(r, r): bool(f[0]) for r, f in parts.items()}
    colours = {decl.legend.get(r, r): c for r, c in decl.colours.items()}
    return np.vstack([img, _legend(img.shape[1], legend, scale, colours)])


def _pt(p: np.ndarray) -> tuple[int, int]:
    return int(round(float(p[0]))), int(round(float(p[1])))


def drawn_declared_frames(decl: Declaration, rows: pa.Table, frames_root: Path | None, width: int,
                          height: int, scale: int, seen: list[int] | None = None
                          ) -> Iterator[np.ndarray]:
    """Each row's frame with its skeleton (RGB); seen gets 1 per frame found on disk."""
    arrays = part_arrays(rows)
    for i, (image, frame) in enumerate(zip(rows["image"].to_pylist(), rows["frame"].to_pylist(),
                                           strict=True)):
        rgb = load_frame(frames_root, image)
        if seen is not None:
            seen.append(rgb is not None)
        yield draw_declared(decl, rgb, {c: a[i] for c, a in arrays.items()}, width, height, scale,
                            f"{frame}")
