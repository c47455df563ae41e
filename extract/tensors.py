"""Model-input tensors from keypoints.parquet, streamed so memory stays flat at full scale.

Per split: `<split>.npy` float32 [frames, 543, 3] (x, y, z; pose, face, left hand, right hand;
0 where MediaPipe found nothing), `<split>.mask.npy` bool [frames, 543] (True where a point was
detected), `<split>.index.parquet` (video, start, length and corpus fields) to slice one video.
Arrays are written with np.lib.format.open_memmap: readers open them with np.load(mmap_mode="r").
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
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


def split_index(keypoints: Path) -> dict[str, pa.Table]:
    """Per split: (video, start, length) in file order, from two small columns."""
    t = pq.read_table(keypoints, columns=["split", "video"])
    out: dict[str, pa.Table] = {}
    for split in pc.unique(t["split"]).to_pylist():
        vids = t.filter(pc.equal(t["split"], split))["video"].to_numpy(zero_copy_only=False)
        change = np.flatnonzero(np.r_[True, vids[1:] != vids[:-1]])
        lengths = np.diff(np.r_[change, len(vids)])
        out[split] = pa.table({"video": pa.array(vids[change], pa.string()),
                               "start": pa.array(change, pa.int64()),
                               "length": pa.array(lengths, pa.int64())})
    return out


def write_tensors(
    keypoints: Path,
    out_dir: Path,
    corpus: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, int]:
    """Write the per-split tensors for keypoints.parquet; returns frames per split.

    corpus: video -> {"speaker", "gloss", "translation"}, copied into the index.
    Written in a temp folder that replaces out_dir at the end, so readers never see half a set.
    """
    index = split_index(keypoints)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    arrays, masks, pos = {}, {}, {}
    for split, idx in index.items():
        rows = int(np.sum(idx["length"].to_numpy())) if idx.num_rows else 0
        arrays[split] = np.lib.format.open_memmap(tmp / f"{split}.npy", "w+", np.float32,
                                                  (rows, NUM_POINTS, 3))
        masks[split] = np.lib.format.open_memmap(tmp / f"{split}.mask.npy", "w+", np.bool_,
                                                 (rows, NUM_POINTS))
        pos[split] = 0
        if corpus is not None:
            vids = idx["video"].to_pylist()
            for key in ("speaker", "gloss", "translation"):
                idx = idx.append_column(key, pa.array([corpus.get(v, {}).get(key, "")
                                                       for v in vids], pa.string()))
        pq.write_table(idx, tmp / f"{split}.index.parquet")
    pf = pq.ParquetFile(keypoints)
    for batch in pf.iter_batches(batch_size=4096, columns=["split", *PARTS]):
        splits = batch.column("split").to_numpy(zero_copy_only=False)
        xyz, mask = frames_to_points(batch)
        cut = np.flatnonzero(np.r_[True, splits[1:] != splits[:-1]])
        for a, b in zip(cut, np.r_[cut[1:], len(splits)], strict=True):
            s = splits[a]
            p = pos[s]
            arrays[s][p : p + b - a] = xyz[a:b]
            masks[s][p : p + b - a] = mask[a:b]
            pos[s] = int(p + b - a)
    for s in arrays:
        arrays[s].flush()
        masks[s].flush()
    del arrays, masks
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return pos
