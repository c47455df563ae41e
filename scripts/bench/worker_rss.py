#!/usr/bin/env python3
"""A worker's memory over 10,000 frames: the real worker loop, RSS sampled every 500 frames.

Plans a run on the benchmark workload (scripts/bench/workload.py), then, in this process pinned to one
core like a worker, builds one Extractor and calls jobs.schedule.worker.process_chunk on the plan's
chunks over and over (each commits a real part) until --frames frames are done, reading VmRSS from /proc
each time another 500 frames are reported. Flat RSS means no leak per frame, video or part.

    .venv/bin/python scripts/bench/worker_rss.py --frames 10000      # ~9 min on one core
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import loadavg, machine, rss_mib, save_json  # noqa: E402
from workload import build_workload  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--frames", type=int, default=10_000)
    p.add_argument("--every", type=int, default=500)
    p.add_argument("--copies", type=int, default=4)
    p.add_argument("--chunk-frames", type=int, default=276)
    p.add_argument("--cpu", type=int, default=sorted(os.sched_getaffinity(0))[-1])
    p.add_argument("--work", type=Path, default=Path("/tmp/phoenix-bench-rss"))
    p.add_argument("--json", default="worker_rss.json", help="file name under docs/results/")
    return p.parse_args()


def extract_frames(args: argparse.Namespace, wl: dict) -> tuple[int, list[dict], float]:
    """One ChunkWorker over the workload's chunks, again and again, RSS sampled every N frames."""
    import cv2

    from phoenix_keypoints.jobs.run.options import RunOptions
    from phoenix_keypoints.jobs.run.prepare import load_or_plan
    from phoenix_keypoints.jobs.rundir.folder import RunDir
    from phoenix_keypoints.jobs.schedule.chunks import Chunks
    from phoenix_keypoints.jobs.schedule.events import Event, FramesDone
    from phoenix_keypoints.jobs.schedule.worker import ChunkWorker

    cv2.setNumThreads(1)
    rd = RunDir(args.work / "run")
    rd.path.mkdir(parents=True)
    info = load_or_plan(rd, RunOptions(dataset=Path(wl["root"]), chunk_frames=args.chunk_frames), 1)
    rd.parts_dir.mkdir(exist_ok=True)
    chunks = Chunks.from_plan(rd.load_plan(), info.dataset.root, info.fingerprint)
    pid, done, next_mark = os.getpid(), 0, 0
    series: list[dict] = []
    t0 = time.monotonic()

    def send(ev: Event | None) -> None:
        nonlocal done, next_mark
        if isinstance(ev, FramesDone):
            done += ev.frames
        while done >= next_mark:
            series.append({"frames": done, "rss_mib": round(rss_mib(pid) or 0, 1),
                           "s": round(time.monotonic() - t0, 1)})
            print(f"{done:6d} frames  RSS {series[-1]['rss_mib']:7.1f} MiB", file=sys.stderr)
            next_mark += args.every

    with ChunkWorker(0, rd.path, info.options.settings()) as worker:
        send(None)
        while done < args.frames:
            for c in sorted(chunks):
                worker.run(chunks.task(c, {}), send)
                if done >= args.frames:
                    break
    return done, series, time.monotonic() - t0


def main() -> int:
    args = parse_args()
    os.sched_setaffinity(0, [args.cpu])
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    wl = build_workload(args.work / "PHOENIX-2014-T", args.copies)
    load0 = loadavg()
    done, series, seconds = extract_frames(args, wl)
    rss = [s["rss_mib"] for s in series]
    after_first = [s["rss_mib"] for s in series if s["frames"] >= 1000]
    # Least-squares slope after the first 1,000 frames (models loaded, buffers warm): a leak
    # shows as a steady climb, while the band around the line is the allocator's noise.
    xs = [s["frames"] for s in series if s["frames"] >= 1000]
    slope = statistics.linear_regression(xs, after_first).slope * 1000 if len(xs) > 1 else None
    out = {"command": " ".join(sys.argv), "machine": machine(), "workload": wl,
           "frames": done, "seconds": round(seconds, 1),
           "load_before": load0, "load_after": loadavg(), "series": series,
           "rss_min_mib": min(rss), "rss_max_mib": max(rss),
           "rss_band_after_1000_frames_mib": round(max(after_first) - min(after_first), 1)
           if after_first else None,
           "rss_slope_mib_per_1000_frames": round(slope, 2) if slope is not None else None}
    print(f"{done} frames in {out['seconds']} s; RSS {min(rss)}-{max(rss)} MiB; after the first "
          f"1,000 frames: band {out['rss_band_after_1000_frames_mib']} MiB, trend "
          f"{out['rss_slope_mib_per_1000_frames']} MiB per 1,000 frames")
    path = save_json(args.json, out)
    print(f"wrote {path}", file=sys.stderr)
    shutil.rmtree(args.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
