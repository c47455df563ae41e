"""What a top-down pose model's outputs are (its head), and how each is decoded to frame pixels.

The head is read from the model's output shapes, never asked: two outputs `[N, K, 2w]`,
`[N, K, 2h]` are a SimCC pair (RTMPose, RTMW, DWPose), three such a SimCC triple (RTMW3D: 3D, not
this family's), one output `[N, K, H, W]` heatmaps (ViTPose, HRNet). K is the number of points.

Decoders, each on one crop (centre and scale as the crop was cut, the model input (w, h)):
- SimCC (rtmlib 0.0.16 `get_simcc_maximum` and RTMPose.postprocess): each axis's argmax / 2,
  score the mean of the two maxima, points scoring <= 0 at bin -1; then
  xy / input * scale + centre - scale / 2.
- heatmaps, `rtmlib` (rtmlib 0.0.16 ViTPose.postprocess and `post_dark_udp`): argmax and maximum
  of each map, points scoring <= 0 at -1; DARK-UDP: each map blurred (Gaussian 11x11, in place),
  clipped to [0.001, 50], its log taken, edge-padded by one, and one Newton step from the argmax
  with central differences, read through the flat index of the padded maps exactly as rtmlib
  reads them (a point at -1 reads the pad and its neighbours wrap as rtmlib's do); then
  xy / (W - 1, H - 1) * scale + centre - scale / 2 (the UDP rescaling: W, H the map's size).
- heatmaps, `mmpose-dark` (mmpose 1.x MSRAHeatmap.decode with unbiased=True, the codec of the
  HRNet-w48 COCO-WholeBody DARK config: `get_heatmap_maximum`, `refine_keypoints_dark` with
  `gaussian_blur`): each map blurred on a zero border and rescaled to its old maximum, floored at
  1e-10, its log taken; a Taylor step (second differences over two pixels) only where the argmax
  lies 2 pixels inside the map; then xy * input / (W, H) / input * scale + centre - scale / 2.
  tests/test_heads.py holds a transcription of mmpose's functions as the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from phoenix_keypoints.extract.families.wholebody.onnx_outputs import values_problem

SPLIT_RATIO = 2.0  # rtmlib's SimCC bins per input pixel
SIMCC, SIMCC3D, HEATMAP = "simcc", "simcc3d", "heatmap"
DECODERS = ("rtmlib", "mmpose-dark")  # --decoder: rtmlib's own for the head, or mmpose's DARK
DARK_KERNEL = 11  # rtmlib's ViTPose and mmpose's MSRAHeatmap both blur with 11x11
MAX_VALUE = 1e6  # no heatmap value of a sane model comes near it


@dataclass(frozen=True)
class Head:
    """A pose model's head: its kind, its number of points, the output shapes it declares."""

    kind: str
    points: int
    shapes: tuple[tuple[Any, ...], ...]

    def said(self, decoder: str) -> str:
        """The head and its decoding in words (said at start, recorded in run.json)."""
        if self.kind == HEATMAP:
            how = ("mmpose's DARK (MSRAHeatmap, unbiased)" if decoder == "mmpose-dark"
                   else "rtmlib's ViTPose (DARK-UDP)")
            return f"heatmap head {list(self.shapes[0])} decoded as {how}"
        return f"SimCC head {list(self.shapes[0])}, {list(self.shapes[1])} decoded as rtmlib's RTMPose"

    def record(self, decoder: str) -> dict[str, Any]:
        return {"kind": self.kind, "points": self.points,
                "outputs": [[d if isinstance(d, int) else str(d) for d in s] for s in self.shapes],
                "decoder": decoder if self.kind == HEATMAP else "rtmlib"}


def head_of(shapes: list[list[Any]]) -> Head | None:
    """The head these output shapes make, or None when they make none of the three."""
    three = [s for s in shapes if len(s) == 3]
    if len(shapes) == 1 and len(shapes[0]) == 4:
        kind = HEATMAP
    elif len(shapes) == 2 and len(three) == 2:
        kind = SIMCC
    elif len(shapes) == 3 and len(three) == 3:
        kind = SIMCC3D
    else:
        return None
    points = shapes[0][1]
    if not isinstance(points, int) or any(s[1] not in (points, str(points)) for s in shapes):
        return None
    return Head(kind, points, tuple(tuple(s) for s in shapes))


