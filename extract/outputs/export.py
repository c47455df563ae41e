"""Exports for code that already exists: one pickled dict (SLR loaders), pose-format .pose files.

Both stream: one video in memory at a time, whatever the dataset's size.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.estimator import Declaration
from phoenix_keypoints.extract.outputs.declared import (
    found_points,
    list_items,
    people_tensor,
    video_tensor,
)
from phoenix_keypoints.extract.outputs.loader import SplitData
from phoenix_keypoints.extract.outputs.tensors import TensorsError, iter_videos

PHOENIX_FPS = 25
PHOENIX_SIZE = (210, 260)


# --- what --to names ------------------------------------------------------------------------
# An export writes one file (--to FILE) or a folder of them, one per video or split (--to FOLDER).
# The one-file formats: `pkl`, and each family's own that it lists (its ONE_FILE_EXPORTS).
ONE_FILE = ("pkl",)
# names of the files exports write: a folder export's --to so named is a file name given by mistake
WRITTEN = (".pkl", ".pickle", ".npz", ".npy", ".pose", ".parquet")


def one_file_formats() -> tuple[str, ...]:
    """The `export --format` values whose --to is the one file written: of the families loaded
    (the built-in ones, and a plugin once its run named it: an installed one is not imported
    for this)."""
    from phoenix_keypoints.extract.keypoints.estimator import loaded

    return tuple(dict.fromkeys([*ONE_FILE, *(f for _, fam in loaded()
                                             for f in fam.ONE_FILE_EXPORTS)]))


def to_refused(fmt: str, to: Path) -> str:
    """Why --to cannot take what `--format fmt` writes ("" when it can): a folder where one file is
    written, a file (or a file's name, X.pkl) where a folder is. A folder export never makes a
    folder named like a file: `--format unisign-pkl --to X.pkl` is refused, not made a folder."""
    from shlex import quote

    if fmt in one_file_formats():
        if to.is_dir():
            return (f"--to {quote(str(to))} is a folder; --format {fmt} writes one file: name it, "
                    f"such as --to {quote(str(to / fmt.removesuffix('-pkl')))}.pkl")
        return ""
    if to.exists() and not to.is_dir():
        return (f"--to {quote(str(to))} is a file; --format {fmt} writes a folder (a file per "
                "video or per split): name a folder")
    if not to.exists() and to.suffix.lower() in WRITTEN:
        return (f"--to {quote(str(to))} names a file ({to.suffix}), but --format {fmt} writes a "
                f"folder of files (one per video or per split): name a folder, such as --to "
                f"{quote(str(to.with_suffix('')))}")
    return ""


def pkl_entry(sample: dict[str, Any]) -> dict[str, Any]:
    """One video in the pkl layout: keypoints [T, K, 3], mask [T, K], split, gloss, text, speaker."""
    return {
        "keypoints": sample["keypoints"],
        "mask": sample["mask"],
        "split": sample["split"],
        "gloss": sample.get("gloss", ""),
        "text": sample.get("translation", ""),
        "speaker": sample.get("speaker", ""),
    }


def _body(obj: Any) -> bytes:
    """A protocol-3 pickle of obj without its PROTO header and STOP: an opcode run that pushes obj.

    Pickled without a memo (Pickler.fast: entries are plain trees of dicts, arrays and strings,
    nothing shared), so it writes no PUT/GET opcodes and such runs can follow one another in one
    stream. Protocol 3 has no framing either, so cutting off the header and STOP is exact.
    """
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=3)
    p.fast = True
    p.dump(obj)
    data = buf.getvalue()
    if data[:2] != b"\x80\x03" or data[-1:] != pickle.STOP:
        raise AssertionError("unexpected pickle framing")
    return data[2:-1]


def write_pkl(splits: Iterable[SplitData], path: Path) -> int:
    """Write {video: pkl_entry} as ONE pickle, streamed video by video; returns the video count.

    The file is an ordinary pickle of a dict (pickle.load returns it whole); it is written as
    PROTO 3, EMPTY_DICT, then (key, value, SETITEM) per video, so the writer never holds more than
    one video. A temp file is renamed into place at the end.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    seen: set[str] = set()
    try:
        with open(tmp, "wb") as f:
            f.write(b"\x80\x03" + pickle.EMPTY_DICT)
            for split in splits:
                for sample in split:
                    if sample["video"] in seen:
                        raise TensorsError(f"video {sample['video']} is in two splits; the pkl is "
                                           "keyed by video and cannot hold both")
                    seen.add(sample["video"])
                    f.write(_body(sample["video"]) + _body(pkl_entry(sample)) + pickle.SETITEM)
            f.write(pickle.STOP)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(seen)


def zero_absent(vals: np.ndarray, found: np.ndarray) -> np.ndarray:
    """[T, points, channels] values with every value of a point not `found` (found_points) 0,
    its score too: how the pkl layouts that carry a score (TwoStream-SLR's, Uni-Sign's) hold a
    point that is not there, as they hold a frame that was not read. Their loaders drop a point
    by its score (TwoStream-SLR's heatmaps weigh a point by a score above 0, Uni-Sign keeps one
    above 0.3), and x, y 0 is where a frame not read puts it."""
    return np.where(found[..., None], vals, 0).astype(vals.dtype, copy=False)


# --- pose-format -----------------------------------------------------------------------------

def pose_install_hint() -> str:
    """How to install the pose extra on this Python: constraints.txt pins the default family's library
    and numpy < 2, which do not resolve on 3.13; constraints-py313.txt is that Python's set."""
    pins = "constraints-py313.txt" if sys.version_info >= (3, 13) else "constraints.txt"
    return f"the pose export needs pose-format: pip install -c {pins} -e '.[pose]'"


def video_size(table: pa.Table) -> tuple[int, int]:
    """The frame size of a video (the commonest known one; PHOENIX's 210x260 if none is known)."""
    w = table.column("width").to_numpy(zero_copy_only=False)
    h = table.column("height").to_numpy(zero_copy_only=False)
    ok = ~(np.isnan(w.astype(float)) | np.isnan(h.astype(float)))
    if not ok.any():
        return PHOENIX_SIZE
    pairs, counts = np.unique(np.stack([w[ok], h[ok]], 1).astype(np.int64), axis=0, return_counts=True)
    width, height = pairs[np.argmax(counts)]
    return int(width), int(height)


def video_fps(table: pa.Table, root: Path | None, default: float) -> float:
    """A video's rate for its .pose header: a video file's stream rate (as pose-format's
    videos_to_poses reads it), else the rate of its rows' times, else `default` (frame folders
    have no rate of their own: --fps, PHOENIX's 25 by default)."""
    from phoenix_keypoints.extract.sources.base import parse_image
    from phoenix_keypoints.extract.sources.video import FRAGMENT, stream_fps

    ref = parse_image(table["image"][0].as_py() or "") \
        if table.num_rows and "image" in table.column_names else None
    if ref is not None and ref.fragment == FRAGMENT and root is not None:
        rate = stream_fps(Path(root) / ref.path)
        if rate:
            return rate
    times = table["time_s"].to_pylist() if "time_s" in table.column_names else []
    return rate_of_times(times) or default


def rate_of_times(times: list[float | None]) -> float | None:
    """Frames a second from every frame's time (None when a time is missing or they do not rise)."""
    if len(times) > 1 and None not in times and times[-1] > times[0]:  # type: ignore[operator]
        return (len(times) - 1) / (times[-1] - times[0])  # type: ignore[operator]
    return None


def write_file(dest: Path, write: Callable[[BinaryIO], Any]) -> None:
    """write(f) into a temp file beside dest, renamed into place: a full disk leaves no temp file
    and no half file beside the finished ones."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# --- the .pose header of a family without pose-format header of its own ---------------------
def pose_values(decl: Declaration, vals: np.ndarray, rows: np.ndarray,
                channels: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One video's [T, points, channels] values -> a .pose body's (data [T, 1, points, len(channels)],
    confidence [T, 1, points]) float32: the `channels` asked (default x, y: the first two),
    confidence = the score (the last value; 1 for a family without one). A point the declaration
    calls absent (found_points: its row's list missing, `rows` False, or its score under the
    threshold) has confidence 0 and zeros, so pose-format masks it as it masks a point its own
    loaders did not find (a score of -0.03 or 0.1 would read as present)."""
    found = found_points(decl, vals, rows)
    score = vals[..., -1] if decl.score_threshold is not None else np.ones(vals.shape[:2])
    conf = np.where(found, score, 0).astype(np.float32)[:, None]
    chosen = vals[..., channels if channels is not None else [0, 1]]
    data = np.ascontiguousarray(np.where(found[..., None], chosen, 0)[:, None], dtype=np.float32)
    return data, conf


def people_pose_values(decl: Declaration, people: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every person ([T, people, points, channels], NaN where a person or point is not:
    people_tensor) -> a .pose body's (data [T, P, points, 2], confidence [T, P, points]) float32,
    P the most persons a frame holds (at least 1: a video of nobody is one person, all masked);
    each point by pose_values' rule, a person a frame lacks confidence 0 and zeros."""
    if people.shape[1] == 0:
        people = np.full((people.shape[0], 1, *people.shape[2:]), np.nan, np.float32)
    there = ~np.isnan(people).all(axis=-1)
    vals = np.nan_to_num(people)
    found = found_points(decl, vals, there)
    score = vals[..., -1] if decl.score_threshold is not None else np.ones(vals.shape[:3])
    conf = np.where(found, score, 0).astype(np.float32)
    data = np.ascontiguousarray(np.where(found[..., None], vals[..., [0, 1]], 0), dtype=np.float32)
    return data, conf


def declared_pose(decl: Declaration, vals: np.ndarray, present: np.ndarray, width: int,
                  height: int, fps: float, people: np.ndarray | None = None) -> Any:
    """A pose-format Pose of one video's [T, points, channels] values, its header made from the
    declaration: one component per named part (its point names, the declared limbs and colours
    within it: declared_limbs, XYC), x and y as the family stores them, confidence = the score
    (1 where a family has none), 0 (masked) where the point is absent (pose_values: `present`
    False, or its score under the declaration's threshold). Where the family declares `people`
    and `people` is given (people_tensor), the body holds every person (people_pose_values),
    not the one of its parts."""
    try:
        from pose_format import Pose
        from pose_format.numpy.pose_body import NumPyPoseBody
        from pose_format.pose_header import PoseHeader, PoseHeaderComponent, PoseHeaderDimensions
    except ImportError:
        raise TensorsError(pose_install_hint()) from None
    components = [PoseHeaderComponent(part, [decl.point_name(i) for i in range(lo, hi)], limbs,
                                       colours, "XYC")
                  for part, (lo, hi, limbs, colours) in declared_limbs(decl).items()]
    header = PoseHeader(version=0.2, dimensions=PoseHeaderDimensions(width, height, 0),
                        components=components)
    data, conf = (people_pose_values(decl, people) if decl.people and people is not None
                  else pose_values(decl, vals, present))
    return Pose(header, NumPyPoseBody(fps=fps, data=data, confidence=conf))


def declared_limbs(decl: Declaration) -> dict[str, tuple[int, int, list[tuple[int, int]],
                                                       list[tuple[int, int, int]]]]:
    """Each .pose component (a named part: first, end point of the order) with what `show` draws
    of it (inspect/declared.py): the skeleton's limbs whose two points it holds, numbered in it
    (a limb joining two components is left out: pose-format's limbs are a component's own), and
    its colour, the region's that `show` draws on top of its points (white where none); one per
    point where its points have several (pose-format's drawing gives point i colour i)."""
    start, at = {}, 0
    for column, (n, _) in decl.parts.items():  # where each column begins in the point order
        start[column], at = at, at + n
    ends = [(a + start[col], b + start[col]) for region, limbs in decl.skeleton.items()
            for col in [decl.regions.get(region, (region,))[0]] if col in start for a, b in limbs]
    painted: dict[int, tuple[int, int, int]] = {}
    for region, colour in decl.colours.items():  # show's order: the last on top
        col, lo, hi = decl.regions.get(region, (region, 0, decl.parts.get(region, (0,))[0]))
        if col in start:
            painted.update({start[col] + i: tuple(colour) for i in range(lo, hi)})
    out = {}
    for part, (lo, hi) in decl.point_parts().items():
        limbs = list(dict.fromkeys((a - lo, b - lo) for a, b in ends
                                   if lo <= a < hi and lo <= b < hi))
        colours = [painted.get(i, (255, 255, 255)) for i in range(lo, hi)]
        out[part] = (lo, hi, limbs, colours if len(set(colours)) > 1 else colours[:1])
    return out


def write_declared_pose_files(keypoints: Path, out_dir: Path, decl: Declaration, fps: float,
                              root: Path | None = None,
                              make: Callable[..., Any] = declared_pose) -> int:
    """One `<out_dir>/<split>/<video>.pose` per video (declared_pose, or a family's `make` of the
    same arguments: its own components over these values), each at its source's rate; every
    person where the family declares `people` (declared_pose's `people`)."""
    have = pq.ParquetFile(keypoints).schema_arrow.names
    columns = ["width", "height", *[c for c in ("image", "time_s") if c in have], *decl.parts,
               *decl.people]
    n = 0
    for split, video, table in iter_videos(keypoints, columns):
        width, height = video_size(table)
        vals, found = video_tensor(table, decl)
        everyone = {} if not decl.people else {"people": people_tensor(decl, {
            c: list_items(table.column(c), decl.lists[c]) for c in decl.people})}
        pose = make(decl, vals, found, width, height, video_fps(table, root, fps), **everyone)
        write_file(Path(out_dir) / split / f"{video}.pose", pose.write)
        n += 1
    return n
