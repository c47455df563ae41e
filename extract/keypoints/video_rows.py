"""One video's frames through one estimator (Holistic's graph, or the whole-body models), into
column blocks ready for Arrow.

Numbers go straight into preallocated float32 blocks (one per landmark column the estimator
declares) and become Arrow columns with one call per chunk, so per-frame Python is the estimator's
call plus the landmark copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from extract.keypoints.estimator import Declaration, Estimator, declaration
from extract.keypoints.frames import Frame
from extract.keypoints.schema import part_column


@dataclass
class Block:
    """Rows for some frames: metadata lists plus one float32 block and presence mask per part (and
    one int list per count column), as the estimator's declaration says."""

    split: list[str] = field(default_factory=list)
    video: list[str] = field(default_factory=list)
    frame: list[int] = field(default_factory=list)
    time_s: list[float | None] = field(default_factory=list)
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
    counts: dict[str, list[int | None]] = field(default_factory=dict)
    declaration: Declaration = field(default_factory=lambda: declaration(None))

    @property
    def layout(self) -> dict[str, tuple[int, int]]:
        return self.declaration.parts

    def __len__(self) -> int:
        return len(self.frame)

    def to_table(self) -> pa.Table:
        cols: dict[str, pa.Array] = {
            "split": pa.array(self.split, pa.string()),
            "video": pa.array(self.video, pa.string()),
            "frame": pa.array(self.frame, pa.int32()),
            "time_s": pa.array(self.time_s, pa.float64()),
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
        for name in self.declaration.counts:
            cols[name] = pa.array(self.counts.get(name, []), pa.int32())
        return pa.table(cols, schema=self.declaration.schema)


STATUS_NOT_DECODED = "not_decoded"


def _exactly(frames: Iterable[Frame], n: int, image: str) -> Iterator[Frame]:
    """n frames: the source's first n, then rows saying the source ended early (its count was
    planned, and a part is trusted only with every planned row). Sources pad themselves, with
    their own image names; this is the guarantee behind them."""
    it: Iterator[Frame] | None = iter(frames)
    for _ in range(n):
        f = next(it, None) if it is not None else None
        if f is None:
            it = None
            f = Frame(None, STATUS_NOT_DECODED, "the source ended before this frame", image)
        yield f


def extract_video(
    extractor: Estimator,
    split: str,
    video: str,
    frames: Iterable[Frame],
    n: int,
    out: Block,
    on_frame: Callable[[], None] | None = None,
    locator: str = "",
) -> None:
    """Append one row per planned frame of a video to `out` (exactly n), tracking reset first so
    videos are independent.

    A frame that cannot be read gets its row with null keypoints and a status saying why; MediaPipe
    is not shown it, so tracking carries on from the last good frame. Every row records the size,
    mtime and sha256 of the bytes it was made from (null when none could be read).
    """
    extractor.start_video()
    parts, count_names = extractor.declaration.parts, extractor.declaration.counts
    values = {p: np.zeros((n, k * c), np.float32) for p, (k, c) in parts.items()}
    present = {p: np.zeros(n, bool) for p in parts}
    counts: dict[str, list[int | None]] = {c: [None] * n for c in count_names}
    first_size: tuple[int, int] | None = None
    for i, f in enumerate(_exactly(frames, n, locator)):
        rgb, status, note = f.rgb, f.status, f.note
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
            except (RuntimeError, ValueError) as e:  # the estimator refused this frame
                status, note, found = _error_status(extractor), str(e)[:200], {}
                extractor.start_video()  # the graph's state is unknown after an error
            _place(found, i, values, present, counts)
        out.split.append(split)
        out.video.append(video)
        out.frame.append(i)
        out.time_s.append(f.time_s)
        out.image.append(f.image)
        out.width.append(width)
        out.height.append(height)
        out.status.append(status)
        out.note.append(note or None)
        out.file_size.append(f.size)
        out.file_mtime_ns.append(f.mtime_ns)
        out.file_sha256.append(f.sha256)
        if on_frame is not None:
            on_frame()
    for part in parts:
        out.values.setdefault(part, []).append(values[part])
        out.present.setdefault(part, []).append(present[part])
    for name in count_names:
        out.counts.setdefault(name, []).extend(counts[name])


def _error_status(extractor: Estimator) -> str:
    """A frame the estimator raised on: Holistic's status keeps its old name."""
    name = extractor.declaration.name
    return "mediapipe_error" if name == "holistic" else f"{name}_error"


def _place(found: dict, i: int, values: dict[str, np.ndarray], present: dict[str, np.ndarray],
           counts: dict[str, list[int | None]]) -> None:
    """Row i's values from one frame's result (landmark arrays, or None; counts as ints)."""
    for part, arr in found.items():
        if part in counts:
            counts[part][i] = int(arr)
        elif arr is not None:
            values[part][i] = arr
            present[part][i] = True
