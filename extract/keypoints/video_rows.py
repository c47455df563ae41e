"""One video's frames through one estimator (Holistic's graph, or the whole-body models), into
column blocks ready for Arrow.

Numbers go straight into preallocated float32 blocks (one per landmark column the estimator
declares) and become Arrow columns with one call per chunk, so per-frame Python is the estimator's
call plus the landmark copy.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.estimator import Declaration, Estimator, declaration
from phoenix_keypoints.extract.keypoints.frames import Frame
from phoenix_keypoints.extract.keypoints.schema import part_column


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
STREAK = 16  # frames in a row, from an estimator's first, failing the same way: its own fault


class KeepsFailing(Exception):
    """The estimator failed the same way on each of the first STREAK frames it was given: its
    model (or library) is at fault, not the frames, so the run stops and says why rather than
    give a corpus of that status. `model_fault`: the user's model files are (exit 2)."""

    def __init__(self, why: str, model_fault: bool) -> None:
        super().__init__(why)
        self.model_fault = model_fault


# estimator -> (status, note, frames so far) while every frame it ran failed the same way;
# None once one did not
_streaks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _count(extractor: Estimator, status: str, note: str | None) -> None:
    """Count one frame the estimator ran; raise KeepsFailing at the STREAK-th same failure."""
    try:
        had = _streaks.get(extractor, ("", "", 0))
    except TypeError:  # an estimator that cannot be weakly referenced is not counted
        return
    if had is None:
        return
    if status == "ok" or (had[2] and had[0] != status):
        _streaks[extractor] = None
        return
    _streaks[extractor] = (status, note or "", had[2] + 1)
    if had[2] + 1 >= STREAK:
        blame = getattr(extractor, "blame", None)
        name = extractor.declaration.name
        raise KeepsFailing(
            f"each of the first {STREAK} frames the {name} estimator ran came back `{status}` "
            f"({note}): {blame(status) if blame else 'the estimator'} is at fault, not the "
            "frames; the run stops here rather than give every frame that status", blame is not None)


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


def prefetched(frames: Iterable[Frame], depth: int) -> Iterator[Frame]:
    """The frames, read and decoded by a thread up to `depth` ahead, so decoding overlaps the
    models' calls (onnxruntime releases the GIL) and neither waits; the queue bounds memory."""
    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()
    end = object()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for f in frames:
                if not put(f):
                    return
            put(end)
        except BaseException as e:  # handed to the consumer, raised there
            put(e)

    thread = threading.Thread(target=read, name="frame-prefetch", daemon=True)
    thread.start()
    try:
        while (item := q.get()) is not end:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


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
    mtime and sha256 of the bytes it was made from (null when none could be read). An estimator
    with a `batch_size` (whole-body) gets its frames in batches, read ahead by a thread.
    """
    extractor.start_video()
    parts, count_names = extractor.declaration.parts, extractor.declaration.counts
    rows = _Rows(extractor, n, on_frame)
    batch = getattr(extractor, "batch_size", None)
    source = _exactly(frames, n, locator)
    first_size: tuple[int, int] | None = None
    for i, f in enumerate(prefetched(source, batch) if batch else source):
        note, width, height = f.note, None, None
        if f.rgb is not None:
            height, width = f.rgb.shape[:2]
            if first_size is None:
                first_size = (width, height)
            elif (width, height) != first_size:
                size_note = f"size {width}x{height}, video's first frame {first_size[0]}x" \
                            f"{first_size[1]}"
                note = f"{note}; {size_note}" if note else size_note
        out.split.append(split)
        out.video.append(video)
        out.frame.append(i)
        out.time_s.append(f.time_s)
        out.image.append(f.image)
        out.width.append(width)
        out.height.append(height)
        out.status.append(f.status)
        out.note.append(note or None)
        out.file_size.append(f.size)
        out.file_mtime_ns.append(f.mtime_ns)
        out.file_sha256.append(f.sha256)
        rows.add(i, f.rgb, out, len(out.status) - 1)
    rows.flush(out)
    for part in parts:
        out.values.setdefault(part, []).append(rows.values[part])
        out.present.setdefault(part, []).append(rows.present[part])
    for name in count_names:
        out.counts.setdefault(name, []).extend(rows.counts[name])


class _Rows:
    """One video's keypoint blocks, filled a batch of frames at a time (a batch of one for an
    estimator without `process_batch`: each frame as it comes, as Holistic tracks)."""

    def __init__(self, extractor: Estimator, n: int, on_frame: Callable[[], None] | None) -> None:
        self.extractor, self.on_frame = extractor, on_frame
        parts = extractor.declaration.parts
        self.values = {p: np.zeros((n, k * c), np.float32) for p, (k, c) in parts.items()}
        self.present = {p: np.zeros(n, bool) for p in parts}
        self.counts: dict[str, list[int | None]] = {c: [None] * n
                                                    for c in extractor.declaration.counts}
        self.size = int(getattr(extractor, "batch_size", 1) or 1)
        self.pending: list[tuple[int, np.ndarray, int]] = []  # (frame, rgb, row in out)
        self.owed = 0  # frames to report done once their batch has run

    def add(self, i: int, rgb: np.ndarray | None, out: Block, row: int) -> None:
        self.owed += 1
        if rgb is not None:
            self.pending.append((i, rgb, row))
        if len(self.pending) >= self.size or not self.pending:
            self.flush(out)

    def flush(self, out: Block) -> None:
        """Run the pending frames, place their results, report them done."""
        if self.pending:
            for (i, _, row), (found, error) in zip(self.pending, self._run(), strict=True):
                if error is not None:
                    out.status[row], out.note[row] = _error_status(self.extractor), error
                elif "status" in found:  # the estimator refused what its model answered
                    out.status[row], out.note[row] = found.pop("status"), found.pop("note")
                _place(found, i, self.values, self.present, self.counts)
                _count(self.extractor, out.status[row], out.note[row])
            self.pending = []
        if self.on_frame is not None:
            for _ in range(self.owed):
                self.on_frame()
        self.owed = 0

    def _run(self) -> list[tuple[dict, str | None]]:
        """Each pending frame's result and error; a batch that raises is run again one frame
        at a time, so the error is pinned on its frame as with a batch of one."""
        batch = getattr(self.extractor, "process_batch", None)
        if batch is not None and len(self.pending) > 1:
            try:
                return [(found, None) for found in batch([rgb for _, rgb, _ in self.pending])]
            except (RuntimeError, ValueError):
                pass
        out = []
        for _, rgb, _ in self.pending:
            try:
                out.append((self.extractor.process(rgb), None))
            except (RuntimeError, ValueError) as e:  # the estimator refused this frame
                out.append(({}, str(e)[:200]))
                self.extractor.start_video()  # the graph's state is unknown after an error
        return out


def _error_status(extractor: Estimator) -> str:
    """A frame the estimator raised on: the family's own status, else NAME_error."""
    return extractor.declaration.error_status or f"{extractor.declaration.name}_error"


def _place(found: dict, i: int, values: dict[str, np.ndarray], present: dict[str, np.ndarray],
           counts: dict[str, list[int | None]]) -> None:
    """Row i's values from one frame's result (landmark arrays, or None; counts as ints)."""
    for part, arr in found.items():
        if part in counts:
            counts[part][i] = int(arr)
        elif arr is not None:
            values[part][i] = arr
            present[part][i] = True
