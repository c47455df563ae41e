"""`status`: what a run folder holds, from any shell, while a run goes on or after it died.

Reads only: run.json, plan.parquet, part footers (not their pages), the coordinators' heartbeats
(progress*.json) and a listing of the corpus (which videos and frame names there are now, to name
what was added or removed since the plan; no frame is read; an archive that changed since the run
indexed it is read through once, as `verify` reads it, and its index kept in memory only), so it is
safe beside a live run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from phoenix_keypoints.extract.corpora.base import DatasetError
from phoenix_keypoints.extract.sources.archive_index import ArchiveError
from phoenix_keypoints.jobs.messages import listing
from phoenix_keypoints.jobs.run import summary
from phoenix_keypoints.jobs.run.done import PartsState, scan_parts
from phoenix_keypoints.jobs.run.finish import made_with
from phoenix_keypoints.jobs.run.prepare import check_corpus
from phoenix_keypoints.jobs.rundir import heartbeat
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.heartbeat import Heartbeat
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo
from phoenix_keypoints.jobs.rundir.shards import array_expr, live_shards, shard_state


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@dataclass
class Snapshot:
    info: RunInfo
    state: PartsState
    beat: Heartbeat | None
    shard_beats: list[Heartbeat]
    unread: list[str]  # heartbeats that cannot be read (a FIFO in progress.json's place), named


def collect(rd: RunDir) -> Snapshot:
    info = rd.load()
    state = scan_parts(rd, info, rd.load_plan(), move_bad=False)
    (beat, why), *shards = map(heartbeat.read_checked, [rd.progress_path, *rd.shard_progress_files()])
    return Snapshot(info, state, beat, [b for b, _ in shards if b],
                    [w for w in [why, *(w for _, w in shards)] if w])


@dataclass
class InFlight:
    """Chunks live workers hold that have no committed part yet, and the frames done in them."""

    chunks: int = 0
    frames: int = 0


def in_flight(beats: list[Heartbeat], committed: set[int]) -> InFlight:
    """From live heartbeats, leaving out chunks already committed (a heartbeat is up to 2 s old,
    so it may still show a worker on a chunk whose part is in): one count, never two."""
    held = {w.chunk: w.frames for b in beats if heartbeat.is_live(b) for w in b.workers
            if w.chunk is not None and w.chunk not in committed}
    return InFlight(len(held), sum(held.values()))


def _running_line(beat: Heartbeat, left: int, label: str = "") -> str:
    rate = beat.frames_per_s or 0.0
    eta = _duration(left / rate) if rate > 0 else "unknown"
    return (f"running:  {label}pid {beat.pid} on {beat.host}, {len(beat.workers)} workers, "
            f"{rate:.1f} frames/s, ETA {eta}")


def _coordinator_lines(rd: RunDir, beat: Heartbeat | None, left: int) -> list[str]:
    if beat is None:
        return []
    if heartbeat.is_live(beat):
        return [_running_line(beat, left)]
    if beat.running:
        return [f"running:  no (pid {beat.pid} on {beat.host} stopped without finishing; last "
                f"heartbeat {_duration(time.time() - beat.updated)} ago). Resume with "
                f"`phoenix-keypoints run --out {rd.path}`"]
    return ["running:  no"]


def _shard_lines(rd: RunDir, snap: Snapshot, left: int) -> list[str]:
    """Shards complete/missing, the --array= that resubmits the missing, live shard heartbeats."""
    num_shards = snap.info.num_shards
    shards = shard_state(rd.claims_dir, bool(snap.state.missing), num_shards,
                         live_shards(rd.shard_progress_files()))
    missing = shards.missing
    line = f"shards:   {len(shards.complete)}/{num_shards} complete"
    if missing:
        line += f"; missing {len(missing)}: {listing([str(i) for i in missing], 20)}"
    lines = [line]
    if missing:
        lines.append(f"resubmit: --array={array_expr(missing)}  (`phoenix-keypoints slurm --out "
                     f"{rd.path} --num-shards {num_shards} --submit` submits exactly these)")
    for beat in snap.shard_beats:
        if heartbeat.is_live(beat):
            lines.append(_running_line(beat, left, f"{beat.label}: "))
    return lines


def _merge_line(rd: RunDir, info: RunInfo) -> str:
    if info.merge_interrupted:
        return "merged:   interrupted (merge again)"
    if info.merge is None and info.changes and rd.keypoints_path.is_file():
        return (f"merged:   out of date ({rd.keypoints_path.name} predates the last re-plan; the "
                "next run merges again)")
    if info.merge is not None:
        return (f"merged:   {info.merge.rows} rows in {rd.keypoints_path.name}"
                + (" (partial)" if info.merge.partial else ""))
    return "merged:   not yet"


def _corpus_lines(rd: RunDir, info: RunInfo) -> list[str]:
    """The corpus as listed now against the plan, and the re-plans so far."""
    lines = []
    if info.changes:
        last = info.changes[-1]
        lines.append(f"re-plans: {len(info.changes)} after the corpus changed; last: {last.summary} "
                     "(run.json `changes`)")
    rd.use_archive_index(write=False)  # a changed archive is read again (as verify does), not saved
    try:
        check = check_corpus(info, rd.load_plan())
    except (DatasetError, ArchiveError, OSError) as e:
        return [*lines, f"corpus:   cannot be listed now ({e})"]
    diff = check.diff
    if check.behind:
        lines.append("re-plan:  interrupted before run.json was written; the next run completes it")
    if check.current(info):  # the same test `run` makes: the listing and every corpus file's bytes
        return [*lines, "corpus:   as planned (listed now)"]
    return [*lines, f"corpus:   changed since planned: {diff.summary()}; the next `phoenix-keypoints "
                    f"run --out {rd.path}` extracts what is new and leaves out what is gone"]


def _estimator_lines(info: RunInfo) -> list[str]:
    """Which family makes this run's keypoints, where it is not the default (unsaid as before):
    the family's own line (a run with model files names them), else its name."""
    from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_FAMILY, family

    if info.options.estimator == DEFAULT_FAMILY:
        return []
    return [family(info.options.estimator).status_line(info.options.settings())]


