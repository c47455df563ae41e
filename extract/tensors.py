"""Model-input tensors from keypoints.parquet, streamed so memory stays flat at full scale.

Per split: `<split>.npy` float32 [frames, 543, 3] (x, y, z; pose, face, left hand, right hand;
0 where MediaPipe found nothing), `<split>.mask.npy` bool [frames, 543] (True where a point was
detected), `<split>.index.parquet` (video, start, length and corpus fields) to slice one video.
Arrays are plain .npy files written in place (not memmapped, so the writer's memory stays flat);
readers open them with np.load(mmap_mode="r").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from extract.schema import NUM_POINTS, OFFSETS, PARTS, column_block


def frames_to_points(batch: pa.RecordBatch | pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Keypoint rows -> (float32 [rows, 543, 3], bool [rows, 543]) in the tensors' point order."""
    n = batch.num_rows
    xyz = np.zeros((n, NUM_POINTS, 3), np.float32)
    mask = np.zeros((n, NUM_POINTS), bool)
    for part, (k, c) in PARTS.items():
        block, present = column_block(batch.column(part), k * c)
        o = OFFSETS[part]
        xyz[:, o : o + k] = block.reshape(n, k, c)[:, :, :3]
        mask[:, o : o + k] = present[:, None]
    return xyz, mask


def split_index(keypoints: Path, batch_size: int = 65536) -> dict[str, pa.Table]:
    """Per split: (video, start, length) in file order, streamed from two small columns.

    Memory is one batch plus one entry per video, whatever the number of frames.
    """
    runs: dict[str, list[list]] = {}  # split -> [[video, start, length], ...]
    pos: dict[str, int] = {}
    pf = pq.ParquetFile(keypoints)
    for batch in pf.iter_batches(batch_size=batch_size, columns=["split", "video"]):
        splits = batch.column("split").to_numpy(zero_copy_only=False)
        vids = batch.column("video").to_numpy(zero_copy_only=False)
        change = np.flatnonzero(np.r_[True, (vids[1:] != vids[:-1]) | (splits[1:] != splits[:-1])])
        for a, b in zip(change, np.r_[change[1:], len(vids)], strict=True):
            s, v, n = splits[a], vids[a], int(b - a)
            p = pos.setdefault(s, 0)
            rows = runs.setdefault(s, [])
            if rows and rows[-1][0] == v and rows[-1][1] + rows[-1][2] == p:
                rows[-1][2] += n  # the video goes on from the previous batch
            else:
                rows.append([v, p, n])
            pos[s] = p + n
    return {s: pa.table({"video": pa.array([r[0] for r in rows], pa.string()),
                         "start": pa.array([r[1] for r in rows], pa.int64()),
                         "length": pa.array([r[2] for r in rows], pa.int64())})
            for s, rows in runs.items()}


class _NpyWriter:
    """An .npy file of known shape filled by positioned writes, not a memmap.

    Pages written through a shared memmap count in the writer's RSS until they are unmapped, so
    the merge's RSS would grow to the size of the tensors (6 GB at full scale); pages written with
    write() are only page cache, which the kernel flushes and drops as it needs.
    """

    def __init__(self, path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.dtype = np.dtype(dtype)
        self.row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self.f = open(path, "wb")  # noqa: SIM115 (closed by close(), in write_tensors' finally)
        np.lib.format.write_array_header_1_0(self.f, {
            "descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
            "shape": tuple(int(x) for x in shape)})
        self.offset = self.f.tell()
        self.f.truncate(self.offset + shape[0] * self.row_bytes)

    def write(self, row: int, values: np.ndarray) -> None:
        self.f.seek(self.offset + row * self.row_bytes)
        self.f.write(np.ascontiguousarray(values, self.dtype).data)

    def close(self) -> None:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()


def write_tensors(
    keypoints: Path,
    out_dir: Path,
    corpus: Mapping[str, Mapping[str, str]] | None = None,
    batch_size: int = 4096,
) -> dict[str, int]:
    """Write the per-split tensors for keypoints.parquet; returns frames per split.

    corpus: video -> {"speaker", "gloss", "translation"}, copied into the index.
    Written in a temp folder that replaces out_dir at the end, so readers never see half a set.
    Streams batch_size rows at a time: memory does not grow with the dataset.
    """
    index = split_index(keypoints)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    arrays: dict[str, _NpyWriter] = {}
    masks: dict[str, _NpyWriter] = {}
    pos: dict[str, int] = {}
    try:
        for split, idx in index.items():
            rows = int(np.sum(idx["length"].to_numpy())) if idx.num_rows else 0
            arrays[split] = _NpyWriter(tmp / f"{split}.npy", np.float32, (rows, NUM_POINTS, 3))
            masks[split] = _NpyWriter(tmp / f"{split}.mask.npy", np.bool_, (rows, NUM_POINTS))
            pos[split] = 0
            if corpus is not None:
                vids = idx["video"].to_pylist()
                for key in ("speaker", "gloss", "translation"):
                    idx = idx.append_column(key, pa.array([corpus.get(v, {}).get(key, "")
                                                           for v in vids], pa.string()))
            pq.write_table(idx, tmp / f"{split}.index.parquet")
        pf = pq.ParquetFile(keypoints)
        for batch in pf.iter_batches(batch_size=batch_size, columns=["split", *PARTS]):
            splits = batch.column("split").to_numpy(zero_copy_only=False)
            xyz, mask = frames_to_points(batch)
            cut = np.flatnonzero(np.r_[True, splits[1:] != splits[:-1]])
            for a, b in zip(cut, np.r_[cut[1:], len(splits)], strict=True):
                s = splits[a]
                arrays[s].write(pos[s], xyz[a:b])
                masks[s].write(pos[s], mask[a:b])
                pos[s] = int(pos[s] + b - a)
    finally:
        for w in (*arrays.values(), *masks.values()):
            w.close()
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return pos
