#!/usr/bin/env python3
"""The whole `run`, as a user types it, against cores x bare MediaPipe and against pose-format.

For each workload size, on the same frames, in one run:
- run: `phoenix-keypoints run --dataset D --out O` with default options (workers = usable cores),
  in a subprocess from command start to exit. From its run.json: start-up (command start to first
  frame), tail (a worker first found nothing left to take, to the last frame), merge (last frame
  to merged outputs written).
- cores x bare: N = usable cores plain loops at once, each in its own process pinned to its own
  core before MediaPipe is imported, each over its share of the videos (cv2.imread + cvtColor,
  mediapipe's own Holistic(static_image_mode=False, model_complexity=1), a fresh graph per video,
  `process` per frame); frames/s = the sum of each loop's frames / its own loop time.
- pose-format: its `videos_to_poses --num-workers N` over the same frames as lossless video, one
  file per video, decoded bit for bit equal to the PNGs (checked; scripts/bench/posevideos.py).
Ratios: run / (cores x bare) and run / pose-format, each from measurements of the same cycle.
With --repeat the three commands alternate (their order rotating each cycle), so that outside load
falls on all three alike. The keypoints of one video are compared with pose-format's.

    .venv/bin/python scripts/bench/run.py --sizes 8x58,40x58 --repeat 1   # ~5 min on 2 cores
    .venv/bin/python scripts/bench/run.py                                  # + ~20,000 frames: ~1 h

Sizes: "VxF" is V copies of the sample video of F frames; a plain number is about that many frames
of the two sample videos alternated (scripts/bench/workload.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Only stdlib and benchutil up here: the bare loop's process pins itself before cv2 or mediapipe.
# This checkout's packages first (an editable install elsewhere would otherwise be imported).
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
from common import REPO, loadavg, machine, save_json, table  # noqa: E402

COMMANDS = ("run", "bare", "pose-format")
TARGETS = {"8x58": 0.80, "40x58": 0.92, "20000": 0.97}  # run / (cores x bare), issue 10
TARGET_POSE_FORMAT = 1.05  # run / pose-format
DEFAULT_SIZES = "8x58,40x58,20000"


# --- the bare loop: its own process (bench.py --bare-child ROOT ...) ----------------------------
def bare_child(root: Path, cpu: int, share: str, result: Path) -> None:
    """Pin to one core before MediaPipe starts a thread, then a plain loop over this share."""
    os.sched_setaffinity(0, [cpu])
    import cv2
    import mediapipe as mp

    from phoenix_keypoints.extract.corpora import discover

    index, count = (int(x) for x in share.split("/"))
    videos = [[str(root / v.folder / f) for f in v.files] for v in discover(root).videos]
    videos = balanced_shares(videos, count)[index]

    def graph():  # noqa: ANN202
        return mp.solutions.holistic.Holistic(static_image_mode=False, model_complexity=1)

    graph().close()  # load the models once so that the first video does not pay for the disk
    t0, cpu0, frames = time.monotonic(), _cpu(resource.RUSAGE_SELF), 0
    for files in videos:
        with graph() as h:
            for f in files:
                h.process(cv2.cvtColor(cv2.imread(f), cv2.COLOR_BGR2RGB))
                frames += 1
    loop_s, loop_cpu_s = time.monotonic() - t0, _cpu(resource.RUSAGE_SELF) - cpu0
    result.write_text(json.dumps({"cpu": cpu, "videos": len(videos), "frames": frames,
                                  "loop_s": loop_s, "loop_cpu_ms_per_frame":
                                  round(1000 * loop_cpu_s / max(frames, 1), 1)}))


def balanced_shares(videos: list[list[str]], count: int) -> list[list[list[str]]]:
    """Deal each video in turn to the share with the fewest frames so far: about equal frames."""
    shares: list[list[list[str]]] = [[] for _ in range(count)]
    frames = [0] * count
    for v in videos:
        i = frames.index(min(frames))
        shares[i].append(v)
        frames[i] += len(v)
    return shares


# --- running commands ---------------------------------------------------------------------------
def _cpu(who: int = resource.RUSAGE_CHILDREN) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def child_env() -> dict[str, str]:
    """This checkout's code, no fault hooks: what a user's shell gives the command."""
    env = dict(os.environ)
    env.pop("PHOENIX_KEYPOINTS_FAULTS", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def timed(cmds: list[list[str]], log: Path, env: dict[str, str] | None = None) -> dict:
    """Start every command at once, wait for all; wall (epoch start, seconds), CPU, load. `env`:
    another checkout's code (default: this one's, child_env)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    load0, cpu0 = loadavg(), _cpu()
    with log.open("w") as out:
        start, t0 = time.time(), time.monotonic()
        procs = [subprocess.Popen([str(c) for c in cmd], cwd=REPO, env=env or child_env(), stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                 for cmd in cmds]
        codes = [p.wait() for p in procs]
        wall, end = time.monotonic() - t0, time.time()
    if any(codes):
        tail = log.read_text()[-3000:]
        raise SystemExit(f"{cmds[0][:3]} exited {codes}; the end of {log}:\n{tail}")
    cpu = _cpu() - cpu0
    return {"start": start, "end": end, "wall_s": round(wall, 2), "cpu_s": round(cpu, 1),
            "cores_got": round(cpu / wall, 2), "load_1min": [load0[0], loadavg()[0]]}


def phoenix_keypoints() -> list:
    """The README's command: the console script, or `python -m phoenix_keypoints` where none is installed
    (a machine given only this checkout and its wheels)."""
    path = Path(sys.executable).parent / "phoenix-keypoints"
    return [path] if path.exists() else [sys.executable, "-m", "phoenix_keypoints"]


def tool(name: str) -> Path:
    """A console script of this interpreter's environment (where the README's commands live)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise SystemExit(f"{path} not found: install the project with its pose extra "
                         "(pip install -c constraints.txt -e '.[pose]') into this environment")
    return path


def _gap(later: float | None, earlier: float | None) -> float | None:
    return None if later is None or earlier is None else round(later - earlier, 2)


def measure_run(root: Path, out: Path, frames: int) -> dict:
    """`phoenix-keypoints run --dataset D --out O`, nothing tuned; milestones from run.json."""
    shutil.rmtree(out, ignore_errors=True)
    t = timed([[*phoenix_keypoints(), "run", "--dataset", root, "--out", out]],
              out.parent / f"{out.name}.log")
    info = json.loads((out / "run.json").read_text())
    ex, merge = info.get("extraction") or {}, info["merge"]
    if merge["rows"] != frames:
        raise SystemExit(f"run wrote {merge['rows']} rows, expected {frames}")
    return {**t, "frames": frames, "fps": frames / t["wall_s"],
            "cpu_ms_per_frame": round(1000 * t["cpu_s"] / frames, 1),
            "workers": ex.get("workers"), "chunks": info["plan"]["chunks"],
            "startup_s": _gap(ex.get("first_frame"), t["start"]),
            "tail_s": _gap(ex.get("last_frame"), ex.get("first_idle")),
            "merge_s": _gap(merge["time"], ex.get("last_frame")),
            "after_merge_s": _gap(t["end"], merge["time"])}


def measure_bare(root: Path, n: int, work: Path) -> dict:
    """N bare loops at once, loop i pinned to core i over videos i, i + N, ...; frames/s summed."""
    cpus = sorted(os.sched_getaffinity(0))[:n]
    results = [work / f"bare-{i}.json" for i in range(n)]
    cmds = [[sys.executable, __file__, "--bare-child", root, "--cpu", cpu, "--share", f"{i}/{n}",
             "--result", results[i]] for i, cpu in enumerate(cpus)]
    t = timed(cmds, work / "bare.log")
    loops = [json.loads(r.read_text()) for r in results]
    frames = sum(r["frames"] for r in loops)
    return {**t, "frames": frames, "fps": sum(r["frames"] / r["loop_s"] for r in loops),
            "cpu_ms_per_frame": round(1000 * t["cpu_s"] / frames, 1),
            "loops": [{**r, "fps": round(r["frames"] / r["loop_s"], 2)} for r in loops]}


def measure_pose_format(videos: Path, n: int, frames: int, count: int) -> dict:
    """pose-format's own CLI with the same worker count, command start to exit."""
    for old in videos.glob("*.pose"):
        old.unlink()
    t = timed([[tool("videos_to_poses"), "--format", "mediapipe", "--directory", videos,
                "--num-workers", n]], videos.parent / f"{videos.name}.log")
    made = len(list(videos.glob("*.pose")))
    if made != count:
        raise SystemExit(f"videos_to_poses wrote {made} .pose files for {count} videos")
    return {**t, "frames": frames, "fps": frames / t["wall_s"],
            "cpu_ms_per_frame": round(1000 * t["cpu_s"] / frames, 1)}


# --- sizes, cycles, summaries -------------------------------------------------------------------
def build_size(size: str, work: Path, videos_too: bool = True) -> dict:
    """The size's PNG workload and (videos_too) its lossless videos (decode checked bit for bit)."""
    from posevideos import build_videos
    from workload import build_workload, frame_count, source_videos

    root = work / size / "PHOENIX-2014-T"
    if "x" in size:
        videos, per_video = (int(x) for x in size.split("x"))
        wl = build_workload(root, videos, frames_per_video=per_video)
    else:
        per_round = sum(frame_count(s) for s in source_videos(work)[1])
        wl = build_workload(root, math.ceil(int(size) / per_round))
    if videos_too:
        wl["lossless"] = build_videos(root, work / size / "videos", work / "sources")
    return wl


def cycle(rep: int, size: str, wl: dict, n: int, work: Path, commands: tuple[str, ...]) -> dict:
    """The commands once each, in an order that rotates with the cycle number."""
    root, frames = Path(wl["root"]), wl["frames"]
    k = rep % len(commands)
    order = commands[k:] + commands[:k]
    out = {"order": list(order)}
    for what in order:
        if what == "run":
            out[what] = measure_run(root, work / size / "run", frames)
        elif what == "bare":
            out[what] = measure_bare(root, n, work / size)
        else:
            out[what] = measure_pose_format(work / size / "videos", n, frames, wl["videos"])
        print(f"[{size} #{rep}] {what}: {_brief(out[what])}", file=sys.stderr, flush=True)
    for other, key in (("bare", "run_over_cores_bare"), ("pose-format", "run_over_pose_format")):
        if "run" in out and other in out:
            out[key] = out["run"]["fps"] / out[other]["fps"]
    return out


def _brief(m: dict) -> str:
    keys = ("frames", "wall_s", "fps", "cores_got", "startup_s", "tail_s", "merge_s", "load_1min")
    return ", ".join(f"{k} {round(m[k], 2) if isinstance(m[k], float) else m[k]}"
                     for k in keys if k in m)


def compare_keypoints(size: str, wl: dict, work: Path) -> dict:
    """The first video: ours (the last run's keypoints.parquet), pose-format's .pose, a fresh graph."""
    from posevideos import compare

    from phoenix_keypoints.extract.corpora import discover

    root = Path(wl["root"])
    video = discover(root).videos[0].name
    return compare(work / size / "run" / "keypoints.parquet",
                   work / size / "videos" / f"{video}.pose", root, video)


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """Median, and (min-max) when there is more than one value."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    text = fmt.format(statistics.median(vals))
    return text + (f" ({fmt.format(min(vals))}-{fmt.format(max(vals))})" if len(vals) > 1 else "")


def summary_row(size: str, res: dict) -> list:
    cycles = res["cycles"]

    def of(what: str, key: str, fmt: str = "{:.1f}") -> str:
        return spread([c[what][key] for c in cycles if what in c], fmt)

    def ratio(key: str) -> str:
        return spread([c[key] for c in cycles if key in c], "{:.3f}")

    run0, kp = cycles[0]["run"], res.get("keypoints", {}).get("ours_vs_pose_format", {})
    return [size, run0["frames"], run0["workers"], run0["chunks"], of("run", "fps"),
            of("run", "startup_s"), of("run", "tail_s"), of("run", "merge_s"),
            of("bare", "fps"), ratio("run_over_cores_bare"), TARGETS.get(size, "-"),
            of("pose-format", "fps"), ratio("run_over_pose_format"), TARGET_POSE_FORMAT,
            _sci(kp.get("coordinates_max_abs_diff")), _sci(kp.get("pose_visibility_max_abs_diff"))]


def _sci(x: float | None) -> str:
    return "-" if x is None else f"{x:.1e}"


SUMMARY_HEADER = ["size", "frames", "workers", "chunks", "run frames/s", "start-up s", "tail s",
                  "merge s", "cores x bare frames/s", "run / (cores x bare)", "target",
                  "pose-format frames/s", "run / pose-format", "target",
                  "x, y, z vs pose-format: max abs diff", "visibility: max abs diff"]


def detail_rows(size: str, res: dict) -> list[list]:
    rows = []
    for i, c in enumerate(res["cycles"]):
        for what in c["order"]:
            m = c[what]
            rows.append([size, i, what, m["frames"], m["wall_s"], f"{m['fps']:.1f}",
                         m["cpu_ms_per_frame"], m["cores_got"],
                         f"{m['load_1min'][0]}/{m['load_1min'][1]}"])
    return rows


DETAIL_HEADER = ["size", "cycle", "command", "frames", "wall s", "frames/s", "CPU ms/frame",
                 "cores got", "load 1-min before/after"]


def bench_size(size: str, repeat: int, n: int, work: Path, commands: tuple[str, ...]) -> dict:
    pose = "pose-format" in commands
    wl = build_size(size, work, videos_too=pose)
    exact = all(c["bit_exact"] for c in wl["lossless"]["decode_checks"]) if pose else "-"
    print(f"{size}: {wl['videos']} videos, {wl['frames']} frames; lossless videos bit-exact: "
          f"{exact}", file=sys.stderr, flush=True)
    cycles = [cycle(rep, size, wl, n, work, commands) for rep in range(repeat)]
    out = {"workload": wl, "cycles": cycles}
    if pose and "run" in commands:
        out["keypoints"] = compare_keypoints(size, wl, work)
    return out


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--sizes", default=DEFAULT_SIZES,
                   help=f"comma-separated VxF (V videos of F frames) or N (~N frames); "
                        f"default {DEFAULT_SIZES}")
    p.add_argument("--repeat", type=int, default=1, help="cycles of the three commands per size")
    p.add_argument("--work", type=Path, default=Path("/tmp/phoenix-bench"),
                   help="scratch folder (workloads are symlinks; runs and videos are rewritten)")
    p.add_argument("--json", default="bench-cores.json", help="file name under docs/results/")
    p.add_argument("--commands", default=",".join(COMMANDS),
                   help="which of run,bare,pose-format to time (default all three; run is needed "
                        "for a ratio)")
    p.add_argument("--bare-child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    p.add_argument("--share", help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    sizes = args.sizes.split(",")
    bad = [s for s in sizes if not all(x.isdigit() for x in s.split("x")) or s.count("x") > 1]
    if bad or args.repeat < 1:
        p.error(f"--sizes takes VxF or N, comma-separated (got {bad}); --repeat at least 1")
    args.sizes = sizes
    args.commands = tuple(c for c in COMMANDS if c in args.commands.split(","))
    if "run" not in args.commands or len(args.commands) < 2:
        p.error(f"--commands: run and at least one of bare,pose-format (got {args.commands})")
    return args


def main() -> int:
    args = parse_args()
    if args.bare_child:
        bare_child(args.bare_child, args.cpu, args.share, args.result)
        return 0
    n = len(os.sched_getaffinity(0))  # the run's default worker count: usable cores
    load_before, started = loadavg(), machine()
    results = {s: bench_size(s, args.repeat, n, args.work, args.commands) for s in args.sizes}
    load_after = loadavg()
    print(table([summary_row(s, r) for s, r in results.items()], SUMMARY_HEADER))
    print()
    print(table([row for s, r in results.items() for row in detail_rows(s, r)], DETAIL_HEADER))
    print(f"\nload average (1/5/15 min): before {load_before}, after {load_after}")
    path = save_json(args.json, {
        "command": " ".join(sys.argv), "machine": started, "workers": n,
        "load_before": load_before, "load_after": load_after, "ended": time.strftime("%H:%M:%S"),
        "targets": {"run_over_cores_bare": TARGETS, "run_over_pose_format": TARGET_POSE_FORMAT},
        "sizes": results})
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
