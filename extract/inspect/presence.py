"""Where the face was found, read from a tensor set's mask instead of keypoints.parquet's face column.

The face column is 85% of keypoints.parquet; decoding it (zstd, byte-stream-split and 1,404 list
levels per row) is most of what reading the file costs, yet the report needs only whether a face
was found. Every merge writes the default tensor set beside the keypoints, whose mask holds exactly
that (True where the estimator found the point), one byte per point per frame. One face column of
the mask is read per block of rows with plain positioned reads (no memory map, so the pages read
are not counted in the process's memory).

The set is used only when its points.json names this very keypoints file (same size and row
count) and its index lists the same videos at the same rows; otherwise the caller decodes the face
column.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from phoenix_keypoints.extract.inspect.rows import ReportError
from phoenix_keypoints.extract.outputs.tensors import POINTS_JSON


class FaceMask:
    """Reads, split by split and in file order, whether each row's face was found."""

    def __init__(self, root: Path, column: int, splits: dict[str, dict[int, str]]) -> None:
        self.root, self.column, self.index = Path(root), column, splits
        self.cursor = dict.fromkeys(splits, 0)
        self.files: dict[str, tuple[int, int, int]] = {}  # split -> (fd, data offset, row width)

    @classmethod
    def open(cls, tensors_root: Path, keypoints: Path, face_point: int) -> FaceMask | None:
        """The default tensor set's face mask when it was made from this keypoints file, else None.
        face_point: a face point's index in the family's point order (points.json's `indices`)."""
        root = Path(tensors_root)
        try:
            meta = json.loads((root / POINTS_JSON).read_text())
            st = Path(keypoints).stat()
            rows = pq.ParquetFile(keypoints).metadata.num_rows
            source = meta["source"]
            if source["bytes"] != st.st_size or source["rows"] != rows:
                return None
            column = list(meta["indices"]).index(face_point)  # any face point would do
            splits = {}
            for split in meta["splits"]:
                idx = pq.read_table(root / f"{split}.index.parquet", columns=["video", "start"])
                splits[split] = dict(zip(idx["start"].to_pylist(), idx["video"].to_pylist(),
                                         strict=True))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return cls(root, column, splits)

    def _file(self, split: str) -> tuple[int, int, int]:
        if split not in self.files:
            path = self.root / f"{split}.mask.npy"
            with open(path, "rb") as f:
                major, _ = np.lib.format.read_magic(f)
                read = (np.lib.format.read_array_header_1_0 if major == 1
                        else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read(f)
                offset = f.tell()
            if fortran or dtype != np.bool_ or len(shape) != 2:
                raise ReportError(f"{path}: not a tensor mask; run `phoenix-keypoints tensors`")
            self.files[split] = (os.open(path, os.O_RDONLY), offset, shape[1])
        return self.files[split]

    def take(self, splits: np.ndarray, videos: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Face found, for the next rows of the file: their splits, videos, and where videos start."""
        out = np.empty(len(splits), bool)
        is_start = np.zeros(len(splits), bool)
        is_start[starts] = True
        runs = np.flatnonzero(np.r_[True, splits[1:] != splits[:-1]])
        for a, b in zip(runs, np.r_[runs[1:], len(splits)], strict=True):
            split = str(splits[a])
            if split not in self.cursor:
                raise self._mismatch(f"split {split} is not in the tensor set")
            pos = self.cursor[split]
            for i in np.flatnonzero(is_start[a:b]):  # every video must start where the index says
                if self.index[split].get(pos + int(i)) != videos[a + i]:
                    raise self._mismatch(f"{split}/{videos[a + i]} is not at row {pos + int(i)}")
            fd, offset, width = self._file(split)
            raw = os.pread(fd, (b - a) * width, offset + pos * width)
            if len(raw) != (b - a) * width:
                raise self._mismatch(f"{split}.mask.npy ends before row {pos + b - a}")
            out[a:b] = np.frombuffer(raw, np.bool_).reshape(b - a, width)[:, self.column]
            self.cursor[split] = pos + (b - a)
        return out

    def _mismatch(self, what: str) -> ReportError:
        return ReportError(f"{self.root} does not match keypoints.parquet ({what}). Rewrite it with "
                           "`phoenix-keypoints tensors --out RUN`, or delete it (the report then "
                           "reads the face column, which is slower).")

    def close(self) -> None:
        for fd, _, _ in self.files.values():
            os.close(fd)
        self.files.clear()
