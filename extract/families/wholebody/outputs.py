"""The default tensor set of a whole-body run: `[frames, 133, 3]` (x, y in pixels, score) and a
mask, streamed video by video like Holistic's (extract/outputs/tensors.py).

A point is masked True where its score is at least SCORE_THRESHOLD (0.3, the cut rtmlib's own
drawing and result formatting use); rows of frames that were not read are zeros and False. The
values are keypoints.parquet's as they are: the mask only says which to trust.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from extract.keypoints.estimator import (
    SCORE_THRESHOLD,
    WHOLEBODY,
    WHOLEBODY_NAMES,
    WHOLEBODY_PARTS,
    WHOLEBODY_POINTS,
)
from extract.keypoints.schema import column_block
from extract.outputs.export import (
    PHOENIX_FPS,
    pose_install_hint,
    video_fps,
    video_size,
    write_file,
)
from extract.outputs.tensors import (
    POINTS_JSON,
    TENSORS_FORMAT,
    NpyWriter,
    TensorsError,
    TensorSetWriter,
    _install,
    iter_videos,
    split_index,
    tag_dir,
)

UNITS = ("x, y: pixels of the frame (origin top left), as rtmlib returns them; score: the pose "
         "model's SimCC confidence")


def video_tensor(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """One video's rows -> ([T, 133, 3] float32 x, y, score; [T, 133] score >= threshold)."""
    block, present = column_block(table.column(WHOLEBODY), WHOLEBODY_POINTS * 3)
    vals = block.reshape(-1, WHOLEBODY_POINTS, 3)
    return vals, present[:, None] & (vals[:, :, 2] >= SCORE_THRESHOLD)


def describe_points() -> list[dict[str, Any]]:
    """points.json's entry per point: index, part, index in the part, name."""
    out: list[dict[str, Any]] = []
    for part, (lo, hi) in WHOLEBODY_PARTS.items():
        for i in range(lo, hi):
            out.append({"k": i, "index": i, "part": part, "part_index": i - lo,
                        "name": f"{part}.{WHOLEBODY_NAMES[i]}"})
    return out


class WholebodyTensorWriter(TensorSetWriter):
    """The default set of a whole-body run (tensors/ itself), same files as Holistic's."""

    def __init__(self, out_dir: Path, capacity: Mapping[str, int],
                 corpus: Mapping[str, Mapping[str, str]] | None = None) -> None:
        super().__init__(out_dir, capacity, None, corpus)

    @property
    def columns(self) -> list[str]:
        return [WHOLEBODY]

    def add_video(self, split: str, video: str, table: pa.Table) -> None:
        if split not in self.arrays:
            rows = self.capacity.get(split, 0)
            self.arrays[split] = NpyWriter(self.tmp / f"{split}.npy", np.dtype(np.float32),
                                           (rows, WHOLEBODY_POINTS, 3))
            self.masks[split] = NpyWriter(self.tmp / f"{split}.mask.npy", np.dtype(np.bool_),
                                          (rows, WHOLEBODY_POINTS))
            self.videos[split] = []
        vals, mask = video_tensor(table)
        self.arrays[split].append(vals)
        self.masks[split].append(mask)
        self.videos[split].append((video, len(vals), None))

    def close(self, source: Path, exact: bool = True) -> dict[str, int]:
        frames = {}
        for split in self.arrays:
            self.arrays[split].close(exact)
            self.masks[split].close(exact)
            idx, _ = self._index(split)
            frames[split] = self.arrays[split].rows
            pq.write_table(idx, self.tmp / f"{split}.index.parquet")
        meta = points_meta(frames, {s: len(v) for s, v in self.videos.items()}, source)
        (self.tmp / POINTS_JSON).write_text(json.dumps(meta, indent=2) + "\n")
        _install(self.tmp, tag_dir(self.out_dir, ""), is_root=True)
        return frames


def points_meta(frames: Mapping[str, int], videos: Mapping[str, int],
                keypoints: Path) -> dict[str, Any]:
    """The set's points.json: what each of the 133 points is and how the values were made."""
    st = keypoints.stat()
    return {
        "format": TENSORS_FORMAT,
        "tag": "",
        "estimator": WHOLEBODY,
        "preset": "wholebody-133",
        "normalize": "none", "fill": "zero", "max_gap": None, "dtype": "float32", "coords": "image",
        "num_points": WHOLEBODY_POINTS,
        "indices": list(range(WHOLEBODY_POINTS)),
        "points": describe_points(),
        "channels": ["x", "y", "score"],
        "units": UNITS,
        "mask": f"True where the point's score is at least {SCORE_THRESHOLD} (rtmlib's cut); "
                "frames not read are zeros and False",
        "score_threshold": SCORE_THRESHOLD,
        "files": {"array": "<split>.npy", "mask": "<split>.mask.npy", "index": "<split>.index.parquet"},
        "splits": {s: {"frames": int(frames[s]), "videos": int(videos[s])} for s in frames},
        "not_normalized": [],
        "source": {"file": keypoints.name, "bytes": st.st_size,
                   "rows": pq.ParquetFile(keypoints).metadata.num_rows},
    }


