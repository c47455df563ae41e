"""Read a few videos' rows out of keypoints.parquet without reading the whole file.

keypoints.parquet is sorted by (split, video) and written in row groups of a few thousand rows, so
the row groups' min/max statistics of `video` say which few row groups can hold a video: `show` and
the report's frame strips read those and nothing else, whatever the file's size.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.estimator import declaration_of_columns, names
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS, BASE_OPTIONAL, leading


class ReportError(Exception):
    """Input that report, show or diff cannot use; the message says what and what to do."""


def open_keypoints(path: Path) -> pq.ParquetFile:
    """The file, after checking it has the keypoint columns (a clear refusal otherwise)."""
    try:
        pf = pq.ParquetFile(path)
    except FileNotFoundError:
        raise ReportError(f"{path} does not exist") from None
    except (OSError, pa.ArrowException) as e:
        raise ReportError(f"{path}: not a readable Parquet file ({e})") from None
    found = declaration_of_columns(pf.schema_arrow.names)  # the family whose columns these are
    want = found.schema.names if found else [f.name for f in BASE_FIELDS]
    optional = found.optional if found else BASE_OPTIONAL
    missing = [n for n in want if n not in pf.schema_arrow.names and n not in optional]
    if missing:
        raise ReportError(f"{path}: not a keypoints file (no column {', '.join(missing)})")
    if found is None:
        raise ReportError(f"{path}: not a keypoints file (no landmark columns of a family this "
                          f"version knows: {', '.join(names())})")
    return pf


def _candidate_groups(pf: pq.ParquetFile, videos: set[str]) -> list[int]:
    """Row groups whose `video` min/max range holds one of the videos (all when stats are absent)."""
    col = pf.schema_arrow.get_field_index("video")
    out = []
    for i in range(pf.metadata.num_row_groups):
        stats = pf.metadata.row_group(i).column(col).statistics
        no_stats = stats is None or not stats.has_min_max
        if no_stats or any(stats.min <= v <= stats.max for v in videos):
            out.append(i)
    return out


def video_rows(path: Path, videos: Sequence[str], columns: Sequence[str] | None = None) -> pa.Table:
    """All rows of these videos, in file order; columns default to all of them."""
    pf = open_keypoints(path)
    want = set(videos)
    cols = None if columns is None else list(dict.fromkeys(["split", "video", *columns]))
    parts = []
    for i in _candidate_groups(pf, want):  # one row group at a time: memory stays at one chunk
        t = pf.read_row_group(i, columns=cols)
        t = t.filter(pc.is_in(t["video"], pa.array(sorted(want), pa.string())))
        if t.num_rows:
            parts.append(t)
    if not parts:
        return pf.schema_arrow.empty_table().select(cols) if cols else pf.schema_arrow.empty_table()
    return pa.concat_tables(parts)


def video_rates(path: Path) -> dict[str, float]:
    """video -> frames a second from its rows' times (`time_s`: video files); a video without
    times (frame folders, a file from before videos) is absent."""
    pf = open_keypoints(path)
    if "time_s" not in pf.schema_arrow.names or not _has_values(pf, "time_s"):
        return {}  # frame folders only (PHOENIX): nothing read
    t = pf.read(columns=["video", "time_s"])
    t = t.filter(pc.is_valid(t["time_s"]))
    g = t.group_by("video").aggregate([("time_s", "min"), ("time_s", "max"), ("time_s", "count")])
    out = {}
    for v, lo, hi, n in zip(*(g[c].to_pylist() for c in ("video", "time_s_min", "time_s_max",
                                                         "time_s_count")), strict=True):
        if n > 1 and hi > lo:
            out[v] = (n - 1) / (hi - lo)
    return out


def _has_values(pf: pq.ParquetFile, column: str) -> bool:
    """Whether any row group may hold a value of the column (its statistics count the nulls)."""
    schema = pf.metadata.schema  # leaf columns: a list column before it counts as one each
    col = next(j for j in range(len(schema)) if schema.column(j).path == column)
    for i in range(pf.metadata.num_row_groups):
        group = pf.metadata.row_group(i)
        stats = group.column(col).statistics
        if stats is None or stats.null_count is None or stats.null_count < group.num_rows:
            return True
    return False


def rate_said(rate: float | None) -> tuple[float, str]:
    """(frames a second, how a page says it): a video's own rate, else PHOENIX's 25, said so."""
    from phoenix_keypoints.extract.outputs.export import PHOENIX_FPS

    if rate:
        return rate, f"{rate:.4g} fps"
    return float(PHOENIX_FPS), f"{PHOENIX_FPS} fps (frame folders carry no rate: PHOENIX's assumed)"


MAX_GROUP_ROWS = 65_536  # larger row groups are streamed in batches instead of read whole


def iter_tables(path: Path, columns: Sequence[str], workers: int | None = None,
                batch_size: int = 8192) -> Iterator[pa.Table]:
    """The file's rows in order, as row groups decoded by `workers` threads ahead of the caller.

    Decoding (zstd, byte-stream-split) runs in Arrow without the GIL, so on two cores the next
    row groups are decoded while the caller computes on this one. Memory: workers + 1 row groups.
    Files with huge row groups are streamed batch by batch on one thread instead.
    """
    pf = open_keypoints(path)
    meta = pf.metadata
    cols = list(columns)
    groups = range(meta.num_row_groups)
    if any(meta.row_group(i).num_rows > MAX_GROUP_ROWS for i in groups):
        for batch in pf.iter_batches(batch_size=batch_size, columns=cols):
            yield pa.Table.from_batches([batch])
        return
    workers = workers or max(1, min(4, len(os.sched_getaffinity(0))))
    local = threading.local()

    def read(i: int) -> pa.Table:
        if not hasattr(local, "pf"):  # one reader per thread: a ParquetFile is not shared
            local.pf = pq.ParquetFile(path)
        return local.pf.read_row_group(i, columns=cols, use_threads=False)

    with ThreadPoolExecutor(workers) as pool:
        ahead: deque = deque()
        todo = iter(groups)
        for i in todo:
            ahead.append(pool.submit(read, i))
            if len(ahead) > workers:
                break
        while ahead:
            table = ahead.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                ahead.append(pool.submit(read, nxt))
            yield table


def present_values(col: pa.ChunkedArray | pa.Array, points: int,
                   values: int) -> tuple[np.ndarray, np.ndarray]:
    """(bool [rows] present, float32 [present rows, points, values]) without filling null rows.

    Unlike schema.column_block no [rows, width] block is zero-filled: for the face, 85% of the
    file's bytes, that copy would cost more than the figures made from it.
    """
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    present = ~arr.is_null().to_numpy(zero_copy_only=False)
    width = points * values
    offsets = arr.offsets.to_numpy()
    flat = arr.values.to_numpy(zero_copy_only=False)[offsets[0]:offsets[-1]]
    rows = int(present.sum())
    if np.diff(offsets)[~present].any():  # null rows backed by values: copy the lists out
        flat = arr.flatten().to_numpy(zero_copy_only=False)
    block = leading(flat, rows, width)  # a refined face: its first 468 points
    if block is None:
        raise ReportError(f"landmark lists of {flat.size / max(1, present.sum()):g} values, "
                          f"expected {width}: not a keypoints file of this schema")
    return present, block.reshape(-1, points, values)


def scatter(present: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Present rows' values back at their frame positions, NaN where the part is missing."""
    out = np.full((len(present), *vals.shape[1:]), np.nan, np.float32)
    out[present] = vals
    return out


def part_arrays(table: pa.Table) -> dict[str, np.ndarray]:
    """column -> float32 [rows, points, values], NaN where the column's list is absent: the landmark
    columns of the family whose table this is (optional ones where the table has them)."""
    found = declaration_of_columns(table.column_names)
    parts = {p: nc for p, nc in (found.parts if found else {}).items() if p in table.column_names}
    return {p: scatter(*present_values(table.column(p), k, c)) for p, (k, c) in parts.items()}
