"""The older pipeline's files, made from keypoints.parquet: its pkl and its model-input npz.

The contract (../shared/docs/legacy-format.md) is what that pipeline's own readers expect: one
pickled dict with the three splits (parallel lists keypoints / image_paths / video_ids, one entry
per frame in which anything was detected, videos by folder name, frames by file name), stats,
keypoint_info and dataset_info; and per split `<split>_keypoints.npz` ([N, 143, 3] float32, zeros
where a part was not detected, image_paths, video_ids), as its prepare_model_input makes it.

Both are written in two streamed passes over each split's rows, one video in memory at a time:
the first makes the frames, the second the paths (only the `image` column). Between them this
keeps, per video, only which of its rows were kept (a small integer array).
"""

from __future__ import annotations

import os
import pickle
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families.holistic.points import LEGACY_FACE, point_table
from phoenix_keypoints.extract.keypoints.points import PointSet
from phoenix_keypoints.extract.outputs.tensors import (
    NpyWriter,
    TensorsError,
    TensorSpec,
    iter_videos,
    video_tensor,
)
from phoenix_keypoints.extract.sources import source_of_image
from phoenix_keypoints.extract.sources.base import parse_image

SPLITS = ("train", "dev", "test")  # the pkl always has all three, in this order
# (name, first point, points) of the legacy-143 layout, the frame dict's parts in their order
REGIONS = (("face", 0, 68), ("left_hand", 68, 21), ("right_hand", 89, 21), ("pose", 110, 33))
SPEC = TensorSpec(PointSet.preset("legacy-143", point_table()))
KEYPOINT_INFO: dict[str, Any] = {
    "face": {"num_points": 68, "description": "68 of MediaPipe's 468 face-mesh points: outline 17, "
             "right brow 5, left brow 5, nose 9, right eye 6, left eye 6, outer lips 12, inner lips "
             f"8 (mesh indices {', '.join(map(str, LEGACY_FACE))})"},
    "left_hand": {"num_points": 21, "description": "MediaPipe hand landmarks of the signer's own left "
                  "hand (Holistic's handedness)"},
    "right_hand": {"num_points": 21, "description": "MediaPipe hand landmarks of the signer's own "
                   "right hand (Holistic's handedness)"},
    "pose": {"num_points": 33, "description": "MediaPipe pose landmarks (x, y, z; no visibility)"},
    "total_points": 143,
}
NPZ_ARRAYS = ("keypoints", "image_paths", "video_ids")
_PROTOCOL = 4  # framed: the C pickler hands each 64 KiB frame to the file as it fills


@dataclass
class SplitPass:
    """What the first pass over a split learned: kept rows per video, counts, longest strings."""

    videos: list[tuple[str, np.ndarray]] = field(default_factory=list)  # (video, kept rows, ordered)
    total: int = 0
    success: int = 0
    longest_path: int = 1
    longest_video: int = 1


def _split_row_groups(keypoints: Path, split: str) -> list[int]:
    """Row groups that may hold `split` (by the `split` column's statistics; all without them)."""
    md = pq.ParquetFile(keypoints).metadata
    col = md.schema.names.index("split")
    out = []
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(col).statistics
        if st is None or not st.has_min_max or st.min <= split <= st.max:
            out.append(g)
    return out


def split_videos(keypoints: Path, split: str, columns: list[str]) -> Iterator[tuple[str, Any]]:
    """(video, its rows) of one split in file order, which is by video name (the plan's order)."""
    groups = _split_row_groups(keypoints, split)
    for s, video, table in iter_videos(keypoints, columns, row_groups=groups):
        if s == split:
            yield video, table


def _image_path(dataset_path: str, rel: str) -> str:
    """As the older script built it: str(Path(dataset_path) / features/.../split/video/file). A
    frame read from an archive is named by its path through the archive file, as --dataset named
    the archive (`R.tar.gz/PHOENIX-2014-T/features/...png`), without the row's `#archive=` tag:
    readers that take the video or frame from the path's last components see what a folder gives.
    A video's frame keeps its `#frame=N`, the one thing that tells its frames apart."""
    ref = parse_image(rel)
    path = f"{ref.path}#{ref.fragment}={ref.detail}" if source_of_image(rel) == "video" else ref.path
    return str(Path(dataset_path) / PurePosixPath(path))