def write_wholebody_tensors(keypoints: Path, out_dir: Path,
                            corpus: Mapping[str, Mapping[str, str]] | None = None,
                            batch_size: int = 4096) -> dict[str, int]:
    """The default set of a whole-body keypoints.parquet (a lost tensors/ written again)."""
    index = split_index(keypoints)
    capacity = {s: int(np.sum(t["length"].to_numpy())) if t.num_rows else 0 for s, t in index.items()}
    writer = WholebodyTensorWriter(out_dir, capacity, corpus)
    try:
        for split, video, table in iter_videos(keypoints, writer.columns, batch_size):
            writer.add_video(split, video, table)
        return writer.close(keypoints)
    except BaseException:
        writer.discard()
        raise


def write_pose_files(keypoints: Path, out_dir: Path, fps: float = PHOENIX_FPS,
                     root: Path | None = None) -> int:
    """One `<out_dir>/<split>/<video>.pose` per video with pose-format's own COCO-WholeBody header
    (BODY 23 with the feet, FACE 68, LEFT_HAND, RIGHT_HAND: 133 points in this order, XYC), so its
    readers, normalisation and visualiser take it as they take MMPose output. x, y in pixels;
    confidence = the score, 0 (masked) on frames that were not read. Each at its source's rate, as
    the Holistic export (video_fps)."""
    n = 0
    have = pq.ParquetFile(keypoints).schema_arrow.names
    columns = ["width", "height", *[c for c in ("image", "time_s") if c in have], WHOLEBODY]
    for split, video, table in iter_videos(keypoints, columns):
        width, height = video_size(table)
        block, present = column_block(table.column(WHOLEBODY), WHOLEBODY_POINTS * 3)
        pose = pose_of_values(block.reshape(-1, WHOLEBODY_POINTS, 3), present, width, height,
                              video_fps(table, root, fps))
        write_file(Path(out_dir) / split / f"{video}.pose", pose.write)
        n += 1
    return n


def pose_of_values(vals: np.ndarray, present: np.ndarray, width: int, height: int,
                   fps: float) -> Any:
    """A pose-format Pose of one video's [T, 133, 3] values (x, y, score; zeros where `present`
    is False), as write_pose_files writes it and extract.clip's Keypoints.to_pose gives it."""
    try:
        from pose_format import Pose
        from pose_format.numpy.pose_body import NumPyPoseBody
        from pose_format.pose_header import PoseHeader, PoseHeaderDimensions
        from pose_format.utils.cocowholebody133_header import cocowholebody_components
    except ImportError:
        raise TensorsError(pose_install_hint()) from None
    header = PoseHeader(version=0.2, dimensions=PoseHeaderDimensions(width, height, 0),
                        components=cocowholebody_components())
    vals = vals.reshape(-1, 1, WHOLEBODY_POINTS, 3)
    conf = np.where(present[:, None, None], vals[..., 2], 0).astype(np.float32)
    body = NumPyPoseBody(fps=fps, data=np.ascontiguousarray(vals[..., :2]), confidence=conf)
    return Pose(header, body)


def write_twostream_pkl(keypoints: Path, dest: Path) -> int:
    """TwoStream-SLR's `keypoint_file` (FangyunWei/SLRT, TwoStreamNetwork/dataset/Dataset.py,
    `load_keypoints`): one pickle of {"<split>/<video>": {"keypoints": float32 [T, 133, 3]}}, x, y in
    pixels and the score, in COCO-WholeBody order (its HRNet's, whose indices its Hrnet_Part2index
    takes), T the video's frames (its loader indexes them by frame). Frames not read: zeros. The
    names are its annotation files' `name` (PHOENIX-2014-T: `dev/11August_2010_Wednesday_tagesschau-2`).
    Held in memory while written: about 1.6 KB a frame."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for split, video, table in iter_videos(keypoints, [WHOLEBODY]):
        out[f"{split}/{video}"] = {"keypoints": video_tensor(table)[0]}
    write_file(Path(dest), lambda f: pickle.dump(out, f, protocol=4))
    return len(out)


def write_unisign_pkls(keypoints: Path, out_dir: Path) -> int:
    """Uni-Sign's pose files (ZechengLi19/Uni-Sign, datasets.py, `load_pose`, as its
    demo/pose_extraction.py writes them with rtmlib): one `<out_dir>/<split>/<video>.pkl` per video,
    {"keypoints": [float32 [1, 133, 2] per frame], "scores": [float32 [1, 133] per frame]}, x and y
    divided by the frame's width and height, the one person the run keeps (Uni-Sign reads person 0).
    Frames not read: zeros and score 0 (below its 0.3 cut)."""
    n = 0
    for split, video, table in iter_videos(keypoints, ["width", "height", WHOLEBODY]):
        vals, _ = video_tensor(table)
        width, height = video_size(table)
        w = np.array([x or width for x in table["width"].to_pylist()], np.float32)
        h = np.array([x or height for x in table["height"].to_pylist()], np.float32)
        xy = vals[:, :, :2] / np.stack([w, h], axis=1)[:, None, :]
        data = {"keypoints": [xy[i][None] for i in range(len(xy))],
                "scores": [vals[i, :, 2][None] for i in range(len(vals))]}
        write_file(Path(out_dir) / split / f"{video}.pkl",
                   lambda f, d=data: pickle.dump(d, f, protocol=4))
        n += 1
    return n
