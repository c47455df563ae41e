"""Read a tensor set back: per-video arrays with their corpus fields, for any training loop.

numpy and pyarrow only (no torch): a PyTorch Dataset wraps SplitData in three lines (README).
Arrays are memory-mapped, so opening the train split costs nothing and each worker process of a
DataLoader reads only the videos it is asked for.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from phoenix_keypoints.extract.outputs.tensors import POINTS_JSON, TensorsError, tag_dir


def tensors_root(run_dir: Path) -> Path:
    """A run folder's tensors/ (a tensors/ folder itself is accepted too)."""
    run_dir = Path(run_dir)
    return run_dir if (run_dir / POINTS_JSON).is_file() and not (run_dir / "tensors").is_dir() \
        else run_dir / "tensors"


def list_tags(run_dir: Path) -> list[str]:
    """The tensor sets present: "" for the default set, then the other tags by name."""
    root = tensors_root(run_dir)
    out = [""] if (root / POINTS_JSON).is_file() else []
    if root.is_dir():
        out += sorted(p.name for p in root.iterdir()
                      if p.is_dir() and not p.name.startswith(".") and (p / POINTS_JSON).is_file())
    return out


def load_meta(run_dir: Path, tag: str | None = None) -> dict[str, Any]:
    """A set's points.json; a clear error naming the sets that do exist when it is missing."""
    root = tensors_root(run_dir)
    path = tag_dir(root, tag) / POINTS_JSON
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        have = ", ".join(repr(t) if t else "'' (default)" for t in list_tags(run_dir)) or "none"
        raise TensorsError(
            f"no tensor set {tag!r} in {root} (sets there: {have}). Write it with `phoenix-keypoints "
            f"tensors --out RUN_DIR ...{' --name ' + tag if tag else ''}`."
        ) from None
    except (OSError, ValueError) as e:
        raise TensorsError(f"{path}: unreadable ({e}); write the set again.") from None


@dataclass
class SplitData(Sequence):
    """One split of one tensor set: len() videos; [i] or .video(name) -> that video's sample."""

    split: str
    tag: str
    meta: dict[str, Any]
    keypoints: np.ndarray  # [frames, K, 3], memory-mapped
    mask: np.ndarray  # [frames, K] bool, memory-mapped
    index: dict[str, list]  # column -> values, one per video
    mmap: bool = True  # False: items are read from the files, not through the mappings

    def _rows(self, arr: np.ndarray, s: int, n: int) -> np.ndarray:
        if self.mmap:
            return np.array(arr[s : s + n])  # a copy: writable, independent of the file
        assert isinstance(arr, np.memmap) and arr.filename is not None
        row = int(np.prod(arr.shape[1:]))
        out = np.fromfile(arr.filename, arr.dtype, count=n * row,
                          offset=arr.offset + s * row * arr.dtype.itemsize)
        return out.reshape(n, *arr.shape[1:])

    def __len__(self) -> int:
        return len(self.index["video"])

    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        s, n = self.index["start"][i], self.index["length"][i]
        out = {c: v[i] for c, v in self.index.items()}
        out["split"] = self.split
        out["keypoints"] = self._rows(self.keypoints, s, n)
        out["mask"] = self._rows(self.mask, s, n)
        return out

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self[i]

    @property
    def videos(self) -> list[str]:
        return list(self.index["video"])

    @property
    def point_names(self) -> list[str]:
        return [p["name"] for p in self.meta["points"]]

    def video(self, name: str) -> dict[str, Any]:
        try:
            return self[self.index["video"].index(name)]
        except ValueError:
            raise KeyError(f"video {name} is not in split {self.split}") from None


def load_split(run_dir: Path, split: str, tag: str | None = None, mmap: bool = True) -> SplitData:
    """Open split `split` of tensor set `tag` ("" or None: the default set in tensors/ itself).

    Items are copies of one video's rows. mmap=True reads them through memory maps (fast random
    access; the pages read count in the process's resident memory, as page cache the kernel can
    drop); mmap=False reads each one with a plain file read, for one pass over everything
    (an export) without the resident size growing.

    Warns when keypoints.parquet changed after the set was written (it is then stale: write it
    again with `phoenix-keypoints tensors`).
    """
    run_dir = Path(run_dir)
    meta = load_meta(run_dir, tag)
    d = tag_dir(tensors_root(run_dir), tag)
    if split not in meta["splits"]:
        raise TensorsError(f"tensor set {tag or 'default'!r} has no split {split!r} "
                           f"(it has {', '.join(meta['splits']) or 'none'})")
    try:
        arr = np.load(d / f"{split}.npy", mmap_mode="r")
        mask = np.load(d / f"{split}.mask.npy", mmap_mode="r")
        table = pq.read_table(d / f"{split}.index.parquet")
    except (OSError, ValueError) as e:
        raise TensorsError(f"{d}: split {split} unreadable ({e}); write the set again.") from None
    want = meta["splits"][split]["frames"]
    if arr.shape[:2] != (want, len(meta["indices"])) or mask.shape != arr.shape[:2]:
        raise TensorsError(f"{d}: {split} arrays are {arr.shape}/{mask.shape}, points.json says "
                           f"{want} frames x {len(meta['indices'])} points; write the set again.")
    src = run_dir / meta["source"]["file"]
    if src.is_file() and src.stat().st_size != meta["source"]["bytes"]:
        warnings.warn(f"{src} changed after tensor set {tag or 'default'!r} was written; "
                      "it may be stale (write it again with `phoenix-keypoints tensors`)",
                      stacklevel=2)
    return SplitData(split, tag or "", meta, arr, mask, table.to_pydict(), mmap)
