"""Why landmark columns are Parquet lists and how to get fixed-size ones: the pinned pyarrow still
cannot round-trip null fixed-size lists through Parquet (apache/arrow#35697, #35692). Should an
upgrade lift that, the first test fails and says so: then the columns can become fixed-size."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata
from phoenix_keypoints.extract.keypoints.schema import as_fixed_size


def _round_trip(table: pa.Table) -> pa.Table:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    buf.seek(0)
    return pq.read_table(buf)


def test_pyarrow_still_cannot_store_null_fixed_size_lists():
    values = pa.array(np.arange(9, dtype=np.float32))
    with_null = pa.FixedSizeListArray.from_arrays(values, 3, mask=pa.array([False, True, False]))
    with pytest.raises(pa.ArrowNotImplementedError, match="non-zero length null"):
        _round_trip(pa.table({"a": with_null}))
    with pytest.raises(pa.ArrowInvalid, match="Expected all lists to be of size=3"):
        _round_trip(pa.table({"a": pa.nulls(2, pa.list_(pa.float32(), 3))}))


def test_keypoint_lists_cast_to_fixed_size(shared_run: Path):
    """The supported way on a real file: every column casts to its recorded width, nulls kept,
    values unchanged, and numpy views them as [rows, width] without a copy."""
    path = shared_run / "keypoints.parquet"
    table = pq.read_table(path)
    for part, spec in read_file_metadata(path)["layout"].items():
        col = table[part].combine_chunks()
        fixed = as_fixed_size(col, spec["width"])
        assert fixed.type == pa.list_(pa.float32(), spec["width"])
        assert fixed.null_count == col.null_count
        assert fixed.to_pylist() == col.to_pylist()
        if fixed.null_count < len(fixed):
            view = fixed.values.to_numpy(zero_copy_only=True).reshape(len(fixed), spec["width"])
            first = next(i for i, v in enumerate(col.to_pylist()) if v is not None)
            assert np.array_equal(view[first], np.asarray(col[first].as_py(), np.float32))
    with pytest.raises(pa.ArrowInvalid):
        as_fixed_size(table["face"], 1434)  # not refined: 1404 values a row
