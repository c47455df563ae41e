"""The landmark layout of Kaggle's Isolated Sign Language Recognition competition, which many open
sign models read: one parquet per video, one row per landmark per frame.

Each frame has 543 rows in the competition's order: face 0-467, left_hand 0-20, pose 0-32,
right_hand 0-20; columns frame, row_id ("<frame>-<type>-<landmark_index>"), type, landmark_index,
x, y, z (float64, as the competition's files). A part not detected has its rows with NaN x, y, z.
The layout has no room for a refined face's 10 iris points (468-477) nor for pose visibility or
pose_world: they are left out (the command says so). Holistic's alone: its `EXPORTS` "islr".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families.holistic.points import PARTS
from phoenix_keypoints.extract.outputs.export import write_file
from phoenix_keypoints.extract.outputs.tensors import iter_videos, part_blocks

ORDER = ("face", "left_hand", "pose", "right_hand")  # the competition's row order within a frame
POINTS_PER_FRAME = sum(PARTS[p][0] for p in ORDER)  # 543
_TYPES = np.concatenate([np.full(PARTS[p][0], p, dtype=object) for p in ORDER])
_INDEX = np.concatenate([np.arange(PARTS[p][0], dtype=np.int16) for p in ORDER])
SCHEMA = pa.schema([("frame", pa.int16()), ("row_id", pa.string()), ("type", pa.string()),
                    ("landmark_index", pa.int16()), ("x", pa.float64()), ("y", pa.float64()),
                    ("z", pa.float64())])


def islr_table(rows: pa.Table) -> pa.Table:
    """One video's keypoint rows -> its rows in the competition's layout (543 per frame)."""
    frames = rows.column("frame").to_numpy()
    if frames.size and frames.max() > np.iinfo(np.int16).max:
        raise ValueError(f"frame {frames.max()} does not fit the layout's int16 frame column")
    blocks = part_blocks(rows, ORDER, PARTS)  # PARTS' point counts: a refined face's first 468
    xyz = np.concatenate([np.where(present[:, None, None], block[:, :, :3], np.nan)
                          for block, present in (blocks[p] for p in ORDER)], axis=1)
    n = len(frames)
    frame = np.repeat(frames.astype(np.int16), POINTS_PER_FRAME)
    kind = pa.array(np.tile(_TYPES, n), pa.string())
    index = np.tile(_INDEX, n)
    row_id = pc.binary_join_element_wise(pc.cast(pa.array(frame), pa.string()), kind,
                                         pc.cast(pa.array(index), pa.string()), "-")
    flat = xyz.reshape(-1, 3).astype(np.float64)
    return pa.table([pa.array(frame), row_id, kind, pa.array(index), flat[:, 0], flat[:, 1],
                     flat[:, 2]], schema=SCHEMA)


def write_islr_files(keypoints: Path, out_dir: Path) -> int:
    """`<out_dir>/<split>/<video>.parquet` per video; returns how many were written."""
    n = 0
    for split, video, rows in iter_videos(keypoints, ["frame", *ORDER]):
        table = islr_table(rows)
        write_file(Path(out_dir) / split / f"{video}.parquet",
                   lambda f, t=table: pq.write_table(t, f, compression="zstd"))
        n += 1
    return n