def read_head(session: Any, wh: tuple[int, int], flag: str, path: Any) -> Head:
    """The pose model's head from its declared outputs, refused unless it is a SimCC pair or
    one heatmap tensor (a SimCC triple is a 3D model: another family's)."""
    from phoenix_keypoints.extract.families.wholebody.onnx_outputs import check_pose, escaped, what_it_is
    from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

    shapes = [list(o.shape) for o in session.get_outputs()]
    head = head_of(shapes)
    if head is None:
        raise ModelFileError(
            f"{flag} {path}: {escaped(what_it_is(shapes, 133))}. A pose model answers two SimCC "
            "outputs [1, K, 2w], [1, K, 2h] (RTMPose, RTMW, DWPose) or one heatmap output "
            "[1, K, H, W] (ViTPose, HRNet); pass a detector as --detector.")
    if head.kind == SIMCC3D:
        raise ModelFileError(
            f"{flag} {path}: three SimCC outputs {escaped(str(shapes))}: a 3D whole-body model "
            "(RTMW3D: x, y, z), whose points this 2D family does not write. Run it with the 3D "
            f"family (--estimator {depth_family()}), or pass a 2D pose model.")
    if head.kind == SIMCC:
        check_pose(session, wh, flag, path, head.points)
    return head


def depth_family() -> str:
    """The family that runs a SimCC triple, as the registry has it: one that takes this family's
    model files (--detector, --pose-model) and whose points carry a depth channel."""
    from phoenix_keypoints.extract.keypoints.estimator import loaded

    for name, fam in loaded():
        if {"detector", "pose_model"} <= set(fam.clip_options()) and any(
                v.startswith("z") for v in fam.declaration(None).values):
            return name
    return "NAME"  # none registered: the message still says which kind of family to ask for


def answer_shapes(head: Head, wh: tuple[int, int]) -> list[tuple[int | None, ...]]:
    """What the model must answer to one input (None: any size the file leaves open)."""
    if head.kind == HEATMAP:
        return [(1, head.points, *(d if isinstance(d, int) else None for d in head.shapes[0][2:]))]
    return [(1, head.points, 2 * wh[0]), (1, head.points, 2 * wh[1])]


def head_said(record: dict[str, Any]) -> str:
    """A recorded head (run.json) in words."""
    head = Head(record["kind"], record["points"], tuple(tuple(s) for s in record["outputs"]))
    return head.said(record.get("decoder", "rtmlib"))


