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
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.contract import EstimatorExtras
from phoenix_keypoints.extract.keypoints.estimator import Declaration, Estimator, declaration
from phoenix_keypoints.extract.keypoints.frames import Frame
from phoenix_keypoints.extract.keypoints.schema import list_column, part_column


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
    # per row, each list column's float32 values (None: null), as the declaration's `lists`
    lists: dict[str, list[np.ndarray | None]] = field(default_factory=dict)
    declaration: Declaration = field(default_factory=lambda: declaration(None))

    @property
    def layout(self) -> dict[str, tuple[int, int]]:
        return self.declaration.parts

    def __len__(self) -> int:
        return len(self.frame)

    def extend(self, other: Block) -> None:
        """Append another block's rows (a video's, extracted beside others) after these."""
        for name, mine in vars(self).items():
            theirs = getattr(other, name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, dict):
                for key, items in theirs.items():
                    mine.setdefault(key, []).extend(items)

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
        for name in self.declaration.lists:
            cols[name] = list_column(self.lists.get(name, []))
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


class _Streak:
    """Whether the estimator's first STREAK frames all failed the same way, counted in the order a
    run of one video after another gives them (the chunk's videos in order, each video's frames in
    order), whatever order they ran in: videos in lockstep (extract_videos' lanes) run frames of
    several videos at once, and a model failing on one video's frames must stop a run of every
    --batch-size alike. Each video keeps its first frames' (status, note) until the videos before
    it have ended; then they join the streak. Decided once: `dead` after a frame breaks it."""

    def __init__(self, estimator: Estimator) -> None:
        self.estimator = weakref.ref(estimator)  # (the registry's key: a strong one would keep it)
        self.started = 0  # videos numbered so far
        self.first = 0  # the first video not yet in `done`
        self.done: list[tuple[str, str]] = []  # the streak's frames from the videos that ended
        self.videos: dict[int, list[tuple[str, str]]] = {}  # video -> its first frames' results
        self.ended: set[int] = set()
        self.dead = False

    def start(self) -> int:
        """A new video's number (its place in the order the streak counts)."""
        self.started += 1
        if not self.dead:
            self.videos[self.started - 1] = []
        return self.started - 1

    def count(self, video: int, status: str, note: str | None) -> None:
        """One frame of a video the estimator ran; raise KeepsFailing once the streak is whole."""
        if self.dead:
            return
        mine = self.videos.get(video)
        if mine is not None and len(mine) < STREAK:
            mine.append((status, note or ""))
            self._judge()

    def end(self, video: int, judge: bool = True) -> None:
        """A video has no more frames to run: those after it may join the streak (not judged
        now for a video given up, closed while another error stops its chunk)."""
        if not self.dead and video in self.videos:
            self.ended.add(video)
            if judge:
                self._judge()

    def _judge(self) -> None:
        while self.first in self.ended:  # fold ended videos at the front into `done`
            self.done += self.videos.pop(self.first)
            self.ended.discard(self.first)
            self.first += 1
        streak = (self.done + self.videos.get(self.first, []))[:STREAK]
        if any(s == "ok" or s != streak[0][0] for s, _ in streak):
            self.dead = True
            self.videos.clear()
        elif len(streak) >= STREAK:
            self._stop(*streak[-1])

    def _stop(self, status: str, note: str) -> None:
        est = self.estimator()
        blame = EstimatorExtras.blame(est)
        raise KeepsFailing(
            f"each of the first {STREAK} frames the {est.declaration.name} estimator ran came back "
            f"`{status}` ({note}): {blame(status) if blame else 'the estimator'} is at fault, not "
            "the frames; the run stops here rather than give every frame that status",
            blame is not None)


# estimator -> its streak (kept over its videos and chunks: its first frames are what count)
_streaks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _streak(extractor: Estimator) -> _Streak | None:
    """The estimator's streak (None for one that cannot be weakly referenced: not counted)."""
    try:
        if extractor not in _streaks:
            _streaks[extractor] = _Streak(extractor)
        return _streaks[extractor]
    except TypeError:
        return None


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


