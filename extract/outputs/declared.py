"""The tensor sets of a family without presets: every point of its declaration, `[frames, points,
channels]` and a mask, streamed video by video like the preset sets (tensors.py). The default
set (tensors/ itself) holds the values as they are; `tensors` writes more sets of the same points
with gaps filled (--fill interpolate), in float16, or under a name; what needs a point table
(--preset, --points, --normalize, --coords world) is refused, naming what to declare.

What the set holds is read from the declaration alone: its landmark columns in order (one point
axis), its value channels, its units, its point names, and its presence rule for the mask (a point
is True where its column's list exists and, for a family with a score threshold, its last value is
at least that). Rows of frames that were not read are zeros and False; the values are
keypoints.parquet's as they are: the mask only says which to trust.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.estimator import Declaration, declaration
from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata
from phoenix_keypoints.extract.keypoints.points import PointSet
from phoenix_keypoints.extract.keypoints.schema import column_block
from phoenix_keypoints.extract.outputs.normalize import interpolate_gaps
from phoenix_keypoints.extract.outputs.tensors import (
    POINTS_JSON,
    TENSORS_FORMAT,
    NpyWriter,
    TensorsError,
    TensorSetWriter,
    TensorSpec,
    _install,
    iter_videos,
    split_index,
    tag_dir,
    write_tensors,
)


def found_points(decl: Declaration, vals: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """[T, points]: where the declaration's presence rule finds each point of `vals` ([T, points,
    channels]; or [T, people, points, channels] with `rows` [T, people] or per point: the same
    rule per person): its row's list exists (`rows`: [T], or [T, points] already per point) and,
    for a family with a score threshold, its last value (the score) is at least that (a NaN
    score is not). The one rule of the tensor mask and of every export: a point it leaves out
    is written absent everywhere (.pose confidence 0, each pkl as its reader takes an absent
    point)."""
    found = rows if rows.ndim == vals.ndim - 1 else np.repeat(rows[..., None], vals.shape[-2],
                                                              axis=-1)
    if decl.score_threshold is not None:
        found = found & (vals[..., -1] >= decl.score_threshold)
    return found


def video_tensor(table: pa.Table, decl: Declaration) -> tuple[np.ndarray, np.ndarray]:
    """One video's rows -> ([T, points, channels] float32, as keypoints.parquet holds them; [T,
    points] where the point is found: found_points)."""
    vals, masks = [], []
    for part, (n, c) in decl.parts.items():
        block, present = column_block(table.column(part), n * c)
        block = block.reshape(-1, n, c)
        vals.append(block)
        masks.append(found_points(decl, block, present))
    if len(vals) == 1:
        return vals[0], masks[0]
    return np.concatenate(vals, axis=1), np.concatenate(masks, axis=1)


def list_items(col: pa.ChunkedArray | pa.Array, width: int) -> np.ndarray:
    """A list column (items x `width` values a row, null where a frame gave none) -> float32
    [rows, the most items in a row, width], NaN past each row's items and in null rows."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    lengths = np.asarray(pc.list_value_length(arr).fill_null(0), dtype=np.int64)
    if (lengths % width).any():
        raise ValueError(f"a list column's row holds {lengths[lengths % width != 0][0]} values, "
                         f"not items of {width}")
    counts = lengths // width
    out = np.full((len(arr), int(counts.max(initial=0)), width), np.nan, np.float32)
    flat = np.asarray(arr.flatten(), dtype=np.float32).reshape(-1, width)
    rows = np.repeat(np.arange(len(arr)), counts)
    out[rows, np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)] = flat
    return out


def people_tensor(decl: Declaration, lists: Mapping[str, np.ndarray]) -> np.ndarray:
    """Every person of a family that declares `people`: its list columns' items ([T, items,
    ...], NaN past a frame's items, as list_items or a clip's arrays give them) -> float32 [T,
    people, points, channels] in the point order of its parts, NaN where a person is not."""
    blocks = []
    for part, (n, c) in decl.parts.items():
        items = np.asarray(lists[decl.people_of()[part]], np.float32)
        blocks.append(items.reshape(len(items), items.shape[1], n, c))
    most = max((b.shape[1] for b in blocks), default=0)
    padded = [np.pad(b, ((0, 0), (0, most - b.shape[1]), (0, 0), (0, 0)),
                     constant_values=np.nan) for b in blocks]
    return np.concatenate(padded, axis=2)


