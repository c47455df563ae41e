"""The keypoint table's shared columns: one row per frame, the same in every part and in the
merged file.

Every family's table starts with BASE_FIELDS (which frame, what it was made from, its status);
its landmark columns, their point counts and value layouts are the family's declaration's
(extract/keypoints/estimator.py; the schema is the declaration's `schema`). Landmark arrays are
flat float32 lists of exactly points x values, or null where nothing was found; the file's own
metadata (extract/keypoints/filemeta.py) gives each column's width.

They are Parquet LISTs, not Arrow fixed-size lists, because pyarrow 21 (the newest on numpy 1)
still cannot round-trip a null fixed-size list through Parquet: writing one with a null slot fails
("Lists with non-zero length null components are not supported", apache/arrow#35697), and an
all-null one is written but not read back (apache/arrow#35692); tests/test_fixed_size_lists.py
checks both. The supported way: read the lists and cast them (`as_fixed_size`; polars:
`.list.to_array(width)`): nulls are kept and every present row has exactly `width` values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# The columns that say what each row was made from, in the order extract/sources/provenance.py
# reads them.
PROVENANCE_COLUMNS: tuple[str, ...] = ("image", "file_size", "file_mtime_ns", "file_sha256")

# The per-frame columns every estimator's table starts with (extract/keypoints/estimator.py).
BASE_FIELDS: list[pa.Field] = [
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
    # What the row was made from (extract/keypoints/frames.py): null where the bytes could not
    # be read.
    pa.field("file_size", pa.int64()),
    pa.field("file_mtime_ns", pa.int64()),
    pa.field("file_sha256", pa.string()),
]
# Shared columns files of earlier versions lack (time_s: before video input); readers treat them
# as absent, not damage, and a merge fills them with nulls (a family adds its own: its
# declaration's `optional`).
BASE_OPTIONAL: tuple[str, ...] = ("time_s",)


def part_column(block: np.ndarray, present: np.ndarray, width: int) -> pa.Array:
    """A float32 list column from a [rows, width] block; rows where present is False are null.

    Built from one contiguous block (not per-row lists): O(1) Python calls per chunk, not per frame.
    """
    values = pa.array(np.ascontiguousarray(block[present], np.float32).reshape(-1), pa.float32())
    offsets = pa.array(np.r_[0, np.cumsum(present.astype(np.int32) * width)].astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, mask=pa.array(~present, pa.bool_()))


def list_column(rows: list[np.ndarray | None]) -> pa.Array:
    """A float32 list column of rows of any length (a declaration's `lists`: every item a frame
    holds); None rows are null."""
    sizes = np.array([0 if r is None else r.size for r in rows], np.int32)
    flat = [r for r in rows if r is not None and r.size]
    values = np.concatenate(flat).astype(np.float32) if flat else np.zeros(0, np.float32)
    offsets = pa.array(np.r_[0, np.cumsum(sizes)].astype(np.int32))
    missing = pa.array([r is None for r in rows], pa.bool_())
    return pa.ListArray.from_arrays(offsets, pa.array(values, pa.float32()), mask=missing)


def leading(flat: np.ndarray, rows: int, width: int) -> np.ndarray | None:
    """[rows, width] from `rows` lists of `width` values, or of more (a column that records more
    points on some runs, whose first ones are those every reader expects); None if the sizes fit
    neither."""
    if flat.size == rows * width:
        return flat.reshape(rows, width)
    if rows and flat.size % rows == 0 and flat.size // rows > width:
        return flat.reshape(rows, -1)[:, :width]
    return None


def list_width(col: pa.ChunkedArray | pa.Array) -> int | None:
    """Values per list of the column's first non-null row (None when all rows are null)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    valid = arr.drop_null()
    return len(valid[0].values) if len(valid) else None


def column_block(col: pa.ChunkedArray | pa.Array, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A landmark column -> (float32 [rows, width], 0 in null rows; bool [rows], True if present).

    A column with more points per row (a run that records more) is cut to its first `width`
    values."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(arr)
    present = ~np.asarray(arr.is_null(), dtype=bool)
    block = np.zeros((n, width), np.float32)
    flat = np.asarray(arr.flatten(), dtype=np.float32)
    rows = leading(flat, int(present.sum()), width)
    if rows is None:
        raise ValueError(f"landmark lists of {flat.size / max(1, present.sum()):g} values, "
                         f"expected {width}")
    block[present] = rows
    return block, present


def as_fixed_size(col: pa.ChunkedArray | pa.Array, width: int) -> pa.ChunkedArray | pa.Array:
    """A landmark column as Arrow fixed-size lists of `width` float32 (nulls kept): numpy then
    reshapes its values without a copy. Raises if a present row has another length."""
    return col.cast(pa.list_(pa.float32(), width))

