"""Per-video quality figures from keypoint rows, and the flags a report raises on them.

For a family whose parts are landmark lists that exist where a part was found; which parts, and
which of their points each measure reads, come from the declaration of the file being read (its
regions and its QualitySpec, extract/keypoints/estimator.py: `Rated`). What is measured (all from
one video's rows, in frame order):
- the share of rows where each part (each region's column: pose, face, left hand, right hand) was
  found;
- the longest run of consecutive frames without each hand;
- suspected left/right swaps: a hand's wrist lands where the other hand's wrist was a frame before,
  having jumped there (or the other hand vanished as it appeared), the mark of an estimator labelling
  the same hand left in one frame and right in the next;
- jitter: the median frame-to-frame movement of the shoulders (the body's declared pair), which
  hardly move in front of a weather map, so their movement is mostly the tracker's noise;
- frames with points far outside the frame: hands are found in the picture, so a hand point far
  outside it is a false detection; of the body only the declared head and shoulders scored visible
  count, because a pose model rightly guesses arms and hips below the crop. The face is not read
  beyond whether it was found: it is fitted in a box cut around the body's head points, which are
  checked, and skipping its points (85% of a file) is what keeps the report fast.

Distances are in pixels of the frame (x * width, y * height). Every threshold is a field of
`Thresholds`, overridable from the command line (`report --help`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from phoenix_keypoints.extract.inspect.presence import FaceMask
from phoenix_keypoints.extract.inspect.rows import ReportError, iter_tables, present_values
from phoenix_keypoints.extract.keypoints.estimator import Declaration, QualitySpec
from phoenix_keypoints.extract.keypoints.frames import STATUS_OK

# Bits of the per-frame timeline a report keeps for flagged videos (one uint8 per frame): a rated
# part's bit is 1 << its place (at most four parts), then these events.
EVENTS = {"swap": 16, "outside": 32, "not_ok": 64}
MAX_PARTS = 4
HANDS = ("left_hand", "right_hand")  # the regions whose wrists tell a swap, in this order


@dataclass(frozen=True)
class Rated:
    """The parts a quality report rates, read from the declaration of the file being read: each
    region's column in region order, and the columns of the regions with a role (body, face, hands)."""

    spec: QualitySpec
    parts: dict[str, tuple[int, int]]  # column -> (points, values), in region order
    roles: dict[str, str]  # role (a region's name: body, face, left_hand, right_hand) -> column
    colours: dict[str, tuple[int, int, int]]  # column -> RGB (the region's declared colour)
    face_point: int | None  # the face's first point in the family's point order (tensor masks)

    @classmethod
    def of(cls, decl: Declaration) -> Rated:
        if decl.quality is None:
            raise ReportError(f"the {decl.name} family declares no quality report")
        parts = {col: decl.parts[col] for col, _, _ in decl.regions.values()}
        if len(parts) != len(decl.regions):
            raise ReportError(f"the quality report rates one landmark column per region; the "
                              f"{decl.name} family's regions share columns")
        if len(parts) > MAX_PARTS:
            raise ReportError(f"the quality report rates at most {MAX_PARTS} parts; the "
                              f"{decl.name} family declares {len(parts)}")
        roles = {r: col for r, (col, _, _) in decl.regions.items()}
        colours = {col: decl.colours[r] for r, (col, _, _) in decl.regions.items()
                   if r in decl.colours}
        face = decl.regions.get("face")  # its first point in the point order, where named so
        first = decl.point_parts().get(face[0]) if face else None
        face_point = first[0] + face[1] if face and first else None  # None: read the column
        return cls(decl.quality, parts, roles, colours, face_point)

    @property
    def rates(self) -> list[str]:
        return [f"{p}_rate" for p in self.parts]

    @property
    def hands(self) -> list[str]:
        """The hands' columns, left first."""
        return [self.roles[h] for h in HANDS if h in self.roles]

    @property
    def gaps(self) -> list[str]:
        return [f"{h}_gap" for h in self.hands]

    @property
    def columns(self) -> list[str]:
        """What frame_features reads."""
        return ["status", "width", "height", *self.parts]

    @property
    def figures(self) -> tuple[str, ...]:
        """What block_figures gives per video."""
        return ("frames", *self.rates, *self.gaps, "swaps", "jitter_px", "outside_frames", "not_ok")

    @property
    def bits(self) -> dict[str, int]:
        """column -> its bit in the timeline."""
        return {p: 1 << j for j, p in enumerate(self.parts)}

    def limits(self, thr: Thresholds) -> dict[str, float]:
        """rate -> the share below which a video is flagged (0: a part without a role, never)."""
        by_role = {"body": thr.min_pose_rate, "face": thr.min_face_rate,
                   **dict.fromkeys(HANDS, thr.min_hand_rate)}
        column_role = {col: r for r, col in self.roles.items()}
        return {f"{p}_rate": by_role.get(column_role.get(p, ""), 0.0) for p in self.parts}