def decode_simcc(sx: np.ndarray, sy: np.ndarray, centre: np.ndarray, scale: np.ndarray,
                 wh: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """SimCC vectors of one crop -> frame pixels and scores, as rtmlib decodes them."""
    points = sx.shape[-2]
    sx, sy = sx.reshape(points, -1), sy.reshape(points, -1)
    locs = np.stack([sx.argmax(1), sy.argmax(1)], axis=-1).astype(np.float32)
    scores = 0.5 * (sx.max(1) + sy.max(1))
    locs[scores <= 0.0] = -1
    xy = locs / SPLIT_RATIO / np.array(wh) * scale + centre - scale / 2
    return xy, scores


def _maxima(maps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each map's argmax (x, y) as float32 and its maximum; -1 where the maximum is <= 0."""
    k, _, w = maps.shape
    flat = maps.reshape(k, -1)
    at = flat.argmax(1)
    xy = np.stack([at % w, at // w], axis=-1).astype(np.float32)
    scores = flat.max(1)
    xy[scores <= 0.0] = -1
    return xy, scores


def _dark_udp(xy: np.ndarray, maps: np.ndarray) -> np.ndarray:
    """rtmlib's post_dark_udp on one crop's maps [K, H, W] (float32, changed in place)."""
    k, h, w = maps.shape
    for m in maps:
        cv2.GaussianBlur(m, (DARK_KERNEL, DARK_KERNEL), 0, m)
    np.clip(maps, 0.001, 50, maps)
    np.log(maps, maps)
    flat = np.pad(maps, ((0, 0), (1, 1), (1, 1)), mode="edge").ravel()
    row = w + 2
    at = (xy[:, 0] + 1 + (xy[:, 1] + 1) * row + row * (h + 2) * np.arange(k)).astype(int)
    centre, right, below = flat[at], flat[at + 1], flat[at + row]
    left, above = flat[at - 1], flat[at - row]
    diag, anti = flat[at + row + 1], flat[at - row - 1]
    grad = np.stack([0.5 * (right - left), 0.5 * (below - above)], axis=-1)[..., None]
    dxx = right - 2 * centre + left
    dyy = below - 2 * centre + above
    dxy = 0.5 * (diag - right - below + centre + centre - left - above + anti)
    hessian = np.stack([dxx, dxy, dxy, dyy], axis=-1).reshape(k, 2, 2)
    inverse = np.linalg.inv(hessian + np.finfo(np.float32).eps * np.eye(2))
    out = xy.copy()
    out -= np.einsum("kmn,knj->kmj", inverse, grad)[..., 0]
    return out


def _blurred(maps: np.ndarray) -> np.ndarray:
    """mmpose's gaussian_blur: each map blurred on a zero border, rescaled to its old maximum."""
    border = (DARK_KERNEL - 1) // 2
    out = np.empty_like(maps)
    for i, m in enumerate(maps):
        padded = np.zeros((m.shape[0] + 2 * border, m.shape[1] + 2 * border), np.float32)
        padded[border:-border, border:-border] = m
        b = cv2.GaussianBlur(padded, (DARK_KERNEL, DARK_KERNEL), 0)[border:-border, border:-border]
        out[i] = b * (m.max() / b.max())
    return out


def _dark_taylor(xy: np.ndarray, maps: np.ndarray) -> np.ndarray:
    """mmpose's refine_keypoints_dark on one crop: a Taylor step where the argmax lies inside."""
    k, h, w = maps.shape
    logs = np.log(np.maximum(_blurred(maps), 1e-10))
    x, y = xy[:, 0].astype(int), xy[:, 1].astype(int)
    inside = (x > 1) & (x < w - 2) & (y > 1) & (y < h - 2)
    i, x, y = np.flatnonzero(inside), x[inside], y[inside]

    def at(dy: int, dx: int) -> np.ndarray:  # float32 maps, differences in float64 (NumPy 1's
        return logs[i, y + dy, x + dx].astype(np.float64)  # scalar promotion mmpose's loop gets)

    dx = 0.5 * (at(0, 1) - at(0, -1))
    dy = 0.5 * (at(1, 0) - at(-1, 0))
    dxx = 0.25 * (at(0, 2) - 2 * at(0, 0) + at(0, -2))
    dxy = 0.25 * (at(1, 1) - at(-1, 1) - at(1, -1) + at(-1, -1))
    dyy = 0.25 * (at(2, 0) - 2 * at(0, 0) + at(-2, 0))
    det = dxx * dyy - dxy ** 2
    ok = det != 0
    safe = np.where(ok, det, 1.0)
    # -inverse(hessian) @ gradient, the 2x2 inverse written out
    step = -np.stack([(dyy * dx - dxy * dy) / safe, (dxx * dy - dxy * dx) / safe], axis=-1)
    out = xy.copy()  # float32, the step added in float64 as mmpose adds it
    out[i[ok]] = (out[i[ok]].astype(np.float64) + step[ok]).astype(np.float32)
    return out


def decode_heatmaps(maps: np.ndarray, centre: np.ndarray, scale: np.ndarray,
                    wh: tuple[int, int], decoder: str = "rtmlib") -> tuple[np.ndarray, np.ndarray]:
    """Heatmaps of one crop [K, H, W] -> frame pixels and scores (the maxima)."""
    maps = np.array(maps, np.float32)  # a copy: rtmlib's decoding blurs its maps in place
    _, h, w = maps.shape
    xy, scores = _maxima(maps)
    if decoder == "mmpose-dark":
        factor = np.array(wh) / np.array([w, h])
        xy = _dark_taylor(xy, maps) * factor
        return xy / np.array(wh) * scale + centre - 0.5 * scale, scores
    xy = _dark_udp(xy, maps)
    return xy / (np.array([w, h]) - 1) * scale + centre - scale / 2, scores


def heatmap_problem(maps: np.ndarray) -> str:
    """Why one crop's heatmaps are nonsense ("" when they are not)."""
    return values_problem([("heatmaps hold", maps)], MAX_VALUE)