def kept_rows(table: Any) -> np.ndarray:
    """Row positions of a video's frames with anything detected, ordered by frame file name."""
    names = table.column("image").to_pylist()
    order = sorted(range(len(names)), key=lambda i: PurePosixPath(parse_image(names[i]).path).name)
    present = np.zeros(len(names), bool)
    for name, _, _ in REGIONS:
        present |= ~np.asarray(table.column(name).is_null(), bool)
    return np.array([i for i in order if present[i]], np.int32)


def first_pass(keypoints: Path, split: str, dataset_path: str,
               done: SplitPass) -> Iterator[tuple[np.ndarray, np.ndarray, Any]]:
    """Per video: ([kept, 143, 3] float32, [kept, 143] detected, its kept rows), noting them in done."""
    cols = ["image", "width", "height", *(name for name, _, _ in REGIONS)]
    for video, table in split_videos(keypoints, split, cols):
        rows = kept_rows(table)
        kept = table.take(rows)
        done.videos.append((video, rows))
        done.total += table.num_rows
        done.success += len(rows)
        if len(rows):  # as np.array(video_ids) sizes its strings: only ids that are in it
            done.longest_video = max(done.longest_video, len(video))
        for rel in kept.column("image").to_pylist():
            done.longest_path = max(done.longest_path, len(_image_path(dataset_path, rel)))
        vals, det = video_tensor(kept, SPEC)[:2]
        yield np.asarray(vals, np.float32), det, kept


def paths_pass(keypoints: Path, split: str, dataset_path: str,
               done: SplitPass) -> Iterator[tuple[str, list[str]]]:
    """Per video, after first_pass: (video, the image paths of its kept frames, in order)."""
    videos = iter(done.videos)
    for video, table in split_videos(keypoints, split, ["image"]):
        name, rows = next(videos, (None, None))
        if name != video or rows is None:
            raise LegacyError(f"{keypoints} changed while it was exported (video {video}); "
                              "export again.")
        images = table.column("image").to_pylist()
        yield video, [_image_path(dataset_path, images[i]) for i in rows]
    if next(videos, None) is not None:
        raise LegacyError(f"{keypoints} changed while it was exported; export again.")


class LegacyError(TensorsError):
    """The older layout cannot be written as asked; the message says what to do (exit 2)."""


def frame_dicts(vals: np.ndarray, det: np.ndarray, kept: Any) -> Iterator[dict[str, Any]]:
    """The older script's per-frame dicts: each part float32 (n, 3) or None; image_shape (h, w)."""
    heights = kept.column("height").to_pylist()
    widths = kept.column("width").to_pylist()
    for i in range(len(vals)):
        d: dict[str, Any] = {name: vals[i, o : o + n].copy() if det[i, o] else None
                             for name, o, n in REGIONS}
        d["image_shape"] = (int(heights[i]), int(widths[i]))
        yield d


class _Streamed:
    """Pickles as a plain list, or dict, whose items are made only while it is being pickled.

    __reduce__ returns (list, (), None, items) or (dict, (), None, None, items): the pickler writes
    an empty list (dict) and then APPENDS (SETITEMS) batches drawn from the iterator as it goes,
    so pickle.load returns an ordinary list (dict) and the writer never holds more than a batch.
    """

    def __init__(self, kind: type, make: Callable[[], Iterator[Any]]) -> None:
        self.kind, self.make = kind, make

    def __reduce__(self) -> tuple:
        if self.kind is dict:
            return dict, (), None, None, self.make()
        return list, (), None, self.make()


def _split_entry(keypoints: Path, split: str, dataset_path: str, done: SplitPass) -> dict[str, Any]:
    def frames() -> Iterator[dict[str, Any]]:
        for vals, det, kept in first_pass(keypoints, split, dataset_path, done):
            yield from frame_dicts(vals, det, kept)

    def paths() -> Iterator[str]:
        for _, p in paths_pass(keypoints, split, dataset_path, done):
            yield from p

    def ids() -> Iterator[str]:
        for video, rows in done.videos:
            yield from [video] * len(rows)

    return {"keypoints": _Streamed(list, frames), "image_paths": _Streamed(list, paths),
            "video_ids": _Streamed(list, ids)}


