"""One video's frames through one Holistic graph, into column blocks ready for Arrow.

Numbers go straight into preallocated float32 blocks (one per body part) and become Arrow columns
with one call per chunk, so per-frame Python is MediaPipe's call plus the landmark copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from extract.frames import read_frame
from extract.holistic import Extractor
from extract.schema import SCHEMA, layout, part_column


@dataclass
class Block:
    """Rows for some frames: metadata lists plus one float32 block and presence mask per part."""

    split: list[str] = field(default_factory=list)
    video: list[str] = field(default_factory=list)
    frame: list[int] = field(default_factory=list)
    image: list[str] = field(default_factory=list)
    width: list[int | None] = field(default_factory=list)
    height: list[int | None] = field(default_factory=list)
    status: list[str] = field(default_factory=list)
    note: list[str | None] = field(default_factory=list)
    file_size: list[int | None] = field(default_factory=list)
    file_mtime_ns: list[int | None] = field(default_factory=list)
    file_sha256: list[str | None] = field(default_factory=list)
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)
    present: dict[str, list[np.ndarray]] = field(default_factory=dict)
    layout: dict[str, tuple[int, int]] = field(default_factory=layout)

    def __len__(self) -> int:
        return len(self.frame)

    def to_table(self) -> pa.Table:
        cols: dict[str, pa.Array] = {
            "split": pa.array(self.split, pa.string()),
            "video": pa.array(self.video, pa.string()),
            "frame": pa.array(self.frame, pa.int32()),
            "image": pa.array(self.image, pa.string()),
            "width": pa.array(self.width, pa.int32()),
            "height": pa.array(self.height, pa.int32()),
            "status": pa.array(self.status, pa.string()),
            "note": pa.array(self.note, pa.string()),
            "file_size": pa.array(self.file_size, pa.int64()),
            "file_mtime_ns": pa.array(self.file_mtime_ns, pa.int64()),
            "file_sha256": pa.array(self.file_sha256, pa.string()),
        }
        for part, (n, c) in self.layout.items():
            vals = self.values.get(part) or [np.zeros((0, n * c), np.float32)]
            pres = self.present.get(part) or [np.zeros(0, bool)]
            cols[part] = part_column(np.concatenate(vals), np.concatenate(pres), n * c)
        return pa.table(cols, schema=SCHEMA)


def extract_video(
    extractor: Extractor,
    root: Path,
    split: str,
    video: str,
    folder: str,
    files: Sequence[str],
    out: Block,
    on_frame: Callable[[], None] | None = None,
) -> None:
    """Append one row per frame of a video to `out`, tracking reset first so videos are independent.

    A frame that cannot be read gets its row with null keypoints and a status saying why; MediaPipe
    is not shown it, so tracking carries on from the last good frame. Every row records the size,
    mtime and sha256 of the bytes it was made from (null when none could be read).
    """
    extractor.start_video()
    n = len(files)
    values = {p: np.zeros((n, k * c), np.float32) for p, (k, c) in extractor.layout.items()}
    present = {p: np.zeros(n, bool) for p in extractor.layout}
    first_size: tuple[int, int] | None = None
    for i, name in enumerate(files):
        rel = f"{folder}/{name}"
        rgb, status, note, source = read_frame(root / rel)
        width = height = None
        if rgb is not None:
            height, width = rgb.shape[:2]
            if first_size is None:
                first_size = (width, height)
            elif (width, height) != first_size:
                size_note = f"size {width}x{height}, video's first frame {first_size[0]}x" \
                            f"{first_size[1]}"
                note = f"{note}; {size_note}" if note else size_note
            try:
                found = extractor.process(rgb)
            except (RuntimeError, ValueError) as e:  # MediaPipe refused this frame
                status, note, found = "mediapipe_error", str(e)[:200], {}
                extractor.start_video()  # the graph's state is unknown after an error
            for part, arr in found.items():
                if arr is not None:
                    values[part][i] = arr
                    present[part][i] = True
        out.split.append(split)
        out.video.append(video)
        out.frame.append(i)
        out.image.append(rel)
        out.width.append(width)
        out.height.append(height)
        out.status.append(status)
        out.note.append(note or None)
        out.file_size.append(source.size)
        out.file_mtime_ns.append(source.mtime_ns)
        out.file_sha256.append(source.sha256)
        if on_frame is not None:
            on_frame()
    for part in extractor.layout:
        out.values.setdefault(part, []).append(values[part])
        out.present.setdefault(part, []).append(present[part])
