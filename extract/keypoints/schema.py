"""The keypoint table's schema: one row per frame, the same in every part and in the merged file.

Point counts and value layouts are MediaPipe Holistic's (pose 33 x (x, y, z, visibility), face 468,
or 478 with refine_face_landmarks, hands 21 x (x, y, z), pose_world 33 x (x, y, z, visibility)).
Landmark arrays are flat float32 lists of exactly points x values, or null where MediaPipe found
nothing; the file's own metadata (extract/keypoints/filemeta.py) gives each column's width.

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

# name -> (points, values per point); order is the tensors' point order.
PARTS: dict[str, tuple[int, int]] = {
    "pose": (33, 4),
    "face": (468, 3),
    "left_hand": (21, 3),
    "right_hand": (21, 3),
}
NUM_POINTS = sum(n for n, _ in PARTS.values())  # 543
# Recorded beside the image-space parts, not in the 543-point tensor layout: pose_world_landmarks,
# x, y, z in metres around the hip midpoint, and visibility.
WORLD_PARTS: dict[str, tuple[int, int]] = {"pose_world": (33, 4)}
# Columns files of earlier versions lack (time_s: before video input; pose_world: before schema 2);
# readers treat them as absent, not damage, and a merge fills them with nulls.
OPTIONAL_COLUMNS: tuple[str, ...] = ("time_s", *WORLD_PARTS)
FACE_POINTS_REFINED = 478  # refine_face_landmarks: the 468 mesh points, then 10 iris points


def layout(refine_face: bool = False) -> dict[str, tuple[int, int]]:
    """part -> (points, values) of every landmark column, as Holistic returns them with or without
    refine_face_landmarks (pose_world included)."""
    face = FACE_POINTS_REFINED if refine_face else PARTS["face"][0]
    return {p: ((face, c) if p == "face" else (n, c)) for p, (n, c) in (PARTS | WORLD_PARTS).items()}


# Where each part's points start in the [543, 3] tensor layout.
OFFSETS: dict[str, int] = {}
_o = 0
for _name, (_n, _) in PARTS.items():
    OFFSETS[_name] = _o
    _o += _n
del _o, _name, _n

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
SCHEMA = pa.schema(BASE_FIELDS + [pa.field(name, pa.list_(pa.float32()))
                                  for name in (*PARTS, *WORLD_PARTS)])
# The schema of files written before time_s and pose_world existed (still read: OPTIONAL_COLUMNS).
EARLIEST_SCHEMA = pa.schema([f for f in SCHEMA if f.name not in OPTIONAL_COLUMNS])


def is_earlier_schema(schema: pa.Schema) -> bool:
    """This version's schema, or one that lacks only some OPTIONAL_COLUMNS (an earlier version's)."""
    missing = set(SCHEMA.names) - set(schema.names)
    return missing <= set(OPTIONAL_COLUMNS) and schema.equals(
        pa.schema([f for f in SCHEMA if f.name not in missing]))


def part_column(block: np.ndarray, present: np.ndarray, width: int) -> pa.Array:
    """A float32 list column from a [rows, width] block; rows where present is False are null.

    Built from one contiguous block (not per-row lists): O(1) Python calls per chunk, not per frame.
    """
    values = pa.array(np.ascontiguousarray(block[present], np.float32).reshape(-1), pa.float32())
    offsets = pa.array(np.r_[0, np.cumsum(present.astype(np.int32) * width)].astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, mask=pa.array(~present, pa.bool_()))


def leading(flat: np.ndarray, rows: int, width: int) -> np.ndarray | None:
    """[rows, width] from `rows` lists of `width` values, or of more (a refined face: 478 points
    whose first 468 are the mesh every 468-point reader expects); None if the sizes fit neither."""
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

    A refined face (478 points) is cut to its first `width` values."""
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
        "use_byte_stream_split": [f"{p}.list.element" for p in (*PARTS, *WORLD_PARTS)],
    }