def most_people(keypoints: Path, decl: Declaration) -> int | None:
    """The most persons any frame of a run holds (its first people column's items; None where
    the family declares none): what the tensors record and the report say."""
    if not decl.people:
        return None
    column, part = next(iter(decl.people.items()))
    n, c = decl.parts[part]
    most = 0
    for batch in pq.ParquetFile(keypoints).iter_batches(columns=[column]):  # a batch at a time
        lengths = pc.list_value_length(batch.column(0)).fill_null(0)
        most = max(most, int(np.asarray(lengths, dtype=np.int64).max(initial=0)))
    return most // (n * c)


def describe_points(decl: Declaration) -> list[dict[str, Any]]:
    """points.json's entry per point: index, part, index in the part, name."""
    out: list[dict[str, Any]] = []
    for part, (lo, hi) in decl.point_parts().items():
        for i in range(lo, hi):
            out.append({"k": i, "index": i, "part": part, "part_index": i - lo,
                        "name": f"{part}.{decl.point_name(i)}"})
    return out


def num_points(decl: Declaration) -> int:
    return sum(n for n, _ in decl.parts.values())


class DeclaredTensorWriter(TensorSetWriter):
    """A set of a family without presets (the default one: tensors/ itself; `spec`: another, of
    declared_spec), as a preset set's files."""

    def __init__(self, out_dir: Path, capacity: Mapping[str, int], decl: Declaration,
                 corpus: Mapping[str, Mapping[str, str]] | None = None,
                 spec: TensorSpec | None = None) -> None:
        super().__init__(out_dir, capacity, spec, corpus)
        self.decl = decl

    @property
    def columns(self) -> list[str]:
        return list(self.decl.parts)

    def add_video(self, split: str, video: str, table: pa.Table) -> None:
        if split not in self.arrays:
            rows, k = self.capacity.get(split, 0), num_points(self.decl)
            self.arrays[split] = NpyWriter(self.tmp / f"{split}.npy", np.dtype(self.spec.dtype),
                                           (rows, k, len(self.decl.values)))
            self.masks[split] = NpyWriter(self.tmp / f"{split}.mask.npy", np.dtype(np.bool_),
                                          (rows, k))
            self.videos[split] = []
        vals, mask = video_tensor(table, self.decl)
        if self.spec.fill == "interpolate":  # the mask stays what was found, as a preset set's
            vals = interpolate_gaps(vals.astype(np.float64), mask, self.spec.max_gap)[0]
        self.arrays[split].append(vals)
        self.masks[split].append(mask)
        self.videos[split].append((video, len(vals), None))

    def close(self, source: Path, exact: bool = True) -> dict[str, int]:
        frames = {}
        for split in self.arrays:
            self.arrays[split].close(exact)
            self.masks[split].close(exact)
            idx, _ = self._index(split)
            frames[split] = self.arrays[split].rows
            pq.write_table(idx, self.tmp / f"{split}.index.parquet")
        meta = points_meta(self.decl, frames, {s: len(v) for s, v in self.videos.items()}, source,
                           self.spec)
        (self.tmp / POINTS_JSON).write_text(json.dumps(meta, indent=2) + "\n")
        _install(self.tmp, tag_dir(self.out_dir, self.spec.tag), is_root=not self.spec.tag)
        return frames


def mask_rule(decl: Declaration) -> str:
    """points.json's words for the mask, from the declaration's presence rule."""
    why = f" ({decl.presence_note})" if decl.presence_note else ""
    rule = ("True where the point's column was found" if decl.score_threshold is None else
            f"True where the point's score is at least {decl.score_threshold}{why}")
    return f"{rule}; frames not read are zeros and False"