def prefetched(frames: Iterable[Frame], depth: int | threading.Semaphore,
               turn: threading.Lock | None = None) -> Iterator[Frame]:
    """The frames, read and decoded by a thread up to `depth` ahead, so decoding overlaps the
    models' calls (onnxruntime releases the GIL) and neither waits. A frame is decoded only once
    one of the `depth` slots is free, so at most `depth` decoded frames wait here (a semaphore:
    the caller's, which it may release to let the reader further ahead). Readers given the same
    `turn` read one at a time: a source may keep one open file a process (an archive's reader
    seeks one file position), which two threads must not move at once."""
    q: queue.Queue = queue.Queue()
    slots = depth if isinstance(depth, threading.Semaphore) else threading.Semaphore(max(1, depth))
    stop = threading.Event()
    end = object()

    def read() -> None:
        try:
            it = iter(frames)
            while True:
                while not slots.acquire(timeout=0.1):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                with turn or nullcontext():
                    f = next(it, end)
                q.put(f)
                if f is end:
                    return
        except BaseException as e:  # handed to the consumer, raised there
            q.put(e)

    thread = threading.Thread(target=read, name="frame-prefetch", daemon=True)
    thread.start()
    try:
        while (item := q.get()) is not end:
            slots.release()
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


@dataclass(frozen=True)
class Video:
    """A video to extract: its split, name, planned frame count and locator (the image named by a
    row the source could not give), and how to open its frames (called when its turn comes)."""

    split: str
    name: str
    n: int
    locator: str
    open: Callable[[], Iterable[Frame]]


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
    going = _Going(extractor, Video(split, video, n, locator, lambda: frames), on_frame,
                   EstimatorExtras.batch_size(extractor))
    while going.read():
        if going.rows.full():
            going.rows.flush(going.block)
    going.finish(out)


