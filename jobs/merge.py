"""Merge committed parts into ONE keypoints.parquet: a stream, one part in memory at a time.

Chunks are contiguous in output order, so the merged file is the parts appended in chunk order.
Rows are written in row groups of ROW_GROUP_ROWS whatever the chunking, so the file is the same
byte for byte however the videos were cut (1 worker or 100, guided or --chunk-frames). Every page
of a part is read with its checksum verified; a part that fails is moved aside and named.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from extract.schema import SCHEMA, parquet_write_options
from jobs.parts import reject
from jobs.rundir import RunDir, RunError, fsync_dir

ROW_GROUP_ROWS = 2048


class CorruptPart(RunError):
    """A committed part failed its checksums while merging; it was moved aside."""

    def __init__(self, message: str, chunk: int, why: str = "") -> None:
        super().__init__(message)
        self.chunk = chunk
        self.why = why or message


def read_part(path: Path) -> pa.Table:
    """A committed part's rows, every page's checksum verified, without our footer metadata."""
    table = pq.ParquetFile(path, page_checksum_verification=True).read()
    return table.replace_schema_metadata(None)


class KeypointsWriter:
    """Appends tables to keypoints.parquet's temp file in fixed-size row groups; commit renames."""

    def __init__(self, rd: RunDir) -> None:
        self.rd = rd
        self.tmp = rd.keypoints_path.with_name(".keypoints.parquet.tmp")
        self._writer = pq.ParquetWriter(self.tmp, SCHEMA, **parquet_write_options())
        self._held: list[pa.Table] = []
        self._held_rows = 0
        self.rows = 0

    def append(self, table: pa.Table) -> None:
        self._held.append(table)
        self._held_rows += table.num_rows
        self.rows += table.num_rows
        if self._held_rows >= ROW_GROUP_ROWS:
            held = pa.concat_tables(self._held)
            full = (held.num_rows // ROW_GROUP_ROWS) * ROW_GROUP_ROWS
            self._writer.write_table(held.slice(0, full), row_group_size=ROW_GROUP_ROWS)
            rest = held.slice(full)
            self._held, self._held_rows = [rest], rest.num_rows

    def commit(self) -> None:
        """Write what is held, close, fsync and rename into place."""
        if self._held_rows:
            self._writer.write_table(pa.concat_tables(self._held), row_group_size=ROW_GROUP_ROWS)
        self._held = []
        self._writer.close()
        with open(self.tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(self.tmp, self.rd.keypoints_path)
        fsync_dir(self.rd.path)

    def discard(self) -> None:
        with suppress(OSError, pa.ArrowException):
            self._writer.close()
        self.tmp.unlink(missing_ok=True)


def read_ahead(rd: RunDir, chunks: list[int]) -> Iterator[tuple[int, pa.Table]]:
    """(chunk, rows) in order; the next part is read (checksums verified) while this one is used.

    pyarrow releases the GIL, so on 2+ cores the reading costs no wall time. A part that cannot be
    read is moved aside and raised as CorruptPart.
    """
    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(read_part, rd.part_path(chunks[0])) if chunks else None
        for i, chunk in enumerate(chunks):
            assert ahead is not None
            try:
                table = ahead.result()
            except (OSError, pa.ArrowException) as e:
                dest = reject(rd, rd.part_path(chunk), f"unreadable while merging: {e}")
                why = f"part of chunk {chunk} is corrupt ({e}); moved to {dest}"
                raise CorruptPart(f"{why}. Run `phoenix-keypoints run --out {rd.path}` to redo it.",
                                  chunk, why) from None
            if i + 1 < len(chunks):
                ahead = pool.submit(read_part, rd.part_path(chunks[i + 1]))
            yield chunk, table


def merge_parts(rd: RunDir, chunks: Iterable[int]) -> int:
    """Write keypoints.parquet from these chunks' parts, in order; returns its rows."""
    writer = KeypointsWriter(rd)
    try:
        for _, table in read_ahead(rd, sorted(chunks)):
            writer.append(table)
        writer.commit()
    except BaseException:
        writer.discard()
        raise
    return writer.rows