def points_meta(decl: Declaration, frames: Mapping[str, int], videos: Mapping[str, int],
                keypoints: Path, spec: TensorSpec | None = None) -> dict[str, Any]:
    """The set's points.json: what each point is and how the values were made."""
    st, spec = keypoints.stat(), spec or TensorSpec()
    k = num_points(decl)
    return {
        "format": TENSORS_FORMAT,
        "tag": spec.tag,
        "estimator": decl.name,
        "preset": f"{decl.name}-{k}",
        **{key: v for key, v in spec.as_dict().items() if key != "points"},  # fill, dtype, ...
        "num_points": k,
        "indices": list(range(k)),
        "points": describe_points(decl),
        "channels": list(decl.values),
        "units": decl.units,
        "mask": mask_rule(decl),
        "score_threshold": decl.score_threshold,
        # which person the set holds, where the family declares every person (people)
        **({"person": decl.person_note(most_people(keypoints, decl))} if decl.people else {}),
        "files": {"array": "<split>.npy", "mask": "<split>.mask.npy", "index": "<split>.index.parquet"},
        "splits": {s: {"frames": int(frames[s]), "videos": int(videos[s])} for s in frames},
        "not_normalized": [],
        "source": {"file": keypoints.name, "bytes": st.st_size,
                   "rows": pq.ParquetFile(keypoints).metadata.num_rows},
    }


def declared_spec(decl: Declaration, spec: TensorSpec) -> TensorSpec:
    """`tensors`' spec for a family without a point table: every declared point, named as its
    points.json names them ("openpose25-25"), where it asks for more than the default set; what
    only a point table gives (choosing points, normalising, world coordinates) is refused with
    what the family would declare for it (a TensorsError)."""
    k, full = num_points(decl), f"{decl.name}-{num_points(decl)}"
    needs = [why for asked, why in (
        (spec.points.spec is not None, "--points chooses among a point table's parts"),
        (spec.points.name not in ("", full), f"--preset {spec.points.name} is a point table's "
                                              "preset"),
        (spec.normalize != "none", f"--normalize {spec.normalize} needs a point table's `anchor` "
                                   "(the part and its two shoulder points)"),
        (spec.coords != "image", f"--coords {spec.coords} needs a point table's `world` (the "
                                 "column of its world coordinates)")) if asked]
    if needs:
        raise TensorsError(
            f"{needs[0]}, and the {decl.name} family declares none: its tensor sets hold every "
            f"declared point ({k}), with --fill, --max-gap, --dtype and --name as asked. A family "
            "declares one as its Declaration's `points` (a PointTable, docs/families.md).")
    return spec if spec.is_default else replace(spec, points=PointSet(full, tuple(range(k))))


def write_declared_tensors(keypoints: Path, out_dir: Path, decl: Declaration,
                           corpus: Mapping[str, Mapping[str, str]] | None = None,
                           batch_size: int = 4096, spec: TensorSpec | None = None
                           ) -> dict[str, int]:
    """A set of such a family's keypoints.parquet: the default one (a lost tensors/ written
    again), or `spec`'s (declared_spec's: every point, gaps filled, float16, named)."""
    index = split_index(keypoints)
    capacity = {s: int(np.sum(t["length"].to_numpy())) if t.num_rows else 0 for s, t in index.items()}
    writer = DeclaredTensorWriter(out_dir, capacity, decl, corpus, spec)
    try:
        for split, video, table in iter_videos(keypoints, writer.columns, batch_size):
            writer.add_video(split, video, table)
        return writer.close(keypoints)
    except BaseException:
        writer.discard()
        raise


def write_family_tensors(keypoints: Path, out_dir: Path,
                         corpus: Mapping[str, Mapping[str, str]] | None = None,
                         spec: TensorSpec | None = None, batch_size: int = 4096) -> dict[str, int]:
    """A tensor set of keypoints.parquet as its family declares them: presets, --points and
    normalisation (tensors.write_tensors) for a family that has them, else a set of every
    declared point (declared_spec says which options apply)."""
    decl = declaration(read_file_metadata(keypoints))
    if decl.tensor_presets:
        return write_tensors(keypoints, out_dir, decl.points, corpus, spec, batch_size)
    return write_declared_tensors(keypoints, out_dir, decl, corpus, batch_size,
                                  declared_spec(decl, spec or TensorSpec()))
