"""One clip to keypoints in this process: `extract_keypoints`, the Python face for a notebook.

Why it exists: a researcher wants the arrays of one clip without a run folder or workers. It reads
the frames with the very sources a run uses (extract/sources/, found the way a run's corpus reader
finds them: extract.corpora.entries.to_video) and puts them through the per-video code a worker
runs (extract.keypoints.video_rows.extract_video), so its numbers equal a run's on the same frames.

The estimator is a family the registry names (extract.keypoints.estimator.FAMILIES; the default
first): its package says which options it takes, how they become the settings a run records, and
how a clip's arrays make a .pose. Every family goes through the seam a worker uses
(extract.keypoints.estimator.open_estimator), so there is one frame loop.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from phoenix_keypoints.extract.keypoints.estimator import (
    DEFAULT_FAMILY,
    Declaration,
    Estimator,
    export_refused,
    family,
    names,
    open_estimator,
)
from phoenix_keypoints.extract.keypoints.frames import MAX_PIXELS, STATUS_OK, Frame, read_frame
from phoenix_keypoints.extract.keypoints.video_rows import Block, extract_video
from phoenix_keypoints.extract.outputs.export import PHOENIX_FPS, rate_of_times

Source = str | os.PathLike | Sequence[str | os.PathLike] | np.ndarray


@dataclass
class Keypoints:
    """One clip's keypoints: `kp[part]` is float32 [T, points, channels], NaN where not detected.
    `in`, iteration and keys() are over its parts, as a dict's; len(kp) is its frames (T)."""

    parts: dict[str, np.ndarray]
    fps: float
    estimator: str = DEFAULT_FAMILY  # whose points: decides the .pose header (to_pose)
    status: list[str] = field(default_factory=list)  # per frame: "ok", or why it was not processed
    image: list[str] = field(default_factory=list)  # per frame: what it was made from
    width: list[int | None] = field(default_factory=list)
    height: list[int | None] = field(default_factory=list)
    time_s: list[float | None] = field(default_factory=list)  # per frame: the video's timestamp
    # what its family declares of these points (None: the family's default declaration)
    declaration: Declaration | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.status)

    def __getitem__(self, part: str) -> np.ndarray:
        if part not in self.parts:
            raise KeyError(f"no part {part!r}; this estimator gives {', '.join(self.parts)}")
        return self.parts[part]

    def __contains__(self, part: object) -> bool:
        """`"face" in kp`: whether kp[part] gives an array (without this, `in` would index kp
        by 0, 1, ... and raise KeyError)."""
        return part in self.parts

    def __iter__(self) -> Iterator[str]:
        """Its part names, as keys() gives them (a mapping's iteration, for `dict(kp)` and loops)."""
        return iter(self.parts)

    def keys(self) -> list[str]:
        """The parts kp[part] gives: the family's columns, then its named slices."""
        return list(self.parts)

    def to_pose(self) -> Any:
        """A pose-format `Pose` (needs the pose extra), laid out as `export --format pose` writes;
        refused (ValueError) where that export refuses a run of the family: the one rule is its
        declaration's (`has_pose`)."""
        fam = family(self.estimator)
        decl = self.declaration or fam.declaration(None)
        if not decl.has_pose:
            raise ValueError(f"to_pose(): {export_refused(decl, 'pose', 'this clip')}")
        sizes = [(w, h) for w, h in zip(self.width, self.height, strict=True) if w is not None]
        width, height = max(set(sizes), key=sizes.count) if sizes else (0, 0)
        own = fam.pose_of_clip(self.parts, width, height, self.fps)
        if own is not None:  # a family with a .pose header of its own
            return own
        from phoenix_keypoints.extract.outputs.export import declared_pose

        vals = np.concatenate([self.parts[p] for p in decl.parts], axis=1)
        everyone = None
        if decl.people:  # every person, as the export writes them
            from phoenix_keypoints.extract.outputs.declared import people_tensor

            everyone = people_tensor(decl, {c: self.parts[c] for c in decl.people})
        return declared_pose(decl, np.nan_to_num(vals), ~np.isnan(vals).all(axis=2), width,
                             height, self.fps, everyone)


