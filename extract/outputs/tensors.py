"""Model-input tensors from keypoints.parquet, streamed one video at a time (memory stays flat).

A tensor set (a "tag") is one choice of points, normalisation, gap filling and dtype, read in the
run's family's `PointTable` (its declaration's `points`: parts, names, presets, the normalisation's
anchor points, the world column, its points.json words). Per split:
`<split>.npy` [frames, K, 3] (x, y, z; 0 where nothing was detected nor filled),
`<split>.mask.npy` bool [frames, K] (True only where the point was detected),
`<split>.index.parquet` (video, start, length, speaker, gloss, translation, and the normalisation
of each video when there is one), and one `points.json` naming the K points and the options.

The default set (every point of the run: no normalisation, zeros, float32)
lives directly in tensors/, the layout `run` has always written; every other tag in tensors/<tag>/.
Arrays are plain .npy files, written sequentially: readers open them with np.load(mmap_mode="r")
(extract.outputs.loader).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata, read_parquet
from phoenix_keypoints.extract.keypoints.points import PointSet, PointTable
from phoenix_keypoints.extract.keypoints.schema import column_block
from phoenix_keypoints.extract.outputs.normalize import (
    FILL_MODES,
    NORMALIZE_MODES,
    ShoulderFrame,
    interpolate_gaps,
    normalize_shoulders,
    to_pixels,
)

TENSORS_FORMAT = 1
POINTS_JSON = "points.json"
DTYPES = ("float32", "float16")
COORDS = ("image", "world")
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class TensorsError(Exception):
    """Tensors cannot be written or read as asked; the message says what to do."""


@dataclass(frozen=True)
class TensorSpec:
    """What one tensor set holds; its tag names the folder (the default set has tag "")."""

    points: PointSet = field(default_factory=PointSet.ask)  # read in the run's table (for_run)
    normalize: str = "none"
    fill: str = "zero"
    max_gap: int = 3
    dtype: str = "float32"
    name: str | None = None
    coords: str = "image"  # world: the points of the table's world column (its `world`)

    def __post_init__(self) -> None:
        self._check_coords()
        if self.normalize not in NORMALIZE_MODES:
            raise TensorsError(f"--normalize must be one of {', '.join(NORMALIZE_MODES)}")
        if self.fill not in FILL_MODES:
            raise TensorsError(f"--fill must be one of {', '.join(FILL_MODES)}")
        if self.dtype not in DTYPES:
            raise TensorsError(f"--dtype must be one of {', '.join(DTYPES)}")
        if self.max_gap < 0:
            raise TensorsError(f"--max-gap must be >= 0, not {self.max_gap}")
        if self.name is not None and not _TAG.match(self.name):
            raise TensorsError(f"--name '{self.name}': use letters, digits, '.', '_' or '-' "
                               "(at most 64, not starting with a dot)")

    def _check_coords(self) -> None:
        if self.coords not in COORDS:
            raise TensorsError(f"--coords must be one of {', '.join(COORDS)}")
        table = self.points.table
        if table is not None and self.normalize != "none" and table.anchor is None:
            raise TensorsError(f"--normalize {self.normalize}: these points have no anchor to "
                               "normalise by; use --normalize none")
        if self.coords == "image" or table is None:  # a choice not yet read: checked in for_run
            return
        if table.world is None:
            raise TensorsError("--coords world: these points have no world coordinates")
        o, n = table.offsets()[table.world[0]]
        if int(self.points.array.min()) < o or int(self.points.array.max()) >= o + n:
            part = table.world[0]
            raise TensorsError(f"--coords world: world coordinates exist for the {n} {part} points "
                               f"only; choose them with --points {part} (or {part}:N-M)")
        if self.normalize != "none":
            raise TensorsError(f"--coords world is {table.world_units} already: use it with "
                               "--normalize none")

    @property
    def is_default(self) -> bool:
        return (self.points.is_full and self.normalize == "none"
                and self.fill == "zero" and self.dtype == "float32" and self.coords == "image")

    @property
    def tag(self) -> str:
        if self.name is not None:
            return self.name
        if self.is_default:
            return ""
        bits = [self.points.name]
        if self.normalize != "none":
            bits.append(self.normalize)
        if self.fill == "interpolate":
            bits.append(f"interp{self.max_gap}")
        if self.dtype != "float32":
            bits.append("f16")
        if self.coords != "image":
            bits.append(self.coords)
        return "-".join(bits)

    def for_run(self, table: PointTable) -> TensorSpec:
        """This set in a run's point numbering (its family's table, the file's own: of_file)."""
        return replace(self, points=self.points.for_run(table))

    def as_dict(self) -> dict[str, Any]:
        return {"points": self.points.name, "normalize": self.normalize, "fill": self.fill,
                "max_gap": self.max_gap if self.fill == "interpolate" else None,
                "dtype": self.dtype, "coords": self.coords}


