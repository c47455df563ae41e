"""The default tensor set of a whole-body run: `[frames, 133, 3]` (x, y in pixels, score) and a
mask, streamed video by video like Holistic's (extract/outputs/tensors.py); its .pose files and
the TwoStream-SLR and Uni-Sign pkls.

A point is masked True where its score is at least SCORE_THRESHOLD (0.3, the cut rtmlib's own
drawing and result formatting use); rows of frames that were not read are zeros and False. The
tensor's values are keypoints.parquet's as they are: the mask only says which to trust. The
exports have no mask beside them, so a point the mask leaves out is written absent in each
(extract/outputs/declared.py's found_points, the one rule): confidence 0 (masked) in a .pose,
zeros with score 0 in the pkls, as a frame that was not read.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families.wholebody.declaration import (
    DECLARATION,
    WHOLEBODY,
    WHOLEBODY_POINTS,
)
from phoenix_keypoints.extract.keypoints.estimator import Declaration
from phoenix_keypoints.extract.keypoints.schema import column_block
from phoenix_keypoints.extract.outputs.declared import video_tensor as declared_tensor
from phoenix_keypoints.extract.outputs.export import (
    PHOENIX_FPS,
    pose_install_hint,
    pose_values,
    video_fps,
    video_size,
    write_file,
    zero_absent,
)
from phoenix_keypoints.extract.outputs.tensors import (
    TensorsError,
    iter_videos,
)


def video_tensor(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """One video's rows -> ([T, 133, 3] float32 x, y, score; [T, 133] score >= threshold)."""
    return declared_tensor(table, DECLARATION)


def found_values(table: pa.Table) -> np.ndarray:
    """One video's [T, 133, 3] as the pkls hold them: an absent point zeros (zero_absent)."""
    return zero_absent(*video_tensor(table))


def write_pose_files(keypoints: Path, out_dir: Path, fps: float = PHOENIX_FPS,
                     root: Path | None = None) -> int:
    """One `<out_dir>/<split>/<video>.pose` per video with pose-format's own COCO-WholeBody header
    (BODY 23 with the feet, FACE 68, LEFT_HAND, RIGHT_HAND: 133 points in this order, XYC), so its
    readers, normalisation and visualiser take it as they take MMPose output. x, y in pixels;
    confidence = the score, 0 (masked) where the point is absent (a frame not read, a score under
    the threshold: pose_values). Each at its source's rate, as the Holistic export (video_fps)."""
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
    is False), as write_pose_files writes it and extract.clip's Keypoints.to_pose gives it: a
    point the declaration calls absent has confidence 0 (pose_values)."""
    try:
        from pose_format import Pose
        from pose_format.numpy.pose_body import NumPyPoseBody
        from pose_format.pose_header import PoseHeader, PoseHeaderDimensions
        from pose_format.utils.cocowholebody133_header import cocowholebody_components
    except ImportError:
        raise TensorsError(pose_install_hint()) from None
    header = PoseHeader(version=0.2, dimensions=PoseHeaderDimensions(width, height, 0),
                        components=cocowholebody_components())
    data, conf = pose_values(DECLARATION, vals.reshape(-1, WHOLEBODY_POINTS, 3), present)
    return Pose(header, NumPyPoseBody(fps=fps, data=data, confidence=conf))


def hands_pose(decl: Declaration, vals: np.ndarray, present: np.ndarray, width: int, height: int,
               fps: float) -> Any:
    """A hand run's .pose: the declaration's values of the signer's two hands ([T, 42, 3], as
    extract.outputs.export.declared_pose writes any family's) under pose-format's own two hand
    components, LEFT_HAND and RIGHT_HAND of its COCO-WholeBody header (hand_0 ... hand_20, the
    wrist first, as these 21 points; its limbs), so its hand tools (normalize_hands_3d,
    hands_components) read them."""
    from phoenix_keypoints.extract.outputs.export import declared_pose

    pose = declared_pose(decl, vals, present, width, height, fps)
    from pose_format.utils.cocowholebody133_header import cocowholebody_components

    sides = {c.name: c for c in cocowholebody_components()}
    pose.header.components = [sides["LEFT_HAND"], sides["RIGHT_HAND"]]
    return pose


def write_twostream_pkl(keypoints: Path, dest: Path) -> int:
    """TwoStream-SLR's `keypoint_file` (FangyunWei/SLRT, TwoStreamNetwork/dataset/Dataset.py,
    `load_keypoints`): one pickle of {"<split>/<video>": {"keypoints": float32 [T, 133, 3]}}, x, y in
    pixels and the score, in COCO-WholeBody order (its HRNet's, whose indices its Hrnet_Part2index
    takes), T the video's frames (its loader indexes them by frame). Frames not read, and points
    the run's presence rule leaves out (a score under 0.3): zeros with score 0 (zero_absent). The
    names are its annotation files' `name` (PHOENIX-2014-T: `dev/11August_2010_Wednesday_tagesschau-2`).
    Held in memory while written: about 1.6 KB a frame."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for split, video, table in iter_videos(keypoints, [WHOLEBODY]):
        out[f"{split}/{video}"] = {"keypoints": found_values(table)}
    write_file(Path(dest), lambda f: pickle.dump(out, f, protocol=4))
    return len(out)


def write_unisign_pkls(keypoints: Path, out_dir: Path, flat: bool = False) -> int:
    """Uni-Sign's pose files (ZechengLi19/Uni-Sign, datasets.py, `load_pose`, as its
    demo/pose_extraction.py writes them with rtmlib): one `<out_dir>/<split>/<video>.pkl` per video,
    {"keypoints": [float32 [1, 133, 2] per frame], "scores": [float32 [1, 133] per frame]}, x and y
    divided by the frame's width and height, the one person the run keeps (Uni-Sign reads person 0).
    Frames not read, and points the run's presence rule leaves out: zeros and score 0 (below its
    0.3 cut; zero_absent). flat: `<out_dir>/<video>.pkl`, every
    split in one folder, as S2T_Dataset reads CSL_Daily (pose_dirs[dataset], no phase joined); a
    run's video names are unique across its splits (the corpus readers refuse one listed twice)."""
    n = 0
    for split, video, table in iter_videos(keypoints, ["width", "height", WHOLEBODY]):
        vals = found_values(table)
        width, height = video_size(table)
        w = np.array([x or width for x in table["width"].to_pylist()], np.float32)
        h = np.array([x or height for x in table["height"].to_pylist()], np.float32)
        xy = vals[:, :, :2] / np.stack([w, h], axis=1)[:, None, :]
        data = {"keypoints": [xy[i][None] for i in range(len(xy))],
                "scores": [vals[i, :, 2][None] for i in range(len(vals))]}
        write_file(Path(out_dir) / ("" if flat else split) / f"{video}.pkl",
                   lambda f, d=data: pickle.dump(d, f, protocol=4))
        n += 1
    return n