def extract_keypoints(source: Source, estimator: str = DEFAULT_FAMILY, *, fps: float | None = None,
                      max_pixels: int = MAX_PIXELS, progress: bool | None = None,
                      **options: Any) -> Keypoints:
    """Keypoints of one clip: a video file, a folder of frames, a list of image paths, or an RGB
    uint8 array [T, H, W, 3]. `fps` is the rate of frames and arrays (PHOENIX's 25 by default; a
    video's own: its stream's rate, else its frames' times); `options` are the estimator's, as `run`
    takes them: each family's own (docs/python.md lists them per family). `progress`: a
    bar of frames done, None: where tqdm.auto shows one (a terminal, a notebook with ipywidgets),
    True: always, False: never. Native libraries' own log lines are kept out of the output."""
    with _native_logs_kept_out() as real_stderr:
        extractor = _open(estimator, options)
        try:
            frames, n, clip_fps = _frames(source, max_pixels)
            block = Block(declaration=extractor.declaration)
            with _progress(n, progress, real_stderr) as step:
                extract_video(extractor, "all", "clip", frames, n, block, on_frame=step)
        finally:
            extractor.close()
    return _keypoints(block, fps or clip_fps or rate_of_times(block.time_s) or float(PHOENIX_FPS))


# Native libraries' C++ logging (glog/absl info and warnings, TFLite's INFO): several lines a
# call, written to file descriptor 2, which a notebook's kernel copies into the cell's output
_NATIVE_NOISE = re.compile(r"^[IW]\d{4} |^INFO: |^WARNING: All log messages before absl::")


@contextmanager
def _native_logs_kept_out() -> Iterator[int | None]:
    """File descriptor 2 into a temporary file for the call, then every line of it but native
    log lines passed on to sys.stderr (a library's real error still shows). Yields a copy of the
    real stderr's descriptor (for the progress bar), or None where there is no fd 2 to take."""
    try:
        saved = os.dup(2)
        caught = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
    except OSError:  # no stderr (closed), or no temporary file: nothing to keep out
        yield None
        return
    with caught:
        sys.stderr.flush()
        os.dup2(caught.fileno(), 2)
        try:
            yield saved
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            said = caught.read(1 << 20).decode("utf-8", "replace").splitlines(keepends=True)
            kept = "".join(line for line in said if not _NATIVE_NOISE.match(line))
            if kept:
                sys.stderr.write(kept)


@contextmanager
def _progress(n: int, wanted: bool | None, real_stderr: int | None
              ) -> Iterator[Callable[[], None] | None]:
    """A tqdm.auto bar over n frames (a widget in a notebook that has ipywidgets, text on a
    terminal; off elsewhere unless wanted is True), drawn on the real stderr while fd 2 is taken."""
    if wanted is False:
        yield None
        return
    with warnings.catch_warnings():  # tqdm.auto's "IProgress not found" in a plain notebook
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm
    out = sys.stderr
    if real_stderr is not None and _is_fd2(out):
        out = os.fdopen(os.dup(real_stderr), "w")
    # leave: the finished bar stays (its last state drawn at close; a bar cleared at close may
    # never have drawn its last frames, tqdm draws at most every 0.1 s)
    bar = tqdm(total=n, unit="frame", desc="extract_keypoints", file=out, leave=True,
               disable=None if wanted is None else False)
    try:
        yield lambda: bar.update()
    finally:
        bar.close()
        if out is not sys.stderr:
            out.close()


def _is_fd2(stream: Any) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):  # a notebook's stream has no descriptor of its own
        return False


