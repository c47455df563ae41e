"""Holistic's .pose export: pose-format's own Holistic components (POSE_LANDMARKS, FACE_LANDMARKS
with the iris when refined, the hands, POSE_WORLD_LANDMARKS), filled as pose-format's MediaPipe
loader fills them: `export --format pose` (write_pose_files) and extract_keypoints' to_pose
(pose_of_blocks). The generic parts (frame size, rate, the atomic write) are
extract/outputs/export.py's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families.holistic.declaration import declaration
from phoenix_keypoints.extract.families.holistic.points import PARTS, file_layout
from phoenix_keypoints.extract.outputs.declared import found_points
from phoenix_keypoints.extract.outputs.export import (
    PHOENIX_FPS,
    pose_install_hint,
    video_fps,
    video_size,
    write_file,
)
from phoenix_keypoints.extract.outputs.tensors import TensorsError, iter_videos, part_blocks

# Our columns -> pose-format's holistic component names, in its order.
HOLISTIC_COMPONENTS = {"pose": "POSE_LANDMARKS", "face": "FACE_LANDMARKS",
                       "left_hand": "LEFT_HAND_LANDMARKS", "right_hand": "RIGHT_HAND_LANDMARKS",
                       "pose_world": "POSE_WORLD_LANDMARKS"}



def _pose_format():
    try:
        from pose_format import Pose
        from pose_format.numpy.pose_body import NumPyPoseBody
        from pose_format.pose_header import PoseHeader, PoseHeaderDimensions
        from pose_format.utils.holistic import holistic_components
    except ImportError:
        if importlib.util.find_spec("pose_format") is None:
            raise TensorsError(pose_install_hint()) from None
        # pose-format builds its holistic header from mediapipe's own tables, at import
        here = f"Python {sys.version_info.major}.{sys.version_info.minor}"
        raise TensorsError(f"the pose export needs mediapipe (pose-format's holistic header imports "
                           f"it), which is not installed in this {here}; mediapipe 0.10.21 has "
                           "wheels for Python 3.10-3.12 only. Export from such an environment; the "
                           "pkl, islr, legacy-pkl and legacy-npz exports need no mediapipe.") from None
    return Pose, NumPyPoseBody, PoseHeader, PoseHeaderDimensions, holistic_components



def pose_arrays(table: pa.Table, width: int, height: int,
                parts: dict[str, tuple[int, int]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One video's rows -> (data [T, 1, points, 3] float32, confidence [T, 1, points] float32).

    pose-format's holistic layout, as its own MediaPipe loader fills it: x, y in pixels, z as
    MediaPipe gives it (POSE_WORLD_LANDMARKS too: that loader scales world x, y by the frame
    size as well), confidence = visibility for body points and 1 for face and hand points; 0
    (and masked) where nothing was detected. `parts` defaults to the 543-point layout.
    """
    parts = parts or dict(PARTS)
    return blocks_to_pose_arrays(part_blocks(table, list(parts), parts), width, height)



def blocks_to_pose_arrays(blocks: dict[str, tuple[np.ndarray, np.ndarray]], width: int,
                          height: int) -> tuple[np.ndarray, np.ndarray]:
    """{part: (values [T, points, channels], present [T])} -> pose_arrays' (data, confidence): a
    point the declaration's presence rule leaves out (found_points: Holistic's is its part's list
    missing) zeros with confidence 0."""
    data, conf = [], []
    n, decl = 0, declaration(None)
    for block, present in blocks.values():
        n = len(block)
        found = found_points(decl, block, present)
        xyz = block[:, :, :3].astype(np.float32) * np.float32([width, height, 1])
        c = block[:, :, 3] if block.shape[2] == 4 else np.ones(block.shape[:2], np.float32)
        xyz[~found] = 0
        data.append(xyz)
        conf.append(np.where(found, c, 0).astype(np.float32))
    return (np.concatenate(data, 1).reshape(n, 1, -1, 3),
            np.concatenate(conf, 1).reshape(n, 1, -1))


def pose_of_blocks(parts: dict[str, np.ndarray], width: int, height: int, fps: float) -> Any:
    """A pose-format Pose of one clip's arrays ({part: [T, points, channels]}, NaN where not
    detected), laid out as the .pose export writes it (extract.clip's Keypoints.to_pose)."""
    Pose, NumPyPoseBody, PoseHeader, PoseHeaderDimensions, holistic_components = _pose_format()
    extra_face = parts["face"].shape[1] - PARTS["face"][0]
    by_name = {c.name: c for c in holistic_components("XYZC", extra_face)}
    header = PoseHeader(version=0.2, dimensions=PoseHeaderDimensions(width, height, 0),
                        components=[by_name[HOLISTIC_COMPONENTS[p]] for p in parts])
    blocks = {p: (np.nan_to_num(a), ~np.isnan(a).all(axis=(1, 2))) for p, a in parts.items()}
    data, conf = blocks_to_pose_arrays(blocks, width, height)
    return Pose(header, NumPyPoseBody(fps=fps, data=data, confidence=conf))



def write_pose_files(keypoints: Path, out_dir: Path, fps: float = PHOENIX_FPS,
                     root: Path | None = None) -> int:
    """One `<out_dir>/<split>/<video>.pose` per video from keypoints.parquet; returns how many.
    Each at its source's rate (video_fps: the video file under `root`, the dataset's folder), frame
    folders at `fps`."""
    Pose, NumPyPoseBody, PoseHeader, PoseHeaderDimensions, holistic_components = _pose_format()
    parts = file_layout(keypoints)
    extra_face = parts["face"][0] - PARTS["face"][0]  # 10 iris points when refined
    by_name = {c.name: c for c in holistic_components("XYZC", extra_face)}
    components = [by_name[HOLISTIC_COMPONENTS[p]] for p in parts]
    have = pq.ParquetFile(keypoints).schema_arrow.names  # (time_s: a file from before videos lacks it)
    columns = ["width", "height", *[c for c in ("image", "time_s") if c in have], *parts]
    n = 0
    for split, video, table in iter_videos(keypoints, columns):
        width, height = video_size(table)
        header = PoseHeader(version=0.2, dimensions=PoseHeaderDimensions(width, height, 0),
                            components=components)
        data, conf = pose_arrays(table, width, height, parts)
        body = NumPyPoseBody(fps=video_fps(table, root, fps), data=data, confidence=conf)
        write_file(Path(out_dir) / split / f"{video}.pose", Pose(header, body).write)
        n += 1
    return n