def _t(default: float, doc: str) -> Any:
    return field(default=default, metadata={"help": doc})


@dataclass(frozen=True)
class Thresholds:
    """When a video is flagged. Field names are the report's options (--min-face-rate ...)."""

    min_pose_rate: float = _t(0.9, "flag a video whose pose is found in fewer of its frames")
    min_face_rate: float = _t(0.9, "flag a video whose face is found in fewer of its frames")
    min_hand_rate: float = _t(0.5, "flag a video where either hand is found in fewer of its frames")
    max_hand_gap: int = _t(50, "flag a video where a hand is missing for more frames in a row "
                               "(frames, whatever the video's rate: 50 are 2 s at 25 fps, 1.7 s "
                               "at 30)")
    max_swaps: int = _t(0, "flag a video with more suspected left/right hand swaps")
    swap_jump: float = _t(30.0, "pixels a wrist must jump (or appear from nowhere) to be a swap")
    swap_radius: float = _t(10.0, "pixels from the other hand's last wrist position it must land")
    max_jitter: float = _t(2.0, "flag a video whose shoulders move more (median pixels per frame)")
    outside_margin: float = _t(0.25, "a point is far outside when it lies more than this share of "
                                     "the frame's width/height beyond its edge")
    max_outside: float = _t(0.0, "flag a video with a larger share of frames holding a point far "
                                 "outside the frame")
    max_not_ok: int = _t(0, "flag a video with more frames whose status is not ok")

    @classmethod
    def options(cls) -> list[tuple[str, type, Any, str]]:
        """(name, type, default, help) per field: what the command line offers."""
        return [(f.name, type(f.default), f.default, f.metadata["help"]) for f in fields(cls)]


# --- per-frame features (whole record batches at once) ----------------------------------------

FEATURES = ("present", "wrists", "shoulders", "outside", "not_ok", "status")


def _far_rows(vals: np.ndarray, margin: float) -> np.ndarray:
    """bool [rows]: any point's normalised x or y beyond the frame by more than margin."""
    rows, points, step = vals.shape
    flat = vals.reshape(rows, points * step)
    far = np.zeros(rows, bool)
    if not rows:
        return far
    for axis in (0, 1):  # strided columns: 20x faster than reducing over [rows, points, 2]
        coord = flat[:, axis::step]
        far |= (coord.min(axis=1) < -margin) | (coord.max(axis=1) > 1 + margin)
    return far