class NpyWriter:
    """Write a .npy row block by row block, in order, through plain file writes.

    Unlike a writable memmap, written pages are not counted in the process's memory: the writer
    stays at one video's worth however large the file grows. The header is written for `capacity`
    rows and rewritten in place, padded to the same length, for the rows there are at close: so a
    set can be written while the rows still arrive (the merge), when only an upper bound is known.
    """

    def __init__(self, path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.path, self.dtype, self.shape = path, np.dtype(dtype), shape
        self.rows = 0
        self.f = open(path, "wb")  # noqa: SIM115 (held across appends; close() closes it)
        self._header_len = self.f.write(_npy_header(self.dtype, shape))

    def append(self, block: np.ndarray) -> None:
        if block.shape[1:] != self.shape[1:] or self.rows + len(block) > self.shape[0]:
            raise ValueError(f"{self.path}: block {block.shape} does not fit {self.shape}")
        self.f.write(np.ascontiguousarray(block, self.dtype).tobytes())
        self.rows += len(block)

    def close(self, exact: bool = True) -> None:
        """exact: the rows must be the shape's (else fewer are fine: the header says how many)."""
        if self.rows != self.shape[0]:
            if exact:
                self.f.close()
                raise TensorsError(f"{self.path}: wrote {self.rows} of {self.shape[0]} rows; the "
                                   "keypoints file changed while tensors were written. Run again.")
            self.f.seek(0)
            self.f.write(_npy_header(self.dtype, (self.rows, *self.shape[1:]), self._header_len))
        self.f.close()


def _npy_header(dtype: np.dtype, shape: tuple[int, ...], size: int | None = None) -> bytes:
    """A .npy version 1.0 header, `size` bytes long (default: the smallest multiple of 64)."""
    text = (f"{{'descr': {np.lib.format.dtype_to_descr(dtype)!r}, 'fortran_order': False, "
            f"'shape': {tuple(shape)!r}, }}")
    fixed = 10  # magic (6), version (2), header length (2)
    size = size or -(-(fixed + len(text) + 1) // 64) * 64
    pad = size - fixed - len(text) - 1
    if pad < 0:
        raise ValueError(f"npy header of {size} bytes cannot hold shape {shape}")
    body = (text + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body


def tag_dir(tensors_root: Path, tag: str | None) -> Path:
    """Where a tag's files live: tensors/ itself for the default set, tensors/<tag>/ otherwise."""
    return Path(tensors_root) / tag if tag else Path(tensors_root)


# --- reading keypoints.parquet ---------------------------------------------------------------

def part_blocks(table: pa.Table | pa.RecordBatch, parts: Sequence[str],
                layout: dict[str, tuple[int, int]]) -> dict[str, tuple]:
    """part -> (float32 [rows, points, values], bool [rows] present) for the parts asked, with
    the point counts of `layout` (fewer than a row has: its first ones)."""
    out = {}
    n = table.num_rows
    for part in parts:
        k, c = layout[part]
        block, present = column_block(table.column(part), k * c)
        out[part] = (block.reshape(n, k, c), present)
    return out


def video_runs(batch: pa.RecordBatch | pa.Table) -> Iterator[tuple[str, str, int, int]]:
    """(split, video, offset, length) of each run of rows of one video, in order."""
    splits = batch.column("split").to_numpy(zero_copy_only=False)
    vids = batch.column("video").to_numpy(zero_copy_only=False)
    change = np.flatnonzero(np.r_[True, (vids[1:] != vids[:-1]) | (splits[1:] != splits[:-1])])
    for a, b in zip(change, np.r_[change[1:], len(vids)], strict=True):
        yield str(splits[a]), str(vids[a]), int(a), int(b - a)


def iter_videos(keypoints: Path, columns: Sequence[str], batch_size: int = 4096,
                row_groups: Sequence[int] | None = None) -> Iterator[tuple[str, str, pa.Table]]:
    """(split, video, its rows) in file order, whole videos, one batch plus one video in memory.

    A video may straddle two batches (or row groups); its slices are gathered before it is yielded.
    row_groups: read only these (contiguous) row groups; None: all.
    """
    cols = list(dict.fromkeys(["split", "video", *columns]))
    pending: list[pa.RecordBatch] = []
    key: tuple[str, str] | None = None
    for batch in pq.ParquetFile(keypoints).iter_batches(batch_size=batch_size, columns=cols,
                                                        row_groups=row_groups):
        for split, video, offset, length in video_runs(batch):
            if (split, video) != key:
                if pending and key is not None:
                    yield key[0], key[1], pa.Table.from_batches(pending)
                pending, key = [], (split, video)
            pending.append(batch.slice(offset, length))
    if pending and key is not None:
        yield key[0], key[1], pa.Table.from_batches(pending)


def split_index(keypoints: Path) -> dict[str, pa.Table]:
    """Per split: (video, start, length) in file order, from two small columns."""
    t = read_parquet(keypoints, columns=["split", "video"])
    out: dict[str, pa.Table] = {}
    for split in pc.unique(t["split"]).to_pylist():
        vids = t.filter(pc.equal(t["split"], split))["video"].to_numpy(zero_copy_only=False)
        change = np.flatnonzero(np.r_[True, vids[1:] != vids[:-1]])
        lengths = np.diff(np.r_[change, len(vids)])
        out[split] = pa.table({"video": pa.array(vids[change], pa.string()),
                               "start": pa.array(change, pa.int64()),
                               "length": pa.array(lengths, pa.int64())})
    return out


# --- one video -------------------------------------------------------------------------------

def needed_parts(spec: TensorSpec) -> list[str]:
    """Parts to read: those the points come from, plus the anchor's when normalising by it."""
    t = _table(spec)
    names = list(t.parts)
    starts = np.array([o for o, _ in t.offsets().values()])
    # Vectorised part lookup: called once per video, and 543 part_of() calls were ~16% of its time.
    parts = {names[i] for i in np.unique(np.searchsorted(starts, spec.points.array, "right") - 1)}
    if spec.normalize != "none" and t.anchor is not None:
        parts.add(t.anchor[0])
    if spec.coords == "world" and t.world is not None:
        return [t.world[1]]
    return [p for p in t.parts if p in parts]


def _table(spec: TensorSpec) -> PointTable:
    if spec.points.table is None:
        raise TensorsError("a tensor set's points must be read in its run's numbering (for_run)")
    return spec.points.table


def video_tensor(table: pa.Table,
                 spec: TensorSpec) -> tuple[np.ndarray, np.ndarray, ShoulderFrame | None]:
    """One video's rows -> ([T, K, 3] float64 values, [T, K] detected, its shoulder frame or None)."""
    n, t = table.num_rows, _table(spec)
    blocks = part_blocks(table, needed_parts(spec), t.columns)
    if spec.coords == "world" and t.world is not None:  # the world column in its part's place
        blocks = {t.world[0]: blocks[t.world[1]]}
    xyz = np.zeros((n, t.num_points, 3), np.float32)
    mask = np.zeros((n, t.num_points), bool)
    for part, (o, k) in t.offsets().items():
        if part not in blocks:
            continue
        block, present = blocks[part]
        xyz[:, o : o + k] = block[:, :, :3]
        mask[:, o : o + k] = present[:, None]
    idx = spec.points.array
    vals: np.ndarray = xyz[:, idx]
    det = mask[:, idx]
    if spec.normalize == "none":
        if spec.fill == "interpolate":
            vals, _ = interpolate_gaps(vals.astype(np.float64), det, spec.max_gap)
        return vals, det, None
    width = table.column("width").to_numpy(zero_copy_only=False).astype(np.float64)
    height = table.column("height").to_numpy(zero_copy_only=False).astype(np.float64)
    px = to_pixels(vals, width, height)
    valid = det
    if spec.fill == "interpolate":
        px, filled = interpolate_gaps(px, det, spec.max_gap)
        valid = det | filled
    anchor, pair = t.anchor or ("", (0, 0))  # TensorSpec refuses normalising without one
    pose_block, pose_present = blocks[anchor]
    shoulders = to_pixels(pose_block[:, list(pair), :3], width, height)
    out, frame = normalize_shoulders(px, valid, shoulders, pose_present,
                                     per_frame=spec.normalize == "shoulders-per-frame")
    if not frame.normalized:  # no pose anywhere: keep the values as keypoints.parquet has them
        out = np.zeros_like(px)
        raw = vals.astype(np.float64)
        if spec.fill == "interpolate":
            raw, _ = interpolate_gaps(raw, det, spec.max_gap)
        out[valid] = raw[valid]
    return out, det, frame


# --- writing a set ---------------------------------------------------------------------------

def _corpus_columns(idx: pa.Table, corpus: Mapping[str, Mapping[str, str]] | None) -> pa.Table:
    if corpus is None:
        return idx
    vids = idx["video"].to_pylist()
    keys = ["speaker", "gloss", "translation"]
    if any(c.get("extra") for c in corpus.values()):  # other corpus columns, one JSON object
        keys.append("extra")
    for key in keys:
        idx = idx.append_column(key, pa.array([corpus.get(v, {}).get(key, "") for v in vids],
                                              pa.string()))
    return idx


def _install(tmp: Path, dest: Path, is_root: bool) -> None:
    """Move a finished set into place. A tag folder is swapped whole; the default set's files are
    replaced one by one (tensors/ also holds the other tags), points.json last."""
    if not is_root:
        old = dest.with_name(f".old-{dest.name}")
        shutil.rmtree(old, ignore_errors=True)
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
        return
    dest.mkdir(parents=True, exist_ok=True)
    new = {p.name for p in tmp.iterdir()}
    for p in dest.iterdir():  # a split that is gone from the new set must not linger
        if p.is_file() and p.name not in new and (p.name.endswith((".npy", ".index.parquet"))
                                                  or p.name == POINTS_JSON):
            p.unlink()
    (dest / POINTS_JSON).unlink(missing_ok=True)  # absent while files are swapped: not a set yet
    for name in sorted(new - {POINTS_JSON}):
        os.replace(tmp / name, dest / name)
    os.replace(tmp / POINTS_JSON, dest / POINTS_JSON)
    tmp.rmdir()


class TensorSetWriter:
    """Writes one tensor set video by video, in output order, into a hidden temp folder.

    `capacity`: at most how many rows each split gets (exact for a finished keypoints file; the
    plan's frames while a merge is still going, where failed videos may leave fewer). close()
    writes the index and points.json and moves the set into place; a crash never leaves half of it
    under the real names. Memory: one video, whatever the dataset's size.
    """

    def __init__(self, out_dir: Path, capacity: Mapping[str, int], spec: TensorSpec | None = None,
                 corpus: Mapping[str, Mapping[str, str]] | None = None,
                 table: PointTable | None = None) -> None:
        """table: the run's point numbering; the set's points are read in it (PointSet.for_run).
        None: a writer that says its points itself (outputs/declared.py)."""
        spec = spec or TensorSpec()
        self.spec, self.corpus = spec.for_run(table) if table is not None else spec, corpus
        self.out_dir, self.capacity = Path(out_dir), dict(capacity)
        self.tmp = self.out_dir / f".tmp-{self.spec.tag or 'default'}"
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True)
        self.arrays: dict[str, NpyWriter] = {}
        self.masks: dict[str, NpyWriter] = {}
        self.videos: dict[str, list[tuple[str, int, ShoulderFrame | None]]] = {}

    @property
    def columns(self) -> list[str]:
        """The keypoints columns add_video needs."""
        return needed_parts(self.spec) + (["width", "height"] if self.spec.normalize != "none"
                                          else [])

    def add_video(self, split: str, video: str, table: pa.Table) -> None:
        if split not in self.arrays:
            k = len(self.spec.points.indices)
            rows = self.capacity.get(split, 0)
            self.arrays[split] = NpyWriter(self.tmp / f"{split}.npy", np.dtype(self.spec.dtype),
                                           (rows, k, 3))
            self.masks[split] = NpyWriter(self.tmp / f"{split}.mask.npy", np.dtype(np.bool_),
                                          (rows, k))
            self.videos[split] = []
        vals, det, frame = video_tensor(table, self.spec)
        self.arrays[split].append(vals)
        self.masks[split].append(det)
        self.videos[split].append((video, len(vals), frame))

    def _index(self, split: str) -> tuple[pa.Table, list[str]]:
        """(the split's index table, its videos left unnormalised)."""
        names = [v for v, _, _ in self.videos[split]]
        lengths = np.array([n for _, n, _ in self.videos[split]], np.int64)
        idx = pa.table({"video": pa.array(names, pa.string()),
                        "start": pa.array(np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64)
                                          if len(lengths) else [], pa.int64()),
                        "length": pa.array(lengths, pa.int64())})
        idx = _corpus_columns(idx, self.corpus)
        if self.spec.normalize == "none":
            return idx, []
        fs = [f for _, _, f in self.videos[split]]
        idx = idx.append_column("normalized", pa.array([f.normalized for f in fs], pa.bool_()))
        for col in ("origin_x", "origin_y", "scale"):
            idx = idx.append_column(col, pa.array([getattr(f, col) for f in fs], pa.float64()))
        idx = idx.append_column("pose_frames", pa.array([f.pose_frames for f in fs], pa.int32()))
        return idx, [v for v, f in zip(names, fs, strict=True) if not f.normalized]

    def close(self, source: Path, exact: bool = True) -> dict[str, int]:
        """Finish the set for keypoints file `source`; returns frames per split."""
        not_normalized: list[str] = []
        frames = {}
        for split in self.arrays:
            self.arrays[split].close(exact)
            self.masks[split].close(exact)
            idx, skipped = self._index(split)
            not_normalized += skipped
            frames[split] = self.arrays[split].rows
            pq.write_table(idx, self.tmp / f"{split}.index.parquet")
        meta = points_meta(self.spec, frames, {s: len(v) for s, v in self.videos.items()},
                           not_normalized, source)
        (self.tmp / POINTS_JSON).write_text(json.dumps(meta, indent=2) + "\n")
        _install(self.tmp, tag_dir(self.out_dir, self.spec.tag), is_root=not self.spec.tag)
        return frames

    def discard(self) -> None:
        """Remove the temp folder (on any failure: nothing half-written is left behind)."""
        for w in [*self.arrays.values(), *self.masks.values()]:
            w.f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def file_table(keypoints: Path, table: PointTable) -> PointTable:
    """The numbering of a keypoints file of a family with this table: the wider one where the
    file's metadata says it was recorded (files without metadata: the table itself)."""
    return table.of_file(read_file_metadata(keypoints))


def write_tensors(
    keypoints: Path,
    out_dir: Path,
    table: PointTable,
    corpus: Mapping[str, Mapping[str, str]] | None = None,
    spec: TensorSpec | None = None,
    batch_size: int = 4096,
) -> dict[str, int]:
    """Write one tensor set for keypoints.parquet under out_dir (tensors/); returns frames per split.

    table: the family's point numbering (its declaration's `points`), read for this file.
    corpus: video -> {"speaker", "gloss", "translation"[, "extra"]}, copied into the index (extra:
    a corpus's other columns as a JSON object, only when some video has any).
    """
    keypoints = Path(keypoints)
    table = file_table(keypoints, table)
    spec = (spec or TensorSpec()).for_run(table)
    world = table.world[1] if table.world else ""
    if spec.coords == "world" and world not in pq.read_schema(keypoints).names:
        raise TensorsError(f"{keypoints} was made before {world} was recorded: --coords world "
                           "needs a run made by this version (run again into a new --out).")
    index = split_index(keypoints)
    capacity = {s: int(np.sum(t["length"].to_numpy())) if t.num_rows else 0 for s, t in index.items()}
    writer = TensorSetWriter(out_dir, capacity, spec, corpus, table)
    nth = dict.fromkeys(index, 0)
    try:
        for split, video, table in iter_videos(keypoints, writer.columns, batch_size):
            idx, i = index[split], nth[split]
            if i >= idx.num_rows or idx["video"][i].as_py() != video:
                raise TensorsError(f"{keypoints}: video {video} is not where the index expects "
                                   "it; the file changed while tensors were written. Run again.")
            writer.add_video(split, video, table)
            nth[split] = i + 1
        return writer.close(keypoints)
    except BaseException:
        writer.discard()
        raise


UNITS = {  # the normalised sets' units ("none": the table's own words)
    "shoulders": "pixels (x*width, y*height, z*width), minus the video's mean shoulder midpoint "
                 "(x, y only), divided by the video's mean shoulder width in pixels",
    "shoulders-per-frame": "pixels (x*width, y*height, z*width), minus the frame's shoulder "
                           "midpoint (x, y only), divided by the frame's shoulder width in pixels; "
                           "frames without a pose use the video's means",
}


def points_meta(spec: TensorSpec, frames: Mapping[str, int], videos: Mapping[str, int],
                not_normalized: list[str], keypoints: Path) -> dict[str, Any]:
    """The set's points.json: what each of the K points is and how the values were made."""
    st, t = keypoints.stat(), _table(spec)
    return {
        "format": TENSORS_FORMAT,
        "tag": spec.tag,
        **spec.as_dict(),
        "num_points": len(spec.points.indices),
        **t.meta,
        "indices": list(spec.points.indices),
        "points": spec.points.describe(),
        "channels": ["x", "y", "z"],
        "units": t.world_units if spec.coords == "world" else
        UNITS.get(spec.normalize, t.units),
        "mask": t.mask,
        "files": {"array": "<split>.npy", "mask": "<split>.mask.npy", "index": "<split>.index.parquet"},
        "splits": {s: {"frames": int(frames[s]), "videos": int(videos[s])} for s in frames},
        "not_normalized": not_normalized,
        "source": {"file": keypoints.name, "bytes": st.st_size,
                   "rows": pq.ParquetFile(keypoints).metadata.num_rows},
    }
