"""`verify`: does a run still describe its dataset? Names every video and frame added to or removed
from the corpus since the run was planned, and every frame changed since its row was made.

The corpus is listed again and compared with the plan (jobs.run.changes: no frame read). A finished
run is checked from keypoints.parquet, streamed in batches of its provenance columns (never the
landmarks), so the whole release costs seconds of stat calls and flat memory; a run not merged yet
is checked from its committed parts. Read-only and lock-free: safe beside a live run. Each
difference is one tab-separated line on stdout (video, frame, image, why; "-" where there is no
frame or image); the verdict and what to do go to stderr. Exit 1 when anything differs, else 0.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.corpora.base import DatasetError
from phoenix_keypoints.extract.sources.archive_index import split_root
from phoenix_keypoints.extract.sources.provenance import DEFAULT_THREADS
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.run.changes import PlanDiff
from phoenix_keypoints.jobs.run.done import scan_parts
from phoenix_keypoints.jobs.run.finish import made_with, mixed_line
from phoenix_keypoints.jobs.run.prepare import check_corpus
from phoenix_keypoints.jobs.rundir.folder import JobFailed, RunDir, RunError
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo
from phoenix_keypoints.jobs.rundir.stale import Stale, columns, stale_parts, stale_rows

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
    skip = {c: set(part.dropped) for c, part in state.done.items() if part.dropped}
    stale, unreadable = stale_parts({c: rd.part_path(c) for c in state.done}, root, content,
                                    skip=skip)
    for chunk in sorted(stale):
        report(stale[chunk])
    if unreadable:
        raise JobFailed("part(s) could not be read (moved by a run beside this one?): " +
                       messages.listing([f"chunk {c}: {w}" for c, w in sorted(unreadable.items())]))
    return state.frames_done


def _verdict(rd: RunDir, root: Path, rows: int, found: list[Stale], content: bool,
             quiet: bool = False) -> int:
    """Tell what was found and what to do; the exit status (quiet: say nothing when all match)."""
    how = "size, mtime and sha256" if content else "size and mtime; --content also compares sha256"
    if not found and quiet:
        return 0
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


def listing_lines(diff: PlanDiff, plan: pa.Table, now: pa.Table) -> list[str]:
    """One line per video or frame the corpus gained or lost since the plan (video, frame, image,
    why), and per video whose corpus text differs."""
    folder = {}
    for t in (plan, now):
        cols = (t[c].to_pylist() for c in ("split", "video", "folder"))
        folder.update({(s, v): f for s, v, f in zip(*cols, strict=True)})
    lines = [f"{v}\t-\t{folder[(s, v)]}\tvideo added to the corpus ({s})" for s, v in diff.added]
    lines += [f"{v}\t-\t{folder[(s, v)]}\tvideo removed from the corpus ({s})"
              for s, v in diff.removed]
    lines += [f"{v}\t-\t{folder[(b, v)]}\tvideo moved from {a} to {b}" for v, a, b in diff.moved]
    for r in diff.reframed:
        where = folder[(r.split, r.video)]
        if r.moved_frames or not (r.added or r.removed):
            lines.append(f"{r.video}\t-\t{where}\tframes {r.before} -> {r.after}"
                         + (" (elsewhere now)" if r.moved_frames else ""))
            continue
        lines += [f"{r.video}\t-\t{where}/{f}\tframe added to the corpus" for f in r.added]
        lines += [f"{r.video}\t-\t{where}/{f}\tframe removed from the corpus" for f in r.removed]
    lines += [f"{v}\t-\t-\tcorpus text differs ({s})" for s, v in diff.details]
    return lines


def verify_command(rd: RunDir, content: bool = False) -> int:
    """`verify`: 0 when every frame of the run is what its row was made from, 1 when any changed."""
    info = rd.load()  # not a run folder: refused (exit 2)
    root = Path(info.dataset.root)
    rd.use_archive_index(write=False)
    if not root.is_dir() and split_root(root) is None:
        messages.error(f"the dataset folder {root} (run.json's dataset.root) is gone: none of the "
                       f"run's {info.dataset.frames} frames can be found. Put it back there.")
        return 1
    diff, listed = _listing(rd)
    for line in listed:
        messages.result(line)
    gone = {v for _, v in diff.gone}  # their frames are named above
    found: list[Stale] = []

    def report(stale: Iterable[Stale]) -> None:
        for s in stale:
            if s.video not in gone:
                found.append(s)
                messages.result(f"{s.video}\t{s.frame}\t{s.image}\t{s.why}")

    merged = info.merge is not None and rd.keypoints_path.is_file()
    if merged:
        rows = _check_merged(rd, root, content, report)
    else:
        rows = _check_parts(rd, info, root, content, report)
    if diff:
        messages.say(f"verify: the corpus at {root} changed since {rd.path} was planned: "
                     f"{diff.summary()}. `phoenix-keypoints run --out {rd.path}` extracts the "
                     "added and changed videos and leaves the removed ones out.")
    code = _verdict(rd, root, rows, found, content, quiet=bool(listed))
    mixed = _mixed_versions(rd, info)
    return 1 if listed or _models_changed(rd, info) or mixed else code


def _mixed_versions(rd: RunDir, info: RunInfo) -> bool:
    """Parts made under more than one version of what the values depend on (each part's footer
    says; a merged run whose parts are gone: its merge record): a line on stdout ("-", "-", the
    file, the versions) and the verdict on stderr."""
    state = scan_parts(rd, info, rd.load_plan(), move_bad=False)
    if state.done:
        versions, mixed = made_with(info, state)
    elif info.merge is not None:
        versions, mixed = info.versions, info.merge.mixed_versions
    else:
        return False
    what = rd.keypoints_path.name if info.merge is not None else "parts/"
    for key in mixed:
        messages.result(f"-\t-\t{what}\tmade under {key} {versions[key]}")
    if mixed:
        messages.error(mixed_line(what, versions, mixed))
    return bool(mixed)


def _models_changed(rd: RunDir, info: RunInfo) -> bool:
    """A run's model files against the sha256 and size it recorded; each one changed or
    gone is a line on stdout ("-", "-", its path, why) and named on stderr, one gone with how to
    record where it is now (a moved file is otherwise named for good)."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    problems = family(info.options.estimator).model_problems(info.options.settings())
    for why in problems:
        path = why.split(": ", 1)[0].split(" ", 1)[1]
        messages.result(f"-\t-\t{path}\t{why.split(': ', 1)[1]}")
        messages.error(why)
        if not os.path.lexists(path):
            flag = why.split(" ", 1)[0]
            messages.error(f"if {path} moved: run this run's `phoenix-keypoints run --out "
                           f"{rd.path}` command again with {flag} naming where it is now; a file "
                           "of the recorded bytes is followed there (run.json and "
                           "keypoints.parquet name it, nothing is extracted again).")
    return bool(problems)


def _listing(rd: RunDir) -> tuple[PlanDiff, list[str]]:
    """What the corpus gained and lost since the plan, as lines; a corpus that cannot be listed
    now is said (the frames are still checked) and counts as a difference."""
    try:
        check = check_corpus(rd.load(), rd.load_plan())
    except DatasetError as e:
        messages.error(f"the corpus cannot be listed now, so added and removed videos are not "
                       f"checked: {e}")
        return PlanDiff(), ["-\t-\t-\tcorpus cannot be listed"]
    return check.diff, listing_lines(check.diff, check.plan, check.now)
