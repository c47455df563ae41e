#!/usr/bin/env python3
"""Video input: `run` vs cores x a bare PyAV + MediaPipe loop vs pose-format, by bench.py's method.

The workload is V copies (symlinks) of the shared sample's signer_demo.mp4 (H.264, 540x720, 58
frames) in one folder, read by the folder-of-videos corpus. Three commands, alternated cycle by
cycle (their order rotating) so outside load falls on all alike:
- run: `phoenix-keypoints run --dataset D --out O`, default options (workers = usable cores).
- cores x bare: N = usable cores plain loops at once, each pinned to its own core before PyAV or
  MediaPipe is imported, over its share of the videos: PyAV decode (`container.decode`,
  `to_ndarray(format="rgb24")`) and mediapipe's own Holistic, a fresh graph per video; frames/s =
  the sum of each loop's frames / its own loop time. Each loop also times its decoding alone, and
  a one-core decode-only pass gives the decode cost per frame.
- pose-format: `videos_to_poses --format mediapipe --directory D --num-workers N` on the same files.

    .venv/bin/python scripts/bench/video.py --videos 8 --repeat 1     # ~3 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
from common import SHARED_DATA, loadavg, machine, save_json, table  # noqa: E402
from run import balanced_shares as shares_of  # noqa: E402
from run import measure_pose_format, phoenix_keypoints, timed  # noqa: E402

SOURCE = SHARED_DATA / "video-sample" / "signer_demo.mp4"
COMMANDS = ("run", "bare", "pose-format")


def bare_child(folder: Path, cpu: int, share: str, result: Path) -> None:
    """Pinned to one core first; then the plain loop a user would write over this share."""
    os.sched_setaffinity(0, [cpu])
    import av
    import mediapipe as mp

    index, count = (int(x) for x in share.split("/"))
    videos = [[str(p)] * _frames(p) for p in sorted(folder.glob("*.mp4"))]
    mine = [v[0] for v in shares_of(videos, count)[index]]
    mp.solutions.holistic.Holistic(static_image_mode=False, model_complexity=1).close()
    t0, frames, decode_s = time.monotonic(), 0, 0.0
    for path in mine:
        with av.open(path) as c, mp.solutions.holistic.Holistic(static_image_mode=False,
                                                               model_complexity=1) as h:
            it = c.decode(video=0)
            while True:
                d0 = time.monotonic()
                frame = next(it, None)
                if frame is None:
                    break
                rgb = frame.to_ndarray(format="rgb24")
                decode_s += time.monotonic() - d0
                h.process(rgb)
                frames += 1
    loop_s = time.monotonic() - t0
    result.write_text(json.dumps({"cpu": cpu, "videos": len(mine), "frames": frames,
                                  "loop_s": loop_s, "decode_ms_per_frame":
                                  round(1000 * decode_s / max(frames, 1), 2)}))


def _frames(path: Path) -> int:
    import av

    with av.open(str(path)) as c:
        return sum(1 for p in c.demux(video=0) if p.size)


def decode_only(folder: Path) -> dict:
    """One core, PyAV decode + rgb24 of every frame, single-threaded as the workers decode."""
    import av

    t0, cpu0, frames = time.monotonic(), _cpu(), 0
    for path in sorted(folder.glob("*.mp4")):
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            s.thread_type = "NONE"
            for f in c.decode(s):
                f.to_ndarray(format="rgb24")
                frames += 1
    wall = time.monotonic() - t0
    return {"frames": frames, "wall_s": round(wall, 2), "ms_per_frame": round(1000 * wall / frames, 2),
            "cpu_ms_per_frame": round(1000 * (_cpu() - cpu0) / frames, 2)}


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def measure_run(folder: Path, out: Path, frames: int) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    t = timed([[*phoenix_keypoints(), "run", "--dataset", folder, "--out", out]],
              out.parent / f"{out.name}.log")
    info = json.loads((out / "run.json").read_text())
    if info["merge"]["rows"] != frames:
        raise SystemExit(f"run wrote {info['merge']['rows']} rows, expected {frames}")
    ex = info.get("extraction") or {}
    return {**t, "frames": frames, "fps": frames / t["wall_s"], "workers": ex.get("workers"),
            "cpu_ms_per_frame": round(1000 * t["cpu_s"] / frames, 1)}


def measure_bare(folder: Path, n: int, work: Path) -> dict:
    cpus = sorted(os.sched_getaffinity(0))[:n]
    results = [work / f"bare-{i}.json" for i in range(n)]
    cmds = [[sys.executable, __file__, "--bare-child", folder, "--cpu", cpu, "--share", f"{i}/{n}",
             "--result", results[i]] for i, cpu in enumerate(cpus)]
    t = timed(cmds, work / "bare.log")
    loops = [json.loads(r.read_text()) for r in results]
    frames = sum(r["frames"] for r in loops)
    return {**t, "frames": frames, "fps": sum(r["frames"] / r["loop_s"] for r in loops),
            "cpu_ms_per_frame": round(1000 * t["cpu_s"] / frames, 1), "loops": loops}


def cycle(rep: int, folder: Path, n: int, frames: int, videos: int, work: Path) -> dict:
    k = rep % len(COMMANDS)
    order = COMMANDS[k:] + COMMANDS[:k]
    out: dict = {"order": list(order)}
    for what in order:
        if what == "run":
            out[what] = measure_run(folder, work / "run", frames)
        elif what == "bare":
            out[what] = measure_bare(folder, n, work)
        else:
            out[what] = measure_pose_format(folder, n, frames, videos)
        print(f"[#{rep}] {what}: {out[what]['fps']:.2f} frames/s, wall {out[what]['wall_s']} s, "
              f"load {out[what]['load_1min']}", file=sys.stderr, flush=True)
    out["run_over_cores_bare"] = out["run"]["fps"] / out["bare"]["fps"]
    out["run_over_pose_format"] = out["run"]["fps"] / out["pose-format"]["fps"]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--videos", type=int, default=8, help="copies of signer_demo.mp4")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--work", type=Path, default=Path("/tmp/phoenix-bench-video"))
    p.add_argument("--json", default="bench-video.json")
    p.add_argument("--bare-child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    p.add_argument("--share", help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.bare_child:
        bare_child(args.bare_child, args.cpu, args.share, args.result)
        return 0
    folder = args.work / "videos"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for i in range(args.videos):
        (folder / f"clip{i:03d}.mp4").symlink_to(SOURCE)
    frames = args.videos * _frames(SOURCE)
    n = len(os.sched_getaffinity(0))
    load_before, started = loadavg(), machine()
    decode = decode_only(folder)
    cycles = [cycle(r, folder, n, frames, args.videos, args.work) for r in range(args.repeat)]
    rows = [[i, c["run"]["fps"], c["bare"]["fps"], c["pose-format"]["fps"],
             f"{c['run_over_cores_bare']:.3f}", f"{c['run_over_pose_format']:.3f}",
             max(lp["decode_ms_per_frame"] for lp in c["bare"]["loops"])] for i, c in enumerate(cycles)]
    print(table(rows, ["cycle", "run frames/s", "cores x bare frames/s", "pose-format frames/s",
                       "run / (cores x bare)", "run / pose-format", "bare loop decode ms/frame"]))
    print(f"decode only (one core, PyAV rgb24, one thread): {decode}")
    path = save_json(args.json, {"command": " ".join(sys.argv), "machine": started, "workers": n,
                                 "videos": args.videos, "frames": frames, "decode_only": decode,
                                 "load_before": load_before, "load_after": loadavg(),
                                 "cycles": cycles})
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
