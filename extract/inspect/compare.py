"""Do two extractions agree? Compare two keypoints files video by video, frame by frame.

Both files are streamed side by side (one video of each in memory), so two full releases compare
in bounded memory. A video differs when a frame is in one file only, a frame's status differs, a
part is found in one file and not the other, or a value differs by more than the tolerance
(absolute, in the file's own units; 0: identical). Two files of different video sets differ: the
videos in one only are named, and the shared ones compared. Two files of different estimators
(one family's columns against another's) differ too, with that reason and no values
compared. Only what cannot be read as two merged keypoints files is refused (ReportError, exit 2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.inspect.rows import ReportError, open_keypoints, part_arrays
from phoenix_keypoints.extract.keypoints.estimator import declaration_of_columns
from phoenix_keypoints.extract.outputs.tensors import iter_videos

SHOWN = 8  # names listed when the video sets differ


@dataclass
class PartDiff:
    only_one: int = 0  # frames where the part is found in one file only
    compared: int = 0  # frames where both found it
    max_abs: float = 0.0
    sum_abs: float = 0.0
    values: int = 0
    frame_max: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per compared frame

    @property
    def mean_abs(self) -> float:
        return self.sum_abs / self.values if self.values else 0.0


@dataclass
class VideoDiff:
    split: str
    video: str
    only_a: int = 0
    only_b: int = 0
    status: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # count column -> frames it differs in
    parts: dict[str, PartDiff] = field(default_factory=dict)

    def differs(self, tolerance: float) -> bool:
        return bool(self.only_a or self.only_b or self.status or any(self.counts.values()) or any(
            p.only_one or p.max_abs > tolerance for p in self.parts.values()))

    def line(self, tolerance: float) -> str:
        bits = []
        if self.only_a or self.only_b:
            bits.append(f"frames only in A: {self.only_a}, only in B: {self.only_b}")
        if self.status:
            bits.append(f"status differs in {self.status} frame(s)")
        bits += [f"{c} differs in {n} frame(s)" for c, n in self.counts.items() if n]
        for part, d in self.parts.items():
            if d.only_one or d.max_abs > tolerance:
                what = [f"found in one run only in {d.only_one} frame(s)"] if d.only_one else []
                over = int(np.sum(d.frame_max > tolerance))
                if over:
                    what.append(f"max |diff| {d.max_abs:.3g} (mean {d.mean_abs:.3g}), above "
                                f"the tolerance in {over} of {d.compared} frame(s)")
                bits.append(f"{part}: {', '.join(what)}")
        return f"{self.split}/{self.video}: " + "; ".join(bits)


@dataclass
class DiffSummary:
    videos: int = 0
    frames: int = 0
    differing: list[str] = field(default_factory=list)
    max_abs: float = 0.0
    only_one: int = 0
    only_a: list[str] = field(default_factory=list)  # split/video in A only
    only_b: list[str] = field(default_factory=list)
    estimators: str = ""  # why no values were compared: two estimators' files

    @property
    def agree(self) -> bool:
        return not (self.differing or self.only_a or self.only_b or self.estimators)


def video_list(path: Path) -> list[tuple[str, str]]:
    """(split, video) in file order, from the two small columns."""
    t = pq.read_table(path, columns=["split", "video"], read_dictionary=["split", "video"])
    t = pa.table({c: t[c].cast(pa.string()) for c in ("split", "video")})
    splits = t["split"].to_numpy(zero_copy_only=False)
    vids = t["video"].to_numpy(zero_copy_only=False)
    at = np.flatnonzero(np.r_[True, (vids[1:] != vids[:-1]) | (splits[1:] != splits[:-1])])
    return [(str(splits[i]), str(vids[i])) for i in at]


def shared_videos(a: Path, b: Path) -> tuple[set[tuple[str, str]], list[str], list[str]]:
    """(the videos both hold, split/video in A only, in B only); refused where the shared ones
    come in another order (not files as `merge` writes them, so they cannot be walked together)."""
    va, vb = video_list(a), video_list(b)
    common = set(va) & set(vb)
    if [k for k in va if k in common] != [k for k in vb if k in common]:
        raise ReportError(f"{a} and {b} hold the same videos in another order; both should be "
                          "sorted by split and video as `merge` writes them")
    only_a = [f"{s}/{v}" for s, v in va if (s, v) not in common]
    return common, only_a, [f"{s}/{v}" for s, v in vb if (s, v) not in common]


def names(side: str, x: list[str]) -> str:
    """'N only in A: a, b and 3 more' (at most SHOWN named)."""
    more = f" and {len(x) - SHOWN} more" if len(x) > SHOWN else ""
    return f"{len(x)} only in {side}" + (f": {', '.join(x[:SHOWN])}{more}" if x else "")


def compare_video(split: str, video: str, ta: pa.Table, tb: pa.Table,
                  counts: tuple[str, ...] = ()) -> VideoDiff:
    """Differences between one video's rows in A and in B, aligned on frame number; `counts`: the
    per-frame count columns compared, each named on its own (such as `persons`)."""
    fa, fb = ta["frame"].to_numpy(), tb["frame"].to_numpy()
    common, ia, ib = np.intersect1d(fa, fb, assume_unique=True, return_indices=True)
    d = VideoDiff(split, video, len(fa) - len(common), len(fb) - len(common))
    ta, tb = ta.take(pa.array(ia)), tb.take(pa.array(ib))
    d.status = int(np.sum(ta["status"].to_numpy(zero_copy_only=False)
                          != tb["status"].to_numpy(zero_copy_only=False)))
    d.counts = {c: sum(x != y for x, y in zip(ta[c].to_pylist(), tb[c].to_pylist(), strict=True))
                for c in counts}
    arr_a, arr_b = part_arrays(ta), part_arrays(tb)
    for part in [p for p in arr_a if p in arr_b]:
        a, b = arr_a[part].reshape(len(common), -1), arr_b[part].reshape(len(common), -1)
        pa_, pb_ = ~np.isnan(a[:, 0]), ~np.isnan(b[:, 0])
        both = pa_ & pb_
        diff = np.abs(a[both].astype(np.float64) - b[both])
        same_nan = np.isnan(a[both]) & np.isnan(b[both])
        diff[same_nan] = 0.0
        diff[np.isnan(diff)] = np.inf  # a number against NaN
        d.parts[part] = PartDiff(int(np.sum(pa_ != pb_)), int(both.sum()),
                                 float(diff.max()) if diff.size else 0.0, float(diff.sum()),
                                 int(diff.size), diff.max(axis=1) if diff.size else np.zeros(0))
    return d


def diff_files(a: Path, b: Path, tolerance: float = 0.0,
               report: Callable[[str], None] = print) -> DiffSummary:
    """Compare two keypoints files; report() gets one line per differing video, and one for the
    videos only one of them holds."""
    if tolerance < 0:
        raise ReportError(f"--tolerance must be >= 0, not {tolerance}")
    both = set(open_keypoints(a).schema_arrow.names) & set(open_keypoints(b).schema_arrow.names)
    common, only_a, only_b = shared_videos(a, b)
    out = DiffSummary(only_a=only_a, only_b=only_b)
    fa = declaration_of_columns(open_keypoints(a).schema_arrow.names)
    fb = declaration_of_columns(open_keypoints(b).schema_arrow.names)
    if fa is None or fb is None or fa.name != fb.name:
        what = [f.title or f.name if f else "no family's columns" for f in (fa, fb)]
        out.estimators = (f"made by different estimators (A holds {what[0]}, B {what[1]}): no "
                          "values compared")
        report(f"{a} and {b} were {out.estimators}")
        return out
    # per-frame count and list columns (every hand of a frame), each compared whole and named
    counts = (*fa.counts, *(c for c in fa.lists if c in both))
    cols = ["frame", "status", *(p for p in fa.parts if p in both), *counts]
    if only_a or only_b:
        report(f"videos in one run only: {names('A', only_a)}; {names('B', only_b)}")
    pairs = zip(_shared(a, cols, common), _shared(b, cols, common), strict=True)
    for (sa, va, ta), (sb, vb, tb) in pairs:
        if (sa, va) != (sb, vb):
            raise ReportError(f"the files changed while being compared ({sa}/{va} vs {sb}/{vb})")
        d = compare_video(sa, va, ta, tb, counts)
        out.videos += 1
        out.frames += max(ta.num_rows, tb.num_rows)
        out.max_abs = max([out.max_abs, *(p.max_abs for p in d.parts.values())])
        out.only_one += sum(p.only_one for p in d.parts.values())
        if d.differs(tolerance):
            out.differing.append(f"{sa}/{va}")
            report(d.line(tolerance))
    return out


def _shared(path: Path, cols: list[str], common: set[tuple[str, str]]
            ) -> Iterator[tuple[str, str, pa.Table]]:
    """The file's videos, one at a time, less those the other file does not hold."""
    return (x for x in iter_videos(path, cols) if (x[0], x[1]) in common)


def summary_line(s: DiffSummary, tolerance: float) -> str:
    tol = f"tolerance {tolerance:g}" if tolerance else "tolerance 0: identical values"
    if s.estimators:
        return f"differ: {s.estimators}"
    if s.only_a or s.only_b:
        return (f"differ: the runs hold different videos ({names('A', s.only_a)}; "
                f"{names('B', s.only_b)}); of the {s.videos} both hold, {len(s.differing)} "
                f"differ ({tol}; max |diff| {s.max_abs:.3g})")
    if s.agree:
        return f"agree: {s.videos} videos, {s.frames} frames ({tol}; max |diff| {s.max_abs:.3g})"
    return (f"differ: {len(s.differing)} of {s.videos} videos ({tol}; max |diff| {s.max_abs:.3g}; "
            f"{s.only_one} part detection(s) in one run only)")
