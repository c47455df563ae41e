"""`verify`: does a run still describe its dataset? Names every frame changed since its row was made.

A finished run is checked from keypoints.parquet, streamed in batches of its provenance columns
(never the landmarks), so the whole release costs seconds of stat calls and flat memory; a run not
merged yet is checked from its committed parts. Read-only and lock-free: safe beside a live run.
Each changed frame is one tab-separated line on stdout (video, frame, image, why); the verdict and
what to do go to stderr. Exit 1 when any frame changed, 0 when none did.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow.parquet as pq

from extract.provenance import DEFAULT_THREADS
from extract.sources.archive_index import split_root
from jobs import messages
from jobs.resume import scan_parts
from jobs.rundir import JobFailed, RunDir, RunError
from jobs.runinfo import RunInfo
from jobs.stale import Stale, columns, stale_parts, stale_rows

BATCH_ROWS = 65_536  # rows of keypoints.parquet per batch: a few MB of provenance columns

Report = Callable[[Iterable[Stale]], None]


def _check_merged(rd: RunDir, root: Path, content: bool, report: Report) -> int:
    """Stream keypoints.parquet's provenance columns; returns the rows checked."""
    rows = 0
    for batch in pq.ParquetFile(rd.keypoints_path).iter_batches(BATCH_ROWS, columns=columns(content)):
        report(stale_rows(root, batch, content, threads=DEFAULT_THREADS))
        rows += batch.num_rows
    return rows


def merged_frames_changed(rd: RunDir, root: Path) -> bool:
    """Whether any frame of keypoints.parquet changed on disk since (stat only; stops at the first)."""
    for batch in pq.ParquetFile(rd.keypoints_path).iter_batches(BATCH_ROWS, columns=columns(False)):
        if stale_rows(root, batch, False, threads=DEFAULT_THREADS):
            return True
    return False


def _check_parts(rd: RunDir, info: RunInfo, root: Path, content: bool, report: Report) -> int:
    """Check the committed parts of a run not merged yet; returns the rows checked."""
    state = scan_parts(rd, info, rd.load_plan(), move_bad=False)
    if not state.done:
        raise RunError(f"{rd.path} has nothing to verify yet: no keypoints.parquet and no committed "
                       f"part. `phoenix-keypoints run --out {rd.path}` makes them.")
    messages.note(f"{rd.path} is not merged yet: checking its {len(state.done)} committed part(s)")
    stale, unreadable = stale_parts({c: rd.part_path(c) for c in state.done}, root, content)
    for chunk in sorted(stale):
        report(stale[chunk])
    if unreadable:
        raise JobFailed("part(s) could not be read (moved by a run beside this one?): " +
                       messages.listing([f"chunk {c}: {w}" for c, w in sorted(unreadable.items())]))
    return state.frames_done


def _verdict(rd: RunDir, root: Path, rows: int, found: list[Stale], content: bool) -> int:
    """Tell what was found and what to do; the exit status."""
    how = "size, mtime and sha256" if content else "size and mtime; --content also compares sha256"
    if not found:
        messages.say(f"verify: all {rows} frame(s) of {rd.path} match the dataset at {root} ({how})")
        return 0
    videos = Counter(s.video for s in found)
    worst = [f"{v} ({n})" for v, n in sorted(videos.items(), key=lambda kv: (-kv[1], kv[0]))]
    messages.say(f"verify: {len(found)} of {rows} frame(s) no longer match the dataset at {root} "
                 f"({how}), in {len(videos)} video(s): {messages.listing(worst, 5)}. "
                 f"`phoenix-keypoints run --out {rd.path}` redoes the chunks of frames whose size "
                 "or mtime changed.")
    if any(s.why == "content differs" for s in found):
        messages.say("Frames whose content differs with size and mtime unchanged are found by "
                     "--content only: `touch` them, so that the run sees them as changed.")
    return 1


def verify_command(rd: RunDir, content: bool = False) -> int:
    """`verify`: 0 when every frame of the run is what its row was made from, 1 when any changed."""
    info = rd.load()  # not a run folder: refused (exit 2)
    root = Path(info.dataset.root)
    rd.use_archive_index(write=False)
    if not root.is_dir() and split_root(root) is None:
        messages.error(f"the dataset folder {root} (run.json's dataset.root) is gone: none of the "
                       f"run's {info.dataset.frames} frames can be found. Put it back there.")
        return 1
    found: list[Stale] = []

    def report(stale: Iterable[Stale]) -> None:
        for s in stale:
            found.append(s)
            messages.result(f"{s.video}\t{s.frame}\t{s.image}\t{s.why}")

    merged = info.merge is not None and rd.keypoints_path.is_file()
    if merged:
        rows = _check_merged(rd, root, content, report)
    else:
        rows = _check_parts(rd, info, root, content, report)
    return _verdict(rd, root, rows, found, content)
