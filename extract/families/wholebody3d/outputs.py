"""The .pose export of a 3D whole-body run: pose-format's own COCO-WholeBody components (BODY 23
with the feet, FACE 68, LEFT_HAND, RIGHT_HAND: 133 points in this order) with the three value
channels its header allows, XYZC: x, y the 2D point in frame pixels (so pose-format's visualiser
draws it over the video), z rtmlib's z3d (the model's relative depth, no unit of length),
confidence the score, 0 (masked) where the point is absent: a frame not read, or a score under
the declaration's threshold (extract/outputs/export.py's pose_values, the one rule of every
export). The header's depth is 0, as pose-format's own readers write it for MediaPipe's z: z is
not in pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families.wholebody3d.declaration import (
    DECLARATION,
    WHOLEBODY3D,
    WHOLEBODY3D_CHANNELS,
)
from phoenix_keypoints.extract.keypoints.schema import column_block
from phoenix_keypoints.extract.outputs.export import (
    pose_install_hint,
    pose_values,
    video_fps,
    video_size,
    write_file,
)
from phoenix_keypoints.extract.outputs.tensors import TensorsError, iter_videos

POINTS = 133
XYZ = [WHOLEBODY3D_CHANNELS.index(c) for c in ("x", "y", "z3d")]


def pose_of_values(vals: np.ndarray, present: np.ndarray, width: int, height: int,
                   fps: float) -> Any:
    """A pose-format Pose of one video's [T, 133, 6] values (zeros where `present` is False), as
    write_pose_files writes it and extract_keypoints' Keypoints.to_pose gives it; a point the
    declaration calls absent has confidence 0 (pose_values)."""
    try:
        from pose_format import Pose
        from pose_format.numpy.pose_body import NumPyPoseBody
        from pose_format.pose_header import PoseHeader, PoseHeaderComponent, PoseHeaderDimensions
        from pose_format.utils.cocowholebody133_header import cocowholebody_components
    except ImportError:
        raise TensorsError(pose_install_hint()) from None
    components = [PoseHeaderComponent(c.name, c.points, c.limbs, c.colors, "XYZC")
                  for c in cocowholebody_components()]
    header = PoseHeader(version=0.2, dimensions=PoseHeaderDimensions(width, height, 0),
                        components=components)
    data, conf = pose_values(DECLARATION, vals.reshape(-1, POINTS, len(WHOLEBODY3D_CHANNELS)),
                             present, XYZ)
    return Pose(header, NumPyPoseBody(fps=fps, data=data, confidence=conf))


def write_pose_files(keypoints: Path, out_dir: Path, fps: float, root: Path | None = None) -> int:
    """One `<out_dir>/<split>/<video>.pose` per video (pose_of_values), each at its source's rate."""
    n = 0
    have = pq.ParquetFile(keypoints).schema_arrow.names
    columns = ["width", "height", *[c for c in ("image", "time_s") if c in have], WHOLEBODY3D]
    for split, video, table in iter_videos(keypoints, columns):
        width, height = video_size(table)
        block, present = column_block(table.column(WHOLEBODY3D),
                                      POINTS * len(WHOLEBODY3D_CHANNELS))
        pose = pose_of_values(block, present, width, height, video_fps(table, root, fps))
        write_file(Path(out_dir) / split / f"{video}.pose", pose.write)
        n += 1
    return n