def render(rd: RunDir) -> str:
    snap = collect(rd)
    info, state = snap.info, snap.state
    flight = in_flight([b for b in [snap.beat, *snap.shard_beats] if b], set(state.done))
    going = f", {flight.chunks} in flight" if flight.chunks else ""
    lines = [f"run:      {rd.path}",
             f"dataset:  {info.dataset.root} ({info.dataset.layout}, {info.dataset.videos} videos)",
             *_estimator_lines(info),
             f"chunks:   {len(state.done)}/{len(state.chunks)} committed{going}",
             f"frames:   {state.frames_done}/{state.frames_total} committed"
             + (f", {flight.frames} more done in the chunks in flight" if flight.chunks else "")]
    left = max(0, state.frames_total - state.frames_done - flight.frames)
    lines += _corpus_lines(rd, info)
    lines += _coordinator_lines(rd, snap.beat, left)
    lines += [f"heartbeat: {why} (not read)" for why in snap.unread]
    if info.num_shards > 1:
        lines += _shard_lines(rd, snap, left)
    failed = state.failed
    lines.append(f"failed:   {len(failed)} video(s)" + (": " + listing(
        [f"{v} ({w})" for v, w in sorted(failed.items())]) if failed else ""))
    problems = info.dataset.problems
    lines.append(f"missing:  {info.dataset.problem_count} listed video(s) missing on disk or "
                 "without frames" + (": " + listing([f"{v} ({p})" for v, p in problems.items()],
                                                    total=info.dataset.problem_count)
                                     if problems else ""))
    not_ok = summary.not_ok_frames(state.statuses, state.worst_videos())
    if state.done:
        lines.append(f"statuses: {not_ok or f'all {state.frames_done} frame(s) ok'} "
                     "(committed parts)")
    if state.done and (made := made_with(info, state))[1]:
        lines.append("versions: the committed parts were made under more than one: " + "; ".join(
            f"{k} {made[0][k]}" for k in made[1]) + " (`phoenix-keypoints verify` names them)")
    ignored = summary.ignored_files(info.dataset)
    if ignored:
        lines.append(f"skipped:  {ignored}")
    if state.rejected:
        lines.append(f"untrusted parts (redone on the next run): {sorted(state.rejected)[:10]}")
    lines.append(_merge_line(rd, info))
    if info.merge is not None:
        page = rd.path / "report" / "index.html"
        lines.append(f"report:   {page}" if page.is_file() else
                     f"report:   not written yet: phoenix-keypoints report --out {rd.path}")
    return "\n".join(lines)