def _stats(passes: dict[str, SplitPass], seconds: dict[str, float]) -> Iterator[tuple[str, Any]]:
    for split in SPLITS:
        p = passes[split]
        yield split, {"total": p.total, "success": p.success, "failed": p.total - p.success,
                      "total_time": float(seconds.get(split, 0.0))}


def write_legacy_pkl(keypoints: Path, path: Path, dataset_info: dict[str, Any],
                     seconds: dict[str, float]) -> dict[str, dict[str, int]]:
    """Write the older script's pkl from keypoints.parquet, video by video; returns its stats.

    dataset_info: name, source_path (the dataset path as the user gave it: image_paths start with
    it), splits, processing_info. seconds: each split's total_time. Written under a temp name,
    renamed into place at the end.
    """
    keypoints, path = Path(keypoints), Path(path)
    source = str(dataset_info["source_path"])
    passes = {s: SplitPass() for s in SPLITS}
    top: dict[str, Any] = {s: _split_entry(keypoints, s, source, passes[s]) for s in SPLITS}
    top["stats"] = _Streamed(dict, lambda: _stats(passes, seconds))
    top["keypoint_info"] = KEYPOINT_INFO
    top["dataset_info"] = dataset_info
    _atomic(path, lambda f: _dump(top, f))
    return {s: {"total": p.total, "success": p.success, "failed": p.total - p.success}
            for s, p in passes.items()}


def _dump(obj: Any, f: Any) -> None:
    p = pickle.Pickler(f, protocol=_PROTOCOL)
    p.fast = True  # no memo: nothing is shared, and a memo would keep every frame alive
    p.dump(obj)


def _atomic(path: Path, write: Callable[[Any], None]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- model input ------------------------------------------------------------------------------

def _split_rows(keypoints: Path, split: str) -> int:
    n = 0
    for batch in pq.ParquetFile(keypoints).iter_batches(columns=["split"]):
        n += int(np.sum(batch.column(0).to_numpy(zero_copy_only=False) == split))
    return n


def write_legacy_npz(keypoints: Path, out_dir: Path, dataset_path: str) -> dict[str, int]:
    """`<split>_keypoints.npz` per split with frames: keypoints [N, 143, 3] float32 (zeros where
    a part was not detected), image_paths, video_ids; the frames of the pkl, in its order.

    Each array is streamed to a temp .npy (the strings once their longest is known), then stored
    in the zip deflated, as the pipeline's np.savez_compressed does. Returns frames per split
    written (a split without any is skipped: the pipeline's own step cannot stack an empty list
    either).
    """
    keypoints, out_dir = Path(keypoints), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for split in SPLITS:
        capacity = _split_rows(keypoints, split)
        if capacity:
            n = _npz_split(keypoints, out_dir, split, dataset_path, capacity)
            if n:
                written[split] = n
    return written


def _npz_split(keypoints: Path, out_dir: Path, split: str, dataset_path: str, capacity: int) -> int:
    done = SplitPass()
    tmp = out_dir / f".{split}.tmp"
    tmp.mkdir(exist_ok=True)
    try:
        kp = NpyWriter(tmp / "keypoints.npy", np.dtype(np.float32), (capacity, 143, 3))
        for vals, _, _ in first_pass(keypoints, split, dataset_path, done):
            kp.append(vals)
        kp.close(exact=False)
        if done.success:
            _strings(tmp, keypoints, split, dataset_path, done)
            _atomic(out_dir / f"{split}_keypoints.npz", lambda f: _zip(f, tmp, NPZ_ARRAYS))
        return done.success
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def _strings(tmp: Path, keypoints: Path, split: str, dataset_path: str, done: SplitPass) -> None:
    paths = NpyWriter(tmp / "image_paths.npy", np.dtype(f"<U{done.longest_path}"), (done.success,))
    ids = NpyWriter(tmp / "video_ids.npy", np.dtype(f"<U{done.longest_video}"), (done.success,))
    for video, p in paths_pass(keypoints, split, dataset_path, done):
        if p:
            paths.append(np.array(p, paths.dtype))
            ids.append(np.full(len(p), video, ids.dtype))
    paths.close()
    ids.close()


def _zip(f: Any, tmp: Path, names: tuple[str, ...]) -> None:
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as z:
        for name in names:
            z.write(tmp / f"{name}.npy", f"{name}.npy")