def extract_videos(extractor: Estimator, videos: Iterable[Video], out: Block,
                   on_frame: Callable[[], None] | None = None, lockstep: bool = True) -> None:
    """Append each video's rows to `out` (each video's rows together, exactly n; the videos in the
    order they end).

    An estimator whose frames depend on the frame before (a tracker) cannot batch a video's frames
    for its models, but videos are independent: one that gives `lanes` (> 1), `start_lane(lane)`
    (a new video in that lane) and `process_lanes([(lane, rgbs), ...])` (each lane's next frames,
    in its video's order; each frame's result, as `process` would give it) gets that many videos at
    once, each lane's next frames in one call, so its models can take frame t of every lane
    together. A lane whose video ends takes the chunk's next one. The frames of a call number
    about `batch_size` (1 a lane when every lane is busy, more as the last videos end), and each
    lane's reader decodes as many ahead as its lane takes a call: about 2 x batch_size frames
    held, as for one video. The lanes' readers take turns (an archive's one reader). Without lanes,
    or not `lockstep` (a chunk that killed a worker: a crash must name its one video): the videos
    one after another (extract_video).
    """
    lanes = EstimatorExtras.lanes(extractor) if lockstep else 1
    if lanes < 2:
        for v in videos:
            extract_video(extractor, v.split, v.name, v.open(), v.n, out, on_frame, v.locator)
        return
    size = EstimatorExtras.frames_a_call(extractor)
    todo, going, turn = iter(videos), list[_Going](), threading.Lock()
    try:
        while True:
            for lane in sorted(set(range(lanes)) - {g.lane for g in going}):
                video = next(todo, None)
                if video is None:
                    break
                extractor.start_lane(lane)  # type: ignore[attr-defined]
                going.append(_Going(extractor, video, on_frame, 1, lane, turn))
            if not going:
                return
            window = max(1, size // len(going))  # grows as the last videos end
            for g in going:
                g.ahead(window)
            ended = [g for g in going if not g.fill(window)]
            _run_lanes(extractor, going)
            for g in ended:
                g.finish(out)
                going.remove(g)
    finally:
        for g in going:
            g.close()


class _Going:
    """One video under way: its rows in a block of its own, its frames read (ahead by a thread
    where `depth`), its pixels pending in `rows` until a call runs them."""

    def __init__(self, extractor: Estimator, video: Video, on_frame: Callable[[], None] | None,
                 depth: int | None, lane: int = 0, turn: threading.Lock | None = None) -> None:
        self.video, self.lane, self.i = video, lane, 0
        self.block = Block(declaration=extractor.declaration)
        self.streak, self.number = _streak(extractor), 0
        if self.streak is not None:
            self.number = self.streak.start()
        self.rows = _Rows(extractor, video.n, on_frame, self.count)
        source = _exactly(video.open(), video.n, video.locator)
        self.depth, self.slots = depth or 0, threading.Semaphore(max(1, depth or 1))
        self.frames = prefetched(source, self.slots, turn) if depth else source
        self.first_size: tuple[int, int] | None = None

    def ahead(self, depth: int) -> None:
        """Let the reader decode up to `depth` frames ahead (never fewer than it may already)."""
        if depth > self.depth:
            self.slots.release(depth - self.depth)
            self.depth = depth

    def read(self) -> bool:
        """The next frame's row, its pixels pending; False once the video has no more."""
        f = next(self.frames, None)
        if f is None:
            return False
        note, width, height = f.note, None, None
        if f.rgb is not None:
            height, width = f.rgb.shape[:2]
            if self.first_size is None:
                self.first_size = (width, height)
            elif (width, height) != self.first_size:
                size_note = f"size {width}x{height}, video's first frame {self.first_size[0]}x" \
                            f"{self.first_size[1]}"
                note = f"{note}; {size_note}" if note else size_note
        out = self.block
        out.split.append(self.video.split)
        out.video.append(self.video.name)
        out.frame.append(self.i)
        out.time_s.append(f.time_s)
        out.image.append(f.image)
        out.width.append(width)
        out.height.append(height)
        out.status.append(f.status)
        out.note.append(note or None)
        out.file_size.append(f.size)
        out.file_mtime_ns.append(f.mtime_ns)
        out.file_sha256.append(f.sha256)
        self.rows.add(self.i, f.rgb, len(out.status) - 1)
        self.i += 1
        return True

    def fill(self, frames: int) -> bool:
        """Read until `frames` frames are pending; False once the video has no more."""
        while len(self.rows.pending) < frames:
            if not self.read():
                return False
        return True

    def count(self, status: str, note: str | None) -> None:
        """One frame run, counted in the estimator's streak at this video's place."""
        if self.streak is not None:
            self.streak.count(self.number, status, note)

    def finish(self, out: Block) -> None:
        """Run what is pending, and append the video's rows to `out`."""
        self.rows.flush(self.block)
        if self.streak is not None:
            self.streak.end(self.number)
        for part in self.block.declaration.parts:
            self.block.values.setdefault(part, []).append(self.rows.values[part])
            self.block.present.setdefault(part, []).append(self.rows.present[part])
        for name in self.block.declaration.counts:
            self.block.counts.setdefault(name, []).extend(self.rows.counts[name])
        for name in self.block.declaration.lists:
            self.block.lists.setdefault(name, []).extend(self.rows.lists[name])
        out.extend(self.block)
        self.close()

    def close(self) -> None:
        if self.streak is not None:  # a video given up does not hold back the streak's verdict
            self.streak.end(self.number, judge=False)
        close = getattr(self.frames, "close", None)
        if close is not None:
            close()  # the reader thread stops


class _Rows:
    """One video's keypoint blocks, filled a batch of frames at a time (a batch of one for an
    estimator without `process_batch`: each frame as it comes, as Holistic tracks)."""

    def __init__(self, extractor: Estimator, n: int, on_frame: Callable[[], None] | None,
                 count: Callable[[str, str | None], None]) -> None:
        self.extractor, self.on_frame, self.count = extractor, on_frame, count
        parts = extractor.declaration.parts
        self.values = {p: np.zeros((n, k * c), np.float32) for p, (k, c) in parts.items()}
        self.present = {p: np.zeros(n, bool) for p in parts}
        self.counts: dict[str, list[int | None]] = {c: [None] * n
                                                    for c in extractor.declaration.counts}
        self.lists: dict[str, list[np.ndarray | None]] = {c: [None] * n
                                                          for c in extractor.declaration.lists}
        self.size = EstimatorExtras.frames_a_call(extractor)
        self.pending: list[tuple[int, np.ndarray, int]] = []  # (frame, rgb, row in out)
        self.owed = 0  # frames to report done once their batch has run

    def add(self, i: int, rgb: np.ndarray | None, row: int) -> None:
        self.owed += 1
        if rgb is not None:
            self.pending.append((i, rgb, row))

    def full(self) -> bool:
        """Whether to run now: a batch is pending, or a frame without pixels is owed alone."""
        return len(self.pending) >= self.size or not self.pending

    def flush(self, out: Block, results: list[tuple[dict, str | None]] | None = None) -> None:
        """Run the pending frames (or take their `results`), place them, report them done."""
        if self.pending:
            ran = self._run() if results is None else results
            for (i, _, row), (found, error) in zip(self.pending, ran, strict=True):
                if error is not None:
                    out.status[row], out.note[row] = _error_status(self.extractor), error
                elif "status" in found:  # the estimator refused what its model answered
                    out.status[row], out.note[row] = found.pop("status"), found.pop("note")
                if "note" in found:  # what the estimator says of a frame it did (boxes left out)
                    said = found.pop("note")
                    out.note[row] = f"{out.note[row]}; {said}" if out.note[row] else said
                _place(found, i, self.values, self.present, self.counts, self.lists)
                self.count(out.status[row], out.note[row])
            self.pending = []
        if self.on_frame is not None:
            for _ in range(self.owed):
                self.on_frame()
        self.owed = 0

    def _run(self) -> list[tuple[dict, str | None]]:
        est = self.extractor
        return _each([rgb for _, rgb, _ in self.pending], EstimatorExtras.process_batch(est),
                     est.process, est.start_video)


def _each(rgbs: list[np.ndarray], batch: Callable[[list[np.ndarray]], list[dict]] | None,
          one: Callable[[np.ndarray], dict], reset: Callable[[], None]
          ) -> list[tuple[dict, str | None]]:
    """Each frame's result and error: the frames in one `batch` call, or where it raises (or there
    is none) one frame at a time, so an error is pinned on its frame as with a batch of one."""
    if batch is not None and len(rgbs) > 1:
        try:
            return [(found, None) for found in batch(rgbs)]
        except (RuntimeError, ValueError):
            pass
    out = []
    for rgb in rgbs:
        try:
            out.append((one(rgb), None))
        except (RuntimeError, ValueError) as e:  # the estimator refused this frame
            out.append(({}, str(e)[:200]))
            reset()  # the graph's state is unknown after an error
    return out


def _run_lanes(extractor: Any, going: list[_Going]) -> None:
    """Every lane's pending frames in one process_lanes call (where it raises: lane by lane, frame
    by frame, as _each), their results placed, the frames reported done."""
    busy = [g for g in going if g.rows.pending]
    windows = [(g.lane, [rgb for _, rgb, _ in g.rows.pending]) for g in busy]
    try:
        ran = [[(found, None) for found in each] for each in extractor.process_lanes(windows)
               ] if busy else []
    except (RuntimeError, ValueError):
        ran = [_each(rgbs, None, lambda rgb, lane=lane: extractor.process_lanes([(lane, [rgb])])[0][0],
                     lambda lane=lane: extractor.start_lane(lane)) for lane, rgbs in windows]
    for g, results in zip(busy, ran, strict=True):
        g.rows.flush(g.block, results)
    for g in going:
        g.rows.flush(g.block)  # the lanes not run: their frames without pixels reported done


def _error_status(extractor: Estimator) -> str:
    """A frame the estimator raised on: the family's own status, else NAME_error."""
    return extractor.declaration.error_status or f"{extractor.declaration.name}_error"


def _place(found: dict, i: int, values: dict[str, np.ndarray], present: dict[str, np.ndarray],
           counts: dict[str, list[int | None]], lists: dict[str, list[np.ndarray | None]]) -> None:
    """Row i's values from one frame's result (landmark arrays, or None; counts as ints; list
    columns as float32 arrays of any length)."""
    for part, arr in found.items():
        if part in counts:
            counts[part][i] = int(arr)
        elif part in lists:
            lists[part][i] = None if arr is None else np.asarray(arr, np.float32).reshape(-1)
        elif arr is not None:
            values[part][i] = arr
            present[part][i] = True
