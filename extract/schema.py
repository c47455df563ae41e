"""The keypoint table's schema: one row per frame, the same in every part and in the merged file.

Point counts and value layouts are MediaPipe Holistic's (pose 33 x (x, y, z, visibility), face 468,
hands 21 x (x, y, z)). Landmark arrays are flat float32 lists of exactly points x values, or null
where MediaPipe found nothing. (Plain lists, not Arrow fixed-size lists: pyarrow's Parquet reader
rejects null fixed-size lists in the versions that still run on numpy 1.)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# name -> (points, values per point); order is the tensors' point order.
PARTS: dict[str, tuple[int, int]] = {
    "pose": (33, 4),
    "face": (468, 3),
    "left_hand": (21, 3),
    "right_hand": (21, 3),
}
NUM_POINTS = sum(n for n, _ in PARTS.values())  # 543

# Where each part's points start in the [543, 3] tensor layout.
OFFSETS: dict[str, int] = {}
_o = 0
for _name, (_n, _) in PARTS.items():
    OFFSETS[_name] = _o
    _o += _n
del _o, _name, _n

# The columns that say what each row was made from, in the order extract/provenance.py reads them.
PROVENANCE_COLUMNS: tuple[str, ...] = ("image", "file_size", "file_mtime_ns", "file_sha256")

SCHEMA = pa.schema(
    [
        pa.field("split", pa.string(), nullable=False),
        pa.field("video", pa.string(), nullable=False),
        pa.field("frame", pa.int32(), nullable=False),
        # Presentation time in seconds, for frames of a video file (null for frame files).
        pa.field("time_s", pa.float64()),
        pa.field("image", pa.string(), nullable=False),
        pa.field("width", pa.int32()),
        pa.field("height", pa.int32()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("note", pa.string()),
        # What the row was made from (extract/frames.py): null where the bytes could not be read.
        pa.field("file_size", pa.int64()),
        pa.field("file_mtime_ns", pa.int64()),
        pa.field("file_sha256", pa.string()),
    ]
    + [pa.field(name, pa.list_(pa.float32())) for name in PARTS]
)


def part_column(block: np.ndarray, present: np.ndarray, width: int) -> pa.Array:
    """A float32 list column from a [rows, width] block; rows where present is False are null.

    Built from one contiguous block (not per-row lists): O(1) Python calls per chunk, not per frame.
    """
    values = pa.array(np.ascontiguousarray(block[present], np.float32).reshape(-1), pa.float32())
    offsets = pa.array(np.r_[0, np.cumsum(present.astype(np.int32) * width)].astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, mask=pa.array(~present, pa.bool_()))


def column_block(col: pa.ChunkedArray | pa.Array, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A landmark column -> (float32 [rows, width], 0 in null rows; bool [rows], True if present)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(arr)
    present = ~np.asarray(arr.is_null(), dtype=bool)
    block = np.zeros((n, width), np.float32)
    flat = np.asarray(arr.flatten(), dtype=np.float32)
    if flat.size != int(present.sum()) * width:
        raise ValueError(f"landmark lists of {flat.size / max(1, present.sum()):g} values, "
                         f"expected {width}")
    block[present] = flat.reshape(-1, width)
    return block, present


def parquet_write_options() -> dict:
    """How parts and keypoints.parquet are encoded (pyarrow.parquet writer keywords).

    Dictionary encoding only for the string columns: on landmark floats it never pays (the values
    hardly repeat), yet the writer tries it on every page and falls back, which halved the merge's
    write speed and left files ~15% larger. Floats use BYTE_STREAM_SPLIT, which lets zstd find the
    repeated exponent bytes: smaller and faster to read. Page checksums let readers catch damage.
    The sha256 column is one distinct value per row, so a dictionary there is pure overhead too.
    """
    return {
        "compression": "zstd",
        "write_page_checksum": True,
        "use_dictionary": [f.name for f in SCHEMA
                           if f.type == pa.string() and f.name != "file_sha256"],
        "use_byte_stream_split": [f"{p}.list.element" for p in PARTS],
    }
