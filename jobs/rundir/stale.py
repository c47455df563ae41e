"""Rows made from frames that changed on disk since: the resume's check of parts, and `verify`'s.

A part (or keypoints.parquet) records, per row, the size, mtime and sha256 of the bytes it was made
from; extract.sources.provenance compares them with the dataset as it is now. Only the few provenance
columns are read, never the landmarks, and parts are checked on a thread pool (pyarrow's reads and
os.stat release the GIL), so a resume of the whole release pays seconds, not minutes.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.schema import PROVENANCE_COLUMNS
from phoenix_keypoints.extract.sources import changed_rows
from phoenix_keypoints.extract.sources.provenance import DEFAULT_THREADS
from phoenix_keypoints.jobs.rundir.folder import NotAFile, not_a_file

SHOWN = 3  # frames named in a part's .why; the rest are counted


class Stale(NamedTuple):
    """One row whose frame no longer matches what the row was made from."""

    video: str
    frame: int
    image: str
    why: str


def columns(content: bool) -> list[str]:
    """The columns a check reads: sha256 (most of their bytes) only when content is compared."""
    return ["video", "frame", *(c for c in PROVENANCE_COLUMNS if content or c != "file_sha256")]


def stale_rows(root: Path, table: pa.Table | pa.RecordBatch, content: bool = False,
               threads: int = 1) -> list[Stale]:
    """The rows of `table` (holding `columns(content)`) whose frames under root changed."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    found = changed_rows(root, table, content=content, threads=threads)
    if not found:
        return []
    video, frame = table["video"], table["frame"]
    return [Stale(video[m.row].as_py(), frame[m.row].as_py(), m.image, m.why) for m in found]


def stale_in_part(path: Path, root: Path, content: bool = False,
                  skip: set[tuple[str, str]] | None = None) -> list[Stale]:
    """The rows of one committed part whose frames changed (reads only the provenance columns).
    skip: (split, video)s whose rows are not the chunk's any more (a kept part's dropped videos).
    A FIFO or a device in the part's place raises NotAFile (an OSError), unread."""
    if why := not_a_file(path):
        raise NotAFile(why)
    if not skip:
        return stale_rows(root, pq.read_table(path, columns=columns(content)), content)
    table = pq.read_table(path, columns=["split", *columns(content)])
    keep = [(s, v) not in skip for s, v in zip(table["split"].to_pylist(),
                                               table["video"].to_pylist(), strict=True)]
    return stale_rows(root, table.filter(pa.array(keep, pa.bool_())).drop_columns(["split"]),
                      content)


def stale_parts(paths: dict[int, Path], root: Path, content: bool = False,
                threads: int = DEFAULT_THREADS, skip: dict[int, set[tuple[str, str]]] | None = None
                ) -> tuple[dict[int, list[Stale]], dict[int, str]]:
    """({chunk: its stale rows} for parts with any, {chunk: why its part could not be read}).

    One part per thread, so memory stays at a few parts' provenance columns."""
    def check(item: tuple[int, Path]) -> tuple[int, list[Stale], str]:
        chunk, path = item
        try:
            return chunk, stale_in_part(path, root, content, (skip or {}).get(chunk)), ""
        except (OSError, pa.ArrowException) as e:
            return chunk, [], f"unreadable ({e})"

    stale: dict[int, list[Stale]] = {}
    unreadable: dict[int, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for chunk, found, error in pool.map(check, sorted(paths.items())):
            if found:
                stale[chunk] = found
            if error:
                unreadable[chunk] = error
    return stale, unreadable


def describe(found: Iterable[Stale], shown: int = SHOWN) -> str:
    """Why a part is not trusted: "frames changed on disk: IMAGE (why), ... and N more"."""
    found = list(found)
    named = ", ".join(f"{s.image} ({s.why})" for s in found[:shown])
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    return f"frames changed on disk: {named}{more}"