def frame_features(batch: pa.RecordBatch | pa.Table, rated: Rated, margin: float,
                   face: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per frame: parts found [n, parts], wrists and shoulders in pixels ([n, 2, 2], NaN when not
    found or not visible), a point far outside, status not ok, and that status ("" when ok).

    face: whether each row's face was found, when known without the face column (FaceMask).
    Whole batches at once: per-video pyarrow calls cost more than the arithmetic itself.
    """
    n = batch.num_rows
    size = np.stack([batch.column(c).to_numpy(zero_copy_only=False) for c in ("width", "height")],
                    axis=1).astype(np.float32)
    present = np.zeros((n, len(rated.parts)), bool)
    outside = np.zeros(n, bool)
    wrists = np.full((n, 2, 2), np.nan, np.float32)
    shoulders = np.full((n, 2, 2), np.nan, np.float32)
    face_col, body, hands = rated.roles.get("face"), rated.roles.get("body"), rated.hands
    for j, (part, (k, c)) in enumerate(rated.parts.items()):
        if part == face_col:
            present[:, j] = face if face is not None else present_values(batch.column(part), k, c)[0]
            continue
        here, vals = present_values(batch.column(part), k, c)
        present[:, j] = here
        if part == body:
            outside[here] |= _far_body(vals, rated.spec, margin)
            sh = vals[:, list(rated.spec.shoulders)]
            sh[sh[..., rated.spec.visibility] < rated.spec.visible] = np.nan
            shoulders[here] = sh[..., :2]
        else:
            outside[here] |= _far_rows(vals, margin)
            if part in hands:
                wrists[here, hands.index(part)] = vals[:, rated.spec.wrist, :2]
    wrists *= size[:, None, :]
    shoulders *= size[:, None, :]
    status = batch.column("status")
    not_ok = ~pc.equal(status, STATUS_OK).to_numpy(zero_copy_only=False)
    names = np.full(n, "", object)
    if not_ok.any():
        names[not_ok] = status.filter(pa.array(not_ok)).to_pylist()
    return {"present": present, "wrists": wrists, "shoulders": shoulders, "outside": outside,
            "not_ok": not_ok, "status": names}


def _far_body(vals: np.ndarray, spec: QualitySpec, margin: float) -> np.ndarray:
    """bool [rows]: a head or shoulder point scored visible lies beyond the frame by the margin."""
    head = vals[:, :spec.head]
    far = ((head[..., :2] < -margin) | (head[..., :2] > 1 + margin)).any(axis=2)
    return (far & (head[..., spec.visibility] >= spec.visible)).any(axis=1)


def _starts(splits: np.ndarray, vids: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, (vids[1:] != vids[:-1]) | (splits[1:] != splits[:-1])])


def iter_video_blocks(keypoints: Path, rated: Rated, margin: float, face: FaceMask | None = None,
                      batch_size: int = 8192) -> Iterator[tuple[list[tuple[str, str]], np.ndarray,
                                                                 dict[str, np.ndarray]]]:
    """Whole videos in file order: ([(split, video)], where each starts, their frame features).

    With a FaceMask the face column is not read at all. A row group's last video may go on in the
    next one: it is carried over, so each block holds only complete videos. Memory: the row
    groups being decoded plus one video.
    """
    cols = ["split", "video", *(c for c in rated.columns if face is None or c != rated.roles["face"])]
    carry: tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None = None
    for table in iter_tables(keypoints, cols, batch_size=batch_size):
        splits = table.column("split").to_numpy(zero_copy_only=False)
        vids = table.column("video").to_numpy(zero_copy_only=False)
        if not len(vids):
            continue
        found = None
        if face is not None:
            starts = _starts(splits, vids)
            if carry is not None and (carry[0][0], carry[1][0]) == (splits[0], vids[0]):
                starts = starts[1:]  # the carried video goes on: it did not start here
            found = face.take(splits, vids, starts)
        feats = frame_features(table, rated, margin, found)
        if carry is not None:
            splits, vids = np.concatenate([carry[0], splits]), np.concatenate([carry[1], vids])
            feats = {f: np.concatenate([carry[2][f], feats[f]]) for f in FEATURES}
        starts = _starts(splits, vids)
        last = starts[-1]
        carry = splits[last:], vids[last:], {f: v[last:] for f, v in feats.items()}
        if len(starts) > 1:
            keys = [(str(splits[a]), str(vids[a])) for a in starts[:-1]]
            yield keys, starts[:-1], {f: v[:last] for f, v in feats.items()}
    if carry is not None:
        yield [(str(carry[0][0]), str(carry[1][0]))], np.array([0]), carry[2]


# --- per-video figures, for a block of whole videos at once ---------------------------------

def _lengths(starts: np.ndarray, n: int) -> np.ndarray:
    return np.diff(np.append(starts, n))


def longest_gaps(present: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per video: the longest run of consecutive frames where present is False."""
    idx = np.arange(len(present))
    is_start = np.zeros(len(present), bool)
    is_start[starts] = True
    # The run ending at frame i began after the last present frame, or at the video's start.
    reset = np.where(present, idx, np.where(is_start, idx - 1, -1))
    run = idx - np.maximum.accumulate(reset)
    return np.maximum.reduceat(run, starts) if len(present) else np.zeros(len(starts), int)


def swap_frames(left: np.ndarray, right: np.ndarray, starts: np.ndarray, jump: float,
                radius: float) -> np.ndarray:
    """bool [frames]: a wrist (pixels, NaN when missing) lands where the other wrist just was,
    having jumped more than `jump` or appeared as the other hand vanished."""
    out = np.zeros(len(left), bool)
    if len(left) < 2:
        return out
    with np.errstate(invalid="ignore"):
        for a, b in ((left, right), (right, left)):
            near = np.hypot(*(a[1:] - b[:-1]).T) < radius
            jumped = np.hypot(*(a[1:] - a[:-1]).T) > jump
            relabelled = np.isnan(a[:-1, 0]) & np.isnan(b[1:, 0])
            out[1:] |= near & (jumped | relabelled)
    out[starts] = False  # a video's first frame has no frame before it
    return out


def jitters(shoulders: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per video: median frame-to-frame shoulder movement in pixels (NaN: < 2 usable frames)."""
    n = len(shoulders)
    step = np.full(n, np.nan, np.float32)
    if n > 1:
        step[1:] = np.hypot(*np.moveaxis(shoulders[1:] - shoulders[:-1], 2, 0)).mean(axis=1)
    step[starts] = np.nan
    seg = np.repeat(np.arange(len(starts)), _lengths(starts, n))
    ok = ~np.isnan(step)
    seg, step = seg[ok], step[ok]
    order = np.lexsort((step, seg))  # by video, then by movement: medians by position
    step = step[order]
    counts = np.bincount(seg, minlength=len(starts))
    first = np.r_[0, np.cumsum(counts)[:-1]]
    out = np.full(len(starts), np.nan)
    has = counts > 0
    lo, hi = first[has] + (counts[has] - 1) // 2, first[has] + counts[has] // 2
    out[has] = (step[lo].astype(np.float64) + step[hi]) / 2
    return out


def block_figures(feats: dict[str, np.ndarray], starts: np.ndarray, rated: Rated,
                  thr: Thresholds) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Whole videos' frame features -> (figure name -> one value per video, uint8 timeline per
    frame with the parts' bits and EVENTS). Vectorised over the block: no per-video Python."""
    present = feats["present"]
    n = len(present)
    frames = _lengths(starts, n)
    swaps = swap_frames(feats["wrists"][:, 0], feats["wrists"][:, 1], starts, thr.swap_jump,
                        thr.swap_radius)
    found = np.add.reduceat(present.astype(np.int64), starts, axis=0)
    figs: dict[str, np.ndarray] = {"frames": frames}
    for j, part in enumerate(rated.parts):
        figs[f"{part}_rate"] = found[:, j] / frames
    for hand in rated.hands:
        figs[f"{hand}_gap"] = longest_gaps(present[:, list(rated.parts).index(hand)], starts)
    figs["swaps"] = np.add.reduceat(swaps.astype(np.int64), starts)
    figs["jitter_px"] = jitters(feats["shoulders"], starts)
    figs["outside_frames"] = np.add.reduceat(feats["outside"].astype(np.int64), starts)
    figs["not_ok"] = np.add.reduceat(feats["not_ok"].astype(np.int64), starts)
    timeline = present.astype(np.uint8) @ np.array(list(rated.bits.values()), np.uint8)
    timeline |= swaps.astype(np.uint8) * EVENTS["swap"]
    timeline |= feats["outside"].astype(np.uint8) * EVENTS["outside"]
    timeline |= feats["not_ok"].astype(np.uint8) * EVENTS["not_ok"]
    return figs, timeline


def status_counts(status: np.ndarray) -> dict[str, int]:
    """Frames per status among one video's statuses ("" is ok and not counted)."""
    vals, counts = np.unique(status[status != ""], return_counts=True)
    return {str(v): int(c) for v, c in zip(vals, counts, strict=True)}


# --- flags ------------------------------------------------------------------------------------

def flags(figs: dict[str, Any], rated: Rated, thr: Thresholds) -> tuple[list[str], list[str], float]:
    """(flag codes, one readable reason per flag, severity) for one video's figures.

    Severity adds, per flag, how far the figure is past its threshold relative to the threshold
    (a share of frames where the threshold is 0), each capped at 1: worst videos sort first.
    """
    codes: list[str] = []
    reasons: list[str] = []
    score = 0.0
    n = max(1, figs["frames"])

    def add(code: str, reason: str, excess: float) -> None:
        nonlocal score
        codes.append(code)
        reasons.append(reason)
        score += min(1.0, max(0.0, excess))

    for part, low in zip(rated.parts, rated.limits(thr).values(), strict=True):
        rate = figs[f"{part}_rate"]
        if rate < low:
            add(part, f"{part.replace('_', ' ')} found in {rate:.0%} of frames (< {low:.0%})",
                (low - rate) / low)
    for hand in rated.hands:
        gap = figs[f"{hand}_gap"]
        if gap > thr.max_hand_gap:
            add(f"{hand}_gap", f"{hand.replace('_', ' ')} missing {gap} frames in a row "
                f"(> {thr.max_hand_gap})", (gap - thr.max_hand_gap) / max(1, thr.max_hand_gap))
    if figs["swaps"] > thr.max_swaps:
        add("swaps", f"{figs['swaps']} suspected left/right swap(s) (> {thr.max_swaps})",
            (figs["swaps"] - thr.max_swaps) / max(1, thr.max_swaps))
    if figs["jitter_px"] > thr.max_jitter:  # NaN (no shoulders) is never flagged
        add("jitter", f"shoulders move {figs['jitter_px']:.1f} px per frame (> {thr.max_jitter:g})",
            (figs["jitter_px"] - thr.max_jitter) / thr.max_jitter if thr.max_jitter else 1.0)
    share = figs["outside_frames"] / n
    if share > thr.max_outside:
        add("outside", f"{figs['outside_frames']} frame(s) with points far outside the frame "
            f"({share:.0%} > {thr.max_outside:.0%})",
            (share - thr.max_outside) / thr.max_outside if thr.max_outside else share)
    if figs["not_ok"] > thr.max_not_ok:
        detail = ", ".join(f"{k} {v}" for k, v in figs["statuses"].items())
        add("not_ok", f"{figs['not_ok']} frame(s) not ok ({detail})", figs["not_ok"] / n)
    return codes, reasons, round(score, 4)