def _open(estimator: str, options: dict[str, Any]) -> Estimator:
    """The estimator as a run's worker opens it (one thread), from the options a run takes; a
    family's model files are checked and recorded as `run` records them."""
    if estimator not in names(rescan=True):
        raise ValueError(f"estimator {estimator!r} is not known; known: {', '.join(names())}")
    fam = family(estimator)
    known = fam.clip_options()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; estimator {estimator!r} takes "
                        f"{', '.join(known) or 'none'}")
    return open_estimator(fam.clip_settings(options), num_threads=1)


def _keypoints(block: Block, fps: float) -> Keypoints:
    """A Block's rows as [T, points, channels] arrays, NaN where a part was not detected (or the
    frame not read), and the named parts the family adds (clip_parts: slices of its columns)."""
    parts = {}
    for part, (n, c) in block.layout.items():
        values = np.concatenate(block.values[part]).reshape(-1, n, c)
        values[~np.concatenate(block.present[part])] = np.nan
        parts[part] = values
    for name, width in block.declaration.lists.items():  # every item of each frame, NaN after
        parts[name] = _padded(block.lists.get(name, []), width)
    parts = family(block.declaration.name).clip_parts(parts)
    return Keypoints(parts, float(fps), block.declaration.name, block.status, block.image,
                     block.width, block.height, block.time_s, block.declaration)


def _padded(rows: list[np.ndarray | None], width: int) -> np.ndarray:
    """A list column's rows as float32 [T, most items in a frame, width], NaN past each frame's
    items (and on frames not read)."""
    items = [np.empty((0, width), np.float32) if r is None else r.reshape(-1, width) for r in rows]
    out = np.full((len(items), max((len(i) for i in items), default=0), width), np.nan, np.float32)
    for t, mine in enumerate(items):
        out[t, :len(mine)] = mine
    return out


def _frames(source: Source, max_pixels: int) -> tuple[Iterable[Frame], int, float | None]:
    """(frames, how many, the source's own rate or None) of whatever the user handed in."""
    if isinstance(source, np.ndarray):
        return _array_frames(source), len(source), None
    if isinstance(source, (str, os.PathLike)):
        return _path_frames(Path(source), max_pixels)
    paths = [Path(p) for p in source]
    return _list_frames(paths, max_pixels), len(paths), None


def _array_frames(array: np.ndarray) -> Iterator[Frame]:
    if array.ndim != 4 or array.shape[-1] != 3 or array.dtype != np.uint8:
        raise ValueError(f"an array of frames is uint8 RGB [T, H, W, 3], not {array.dtype} "
                         f"{list(array.shape)}")
    for i, rgb in enumerate(array):
        yield Frame(np.ascontiguousarray(rgb), STATUS_OK, "", f"array#frame={i}")


def _list_frames(paths: list[Path], max_pixels: int) -> Iterator[Frame]:
    for p in paths:
        rgb, status, note, src = read_frame(p, max_pixels=max_pixels)
        yield Frame(rgb, status, note, str(p), src.size, src.mtime_ns, src.sha256)


def _path_frames(path: Path, max_pixels: int) -> tuple[Iterable[Frame], int, float | None]:
    """A video file or a folder of frames, found and read as a run finds and reads them."""
    from phoenix_keypoints.extract import sources
    from phoenix_keypoints.extract.corpora.entries import Listing, to_video
    from phoenix_keypoints.extract.sources.base import Ref
    from phoenix_keypoints.extract.sources.video import stream_fps

    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    root = path.resolve().parent
    v = to_video(root, Listing("all", path.name, path.resolve().name, "extract_keypoints"))
    if v.problem:
        raise ValueError(f"{path}: {v.problem} (a video file, or a folder of PNG/JPEG frames)")
    ref = Ref(v.source, v.folder, v.files, v.start, v.count or 0, max_pixels)
    rate = stream_fps(root / v.folder) if v.source == "video" else None
    return sources.get(v.source).frames(root, ref), v.num_frames, rate
