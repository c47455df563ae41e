"""Merge committed parts into ONE keypoints.parquet and the tensors: a stream, one part at a time.

Rows are written in plan order, (split, video), whatever chunk they sit in: a plan's chunks are
contiguous in that order, so the file is mostly the parts appended in chunk order, but a plan
extended after the corpus changed (jobs.run.plan.extend_plan) puts new chunks among the old ones, and a
kept part may hold rows of videos that have left the corpus since; the merge takes from each part
the videos of each run of jobs.schedule.chunks.merge_order, in turn. Rows are written in row groups of
ROW_GROUP_ROWS whatever the chunking, so the file is the same byte for byte however the videos were
cut (1 worker or 100, guided or --chunk-frames, planned once or extended). Every page of a part is
read with its checksum verified; a part that fails is moved aside and named.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.estimator import Declaration, declaration
from phoenix_keypoints.extract.keypoints.filemeta import file_metadata, read_file_metadata
from phoenix_keypoints.extract.outputs.declared import DeclaredTensorWriter
from phoenix_keypoints.extract.outputs.tensors import POINTS_JSON, TensorSetWriter, video_runs
from phoenix_keypoints.jobs.run.outputs import corpus_from_plan
from phoenix_keypoints.jobs.rundir.folder import JobFailed, RunDir, atomic_write_bytes, fsync_dir
from phoenix_keypoints.jobs.rundir.parts import read_part_info, reject
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo
from phoenix_keypoints.jobs.schedule.chunks import merge_order

ROW_GROUP_ROWS = 2048


class CorruptPart(JobFailed):
    """A committed part failed its checksums while merging (the disk's fault, exit 1); moved aside."""

    def __init__(self, message: str, chunk: int, why: str = "") -> None:
        super().__init__(message)
        self.chunk = chunk
        self.why = why or message


def read_part(path: Path, decl: Declaration | None = None) -> pa.Table:
    """A committed part's rows, every page's checksum verified, without our footer metadata.

    `decl`: the run's estimator. A part of an earlier version gets the columns it lacks (its
    declaration's `optional`: time_s, a family's later columns) all null: not recorded (time_s is
    null for frame files anyway)."""
    decl = decl or declaration(None)
    schema = decl.schema
    table = pq.ParquetFile(path, page_checksum_verification=True).read()
    for name in decl.optional:
        if name not in table.column_names and name in schema.names:
            table = table.append_column(schema.field(name), pa.nulls(table.num_rows,
                                                                    schema.field(name).type))
    return table.select(schema.names).replace_schema_metadata(None)


def file_versions(info: RunInfo, made: dict[str, str] | None = None) -> dict[str, str]:
    """The versions keypoints.parquet's metadata names: run.json's, with what the values depend on
    as the parts were made (`made`; else as run.json records the run's)."""
    return {**info.versions, **info.value_versions(), **(made or {})}


class KeypointsWriter:
    """Appends tables to keypoints.parquet's temp file in fixed-size row groups; commit renames."""

    def __init__(self, rd: RunDir, versions: dict[str, str] | None = None,
                 execution: list[dict] | None = None, info: RunInfo | None = None) -> None:
        """`versions`: what the parts' values were made with, over run.json's record;
        `execution`: how they were computed (each record once); `info`: the run (default:
        run.json's). The file's metadata is written first, so a merge that finds other versions
        or records in the end starts over."""
        self.rd = rd
        self.tmp = rd.keypoints_path.with_name(".keypoints.parquet.tmp")
        info = info or rd.load()
        decl = declaration(info.options.settings())
        self.versions = file_versions(info, versions)
        self.execution = list(execution or [])
        meta = file_metadata(self.versions, info.options.recorded, info.dataset.fingerprint,
                             info.options.settings(), self.execution)
        self._writer = pq.ParquetWriter(self.tmp, decl.schema.with_metadata(meta),
                                        **decl.write_options())
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


def rewrite_file_record(rd: RunDir, info: RunInfo) -> None:
    """keypoints.parquet again with the metadata `info` makes (a finished run whose model file
    moved: its family's file_record names the new path), its rows copied a row group at a time,
    not recomputed, its versions and execution records the file's own; renamed into place."""
    old, before = read_file_metadata(rd.keypoints_path) or {}, rd.keypoints_path.stat().st_size
    writer = KeypointsWriter(rd, old.get("versions"), old.get("execution"), info)
    try:
        with pq.ParquetFile(rd.keypoints_path) as f:
            for i in range(f.num_row_groups):
                writer.append(f.read_row_group(i))
        writer.commit()
    except BaseException:
        writer.discard()
        raise
    _tensor_sources_follow(rd, before)


def _tensor_sources_follow(rd: RunDir, before: int) -> None:
    """Each tensor set made from keypoints.parquet as it was names its size now: its rows, which
    the set was made from, are the same (else the loader would call the set stale)."""
    after = rd.keypoints_path.stat().st_size
    for path in rd.tensors_dir.rglob(POINTS_JSON):
        try:
            meta = json.loads(path.read_text())
            source = meta["source"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged set: `run` writes it again
        if source.get("file") == rd.keypoints_path.name and source.get("bytes") == before:
            meta["source"] = source | {"bytes": after}
            atomic_write_bytes(path, (json.dumps(meta, indent=2) + "\n").encode())


def read_ahead(rd: RunDir, chunks: list[int]) -> Iterator[tuple[int, pa.Table]]:
    """(chunk, rows) in order; the next part is read (checksums verified) while this one is used.

    pyarrow releases the GIL, so on 2+ cores the reading costs no wall time. A part that cannot be
    read is moved aside and raised as CorruptPart.
    """
    decl = declaration(rd.load().options.settings())
    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(read_part, rd.part_path(chunks[0]), decl) if chunks else None
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
                ahead = pool.submit(read_part, rd.part_path(chunks[i + 1]), decl)
            yield chunk, table


def take_videos(table: pa.Table, keys: tuple[tuple[str, str], ...]) -> pa.Table:
    """The rows of these (split, video)s, in this order; a part may hold others (videos of another
    run of its chunk, or dropped since it was made), and none of a failed video."""
    spans = {(s, v): (offset, n) for s, v, offset, n in video_runs(table)}
    if tuple(spans) == keys:
        return table
    pieces = [table.slice(*spans[k]) for k in keys if k in spans]
    return pa.concat_tables(pieces) if pieces else table.slice(0, 0)


class _Stage:
    """A thread that applies `work` to each table put in, in order; errors are kept for join()."""

    def __init__(self, name: str, work: Callable[[pa.Table], None]) -> None:
        self.work = work
        self.inbox: queue.Queue[pa.Table | None] = queue.Queue(maxsize=2)  # bounded: memory flat
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while (table := self.inbox.get()) is not None:
            if self.error is None:
                try:
                    self.work(table)
                except BaseException as e:  # keep draining so put() never blocks forever
                    self.error = e

    def put(self, table: pa.Table) -> None:
        self.inbox.put(table)

    def join(self) -> None:
        self.inbox.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


class Merger:
    """Parts in, in chunk order; out: keypoints.parquet and the default tensor set, in one pass.

    The keypoints file and the tensors are written by two threads from the same tables (Arrow and
    numpy release the GIL), while the caller reads the next part: three stages, each at its own
    pace, nothing read twice. Both outputs are built under temp names; commit() puts them in place.
    """

    def __init__(self, rd: RunDir, plan: pa.Table, versions: dict[str, str] | None = None,
                 execution: list[dict] | None = None) -> None:
        self.rd = rd
        capacity: dict[str, int] = {}
        for split, n, c in zip(plan["split"].to_pylist(), plan["num_frames"].to_pylist(),
                               plan["chunk"].to_pylist(), strict=True):
            if c >= 0:
                capacity[split] = capacity.get(split, 0) + n
        self.keypoints = KeypointsWriter(rd, versions, execution)
        options = rd.load().options
        decl = declaration(options.settings())
        if not decl.tensor_presets:  # a family without presets: the one set of all its points
            self.tensors: TensorSetWriter = DeclaredTensorWriter(
                rd.tensors_dir, capacity, decl, corpus=corpus_from_plan(plan))
        else:
            self.tensors = TensorSetWriter(rd.tensors_dir, capacity, corpus=corpus_from_plan(plan),
                                           table=decl.points)
        self.stages = [_Stage("merge-keypoints", self.keypoints.append),
                       _Stage("merge-tensors", self._add_videos)]
        self.merged: list[int] = []  # positions in merge_order

    def _add_videos(self, table: pa.Table) -> None:
        for split, video, offset, length in video_runs(table):
            self.tensors.add_video(split, video, table.slice(offset, length))

    def add(self, position: int, table: pa.Table) -> None:
        for stage in self.stages:
            stage.put(table)
        self.merged.append(position)

    def _join(self) -> None:
        errors = []
        for stage in self.stages:
            try:
                stage.join()
            except BaseException as e:
                errors.append(e)
        self.stages = []
        if errors:
            raise errors[0]

    def commit(self) -> tuple[int, dict[str, int]]:
        """(rows, frames per split) once both are in place."""
        self._join()
        self.keypoints.commit()
        return self.keypoints.rows, self.tensors.close(self.rd.keypoints_path, exact=False)

    def discard(self) -> None:
        with suppress(BaseException):
            self._join()
        self.keypoints.discard()
        self.tensors.discard()


class BackgroundMerge:
    """Merges parts on a thread while they are committed, so the merge overlaps the extraction.

    The runs of jobs.schedule.chunks.merge_order are merged in order, each as soon as `ready(chunk)`
    says its part is final; complete() merges whatever is left and commits. A part is read once and
    held while runs of it are still to come. A part that cannot be read stops the merge: complete()
    raises it (CorruptPart), and the caller redoes that chunk and merges again.
    """

    POLL_S = 0.2

    def __init__(self, rd: RunDir, plan: pa.Table, chunks: list[int],
                 ready: Callable[[int], bool]) -> None:
        wanted = set(chunks)
        self.rd, self.plan, self.ready = rd, plan, ready
        self.runs = [run for run in merge_order(plan) if run[0] in wanted]
        self.last = {c: i for i, (c, _) in enumerate(self.runs)}  # a part is dropped after it
        self.held: dict[int, pa.Table] = {}
        self.merger: Merger | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="merge", daemon=True)

    def start(self) -> BackgroundMerge:
        self._thread.start()
        return self

    def _add(self, position: int, table: pa.Table) -> None:
        """Merge run `position` from its part's rows (held until its chunk's last run)."""
        chunk, keys = self.runs[position]
        self.held[chunk] = table
        self.merger = self.merger or Merger(self.rd, self.plan,
                                            execution=_made_on(self.rd, chunk))
        self.merger.add(position, take_videos(table, keys))
        if self.last[chunk] == position:
            del self.held[chunk]

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                pos = len(self.merger.merged) if self.merger else 0
                if pos < len(self.runs) and self.ready(self.runs[pos][0]):
                    chunk = self.runs[pos][0]
                    held = self.held.get(chunk)
                    self._add(pos, held if held is not None else _read_or_reject(self.rd, chunk))
                else:
                    self._stop.wait(self.POLL_S)
        except BaseException as e:  # a corrupt part, a full disk: complete() raises it
            self.error = e

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def settle(self) -> None:
        """Stop merging; raise what stopped it (a part it moved aside must be redone first)."""
        self.stop()
        if self.error is not None:
            error = self.error
            self.discard()
            raise error

    def complete(self, chunks: list[int], versions: dict[str, str] | None = None,
                 execution: list[dict] | None = None) -> tuple[int, dict[str, int]]:
        """Merge the runs of `chunks` (what merged already must be their start) and commit;
        `versions`, `execution`: what their parts were made with and how they were computed
        (jobs.run.finish), for the file's metadata."""
        self.settle()
        wanted = set(chunks)
        todo = [i for i, (c, _) in enumerate(self.runs) if c in wanted]
        try:
            if self.merger is None or self.merger.merged != todo[:len(self.merger.merged)] or (
                    self.merger.keypoints.versions != file_versions(self.rd.load(), versions)) or (
                    self.merger.keypoints.execution != list(execution or [])):
                if self.merger is not None:  # merged a part that is no longer trusted, or wrote
                    self.merger.discard()    # other versions or records into the metadata
                self.held = {}
                self.merger = Merger(self.rd, self.plan, versions, execution)
            todo = todo[len(self.merger.merged):]
            reads = list(dict.fromkeys(self.runs[i][0] for i in todo))
            parts = read_ahead(self.rd, [c for c in reads if c not in self.held])
            for i in todo:
                chunk = self.runs[i][0]
                table = self.held.get(chunk)
                if table is None:
                    got, table = next(parts)
                    assert got == chunk, (got, chunk)
                self._add(i, table)
            return self.merger.commit()
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        self.stop()
        self.held = {}
        if self.merger is not None:
            self.merger.discard()
            self.merger = None


def _made_on(rd: RunDir, chunk: int) -> list[dict]:
    """How the part of `chunk` was computed, as the metadata of a merge started beside the
    extraction first takes it (the run's parts are one computation, bar a resume on the CPU at
    another --batch-size; complete() starts over where the parts' records are others)."""
    try:
        record = read_part_info(rd.part_path(chunk))[0].execution
    except ValueError:  # read again, checked, by the merge: it says what is wrong
        return []
    return [record] if record else []


def _read_or_reject(rd: RunDir, chunk: int) -> pa.Table:
    for _, table in read_ahead(rd, [chunk]):
        return table
    raise AssertionError("read_ahead yields one table per chunk")
