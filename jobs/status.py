"""`status`: what a run folder holds, from any shell, while a run goes on or after it died.

Reads only: run.json, plan.parquet, part footers (not their pages) and the coordinator's heartbeat
(progress.json), so it is cheap and safe beside a live run.
"""

from __future__ import annotations

import json
import time
from typing import Any

from jobs.merge import scan_parts
from jobs.rundir import RunDir
from jobs.shards import array_expr, shard_state

STALE_AFTER_S = 30.0


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def collect(rd: RunDir) -> dict[str, Any]:
    meta = rd.load()
    plan = rd.load_plan()
    state = scan_parts(rd, meta, plan, move_bad=False)
    frames_total = sum(sum(v.values()) for v in state.chunks.values())
    progress = _read_json(rd.progress_path)
    live = _live(progress)
    shard_beats = [p for p in map(_read_json, rd.shard_progress_files()) if p]
    return {"meta": meta, "state": state, "frames_total": frames_total,
            "progress": progress, "live": live, "shard_beats": shard_beats}


def _read_json(path: Any) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _live(progress: dict[str, Any] | None) -> bool:
    return bool(progress and progress.get("running")
                and time.time() - progress.get("updated", 0) < STALE_AFTER_S)


def _shard_lines(rd: RunDir, info: dict[str, Any]) -> list[str]:
    """Shards complete/missing, the --array= that resubmits the missing, live shard heartbeats."""
    num_shards = info["meta"].get("num_shards", 1)
    state = info["state"]
    shards = shard_state(state.chunks, state.done, num_shards)
    missing = sorted(shards.missing)
    line = f"shards:   {len(shards.complete)}/{num_shards} complete"
    if missing:
        line += (f"; missing {len(missing)}: {', '.join(map(str, missing[:20]))}"
                 f"{' ...' if len(missing) > 20 else ''}")
    lines = [line]
    if missing:
        lines.append(f"resubmit: --array={array_expr(missing)}  (`phoenix-keypoints slurm --out "
                     f"{rd.path} --num-shards {num_shards} --submit` submits exactly these)")
    for beat in info["shard_beats"]:
        if _live(beat):
            rate = beat.get("frames_per_s") or 0.0
            lines.append(f"running:  {beat.get('label')}: pid {beat['pid']} on {beat['host']}, "
                         f"{len(beat['workers'])} workers, {rate:.1f} frames/s, "
                         f"{beat['frames_done']}/{beat['frames_total']} frames")
    return lines


def render(rd: RunDir) -> str:
    info = collect(rd)
    meta, state, progress = info["meta"], info["state"], info["progress"]
    n_chunks = len(state.chunks)
    lines = [f"run:      {rd.path}", f"dataset:  {meta['dataset']['root']} "
             f"({meta['dataset']['layout']}, {meta['dataset']['videos']} videos)"]
    frames_done = state.frames_done
    lines.append(f"chunks:   {len(state.done)}/{n_chunks} committed")
    lines.append(f"frames:   {frames_done}/{info['frames_total']} in committed parts")
    if info["live"]:
        rate = progress.get("frames_per_s") or 0.0
        in_flight = progress["frames_done"]
        left = max(0, progress["frames_total"] - in_flight)
        eta = _duration(left / rate) if rate > 0 else "unknown"
        lines.append(f"running:  pid {progress['pid']} on {progress['host']}, "
                     f"{len(progress['workers'])} workers, {rate:.1f} frames/s, "
                     f"{in_flight}/{progress['frames_total']} frames incl. chunks in flight, "
                     f"ETA {eta}")
    elif progress and progress.get("running"):
        lines.append(f"running:  no (last heartbeat {_duration(time.time() - progress['updated'])}"
                     " ago: the run died; `run --out` again resumes it)")
    elif progress:
        lines.append("running:  no")
    if meta.get("num_shards", 1) > 1:
        lines += _shard_lines(rd, info)
    failed = state.failed
    lines.append(f"failed:   {len(failed)} video(s)" + (": " + ", ".join(
        f"{v} ({w})" for v, w in sorted(failed.items())[:10]) if failed else ""))
    problems = meta["dataset"]["problems"]
    lines.append(f"missing:  {len(problems)} listed video(s) missing on disk or without frames"
                 + (": " + ", ".join(f"{v} ({p})" for v, p in list(problems.items())[:10])
                    if problems else ""))
    if state.rejected:
        lines.append(f"untrusted parts (redone on the next run): {sorted(state.rejected)[:10]}")
    merged = meta.get("merge")
    if merged is None and "merge" in meta:
        lines.append("merged:   interrupted (merge again)")
    elif merged:
        lines.append(f"merged:   {merged['rows']} rows in {rd.keypoints_path.name}"
                     + (" (partial)" if merged["partial"] else ""))
    else:
        lines.append("merged:   not yet")
    return "\n".join(lines)
