#!/usr/bin/env python3
"""Bare MediaPipe against the whole job, on the same frames, in one run: overhead and scaling.

Measures, on a workload of real signing frames repeated under new names (scripts/workload.py):
- bare: a plain loop in one process pinned to one core: cv2.imread + cvtColor, then one
  mediapipe Holistic (static_image_mode=False, model_complexity=1; a fresh graph per video)
  `process` per frame. "bare" uses MediaPipe's own class (its scheduler starts one thread per
  core of the machine); "bare capped" the project's extract.holistic.new_holistic (num_threads=1).
- job(1) and job(N): the real `phoenix-keypoints run` command in a subprocess, wall time from
  start to merged keypoints.parquet + tensors, with 1 and N workers (N = usable cores).
- start-up: the same command on a dataset of one frame (interpreter, plan, worker spawn and
  mediapipe import, graph, merge): the fixed cost of any run.
Ratios: job(1)/bare (overhead) and job(N)/(N x bare) (scaling efficiency). CPU seconds per frame
(from getrusage of the children) are reported too: they are less disturbed by other load on a
shared machine than wall time is.

    .venv/bin/python scripts/bench.py                 # ~7 min on 2 cores
    .venv/bin/python scripts/bench.py --repeat 3      # medians of 3, spread shown
    .venv/bin/python scripts/bench.py --paired        # + comparisons that share the outside load
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import REPO, loadavg, machine, save_json, table  # noqa: E402
from workload import build_one_frame, build_workload  # noqa: E402


# --- bare: runs in its own process (python bench.py --bare MODE ...) ---------------------------
def bare_main(mode: str, root: Path, cpu: int, result: Path) -> None:
    """Pin to one core before MediaPipe starts a thread, then a plain loop over every frame."""
    t_start = time.monotonic()
    os.sched_setaffinity(0, [cpu])
    import cv2
    from mediapipe.python.solutions.holistic import Holistic

    from extract.dataset import discover
    from extract.holistic import HolisticOptions, new_holistic

    ds = discover(root)
    videos = [[str(root / v.folder / f) for f in v.files] for v in ds.videos]

    def graph():  # noqa: ANN202
        if mode == "capped":
            return new_holistic(HolisticOptions(), num_threads=1)
        return Holistic(static_image_mode=False, model_complexity=1)

    graph().close()  # load the models once so the first video does not pay for the disk
    t_loop = time.monotonic()
    frames = 0
    for files in videos:
        with graph() as h:
            for f in files:
                rgb = cv2.cvtColor(cv2.imread(f), cv2.COLOR_BGR2RGB)
                h.process(rgb)
                frames += 1
    t_end = time.monotonic()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    result.write_text(json.dumps({"frames": frames, "loop_s": t_end - t_loop,
                                  "startup_s": t_loop - t_start,
                                  "cpu_s": ru.ru_utime + ru.ru_stime}))


# --- the parent -----------------------------------------------------------------------------
def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def start_bare(mode: str, root: Path, cpu: int, work: Path) -> dict:
    result = work / f"bare-{mode}-{cpu}.json"
    proc = subprocess.Popen([sys.executable, __file__, "--bare", mode, "--root", str(root),
                             "--cpu", str(cpu), "--result", str(result)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return {"proc": proc, "result": result, "t0": time.monotonic(), "load0": loadavg(),
            "what": f"bare {mode}"}


def finish_bare(h: dict) -> dict:
    _, err = h["proc"].communicate()
    wall = time.monotonic() - h["t0"]
    if h["proc"].returncode:
        raise SystemExit(f"{h['what']} failed:\n{err[-3000:]}")
    r = json.loads(h["result"].read_text())
    return {"frames": r["frames"], "wall_s": round(wall, 2), "loop_s": round(r["loop_s"], 2),
            "startup_s": round(r["startup_s"], 2), "fps": r["frames"] / r["loop_s"],
            "cpu_ms_per_frame": 1000 * r["cpu_s"] / r["frames"],
            "cpu_share": r["cpu_s"] / wall, "load": [h["load0"][0], loadavg()[0]]}


def run_bare(mode: str, root: Path, cpu: int, work: Path) -> dict:
    return finish_bare(start_bare(mode, root, cpu, work))


def start_job(root: Path, out: Path, workers: int, chunk_frames: int, frames: int) -> dict:
    """`phoenix-keypoints run` as a user runs it; wall time from start to merged output."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "jobs.cli", "run", "--dataset", str(root), "--out", str(out),
           "--num-gpus", "0", "--workers-per-gpu", str(workers), "--chunk-frames",
           str(chunk_frames)]
    env = {**os.environ, "PHOENIX_KEYPOINTS_FAULTS": ""}
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)
    return {"proc": proc, "out": out, "workers": workers, "frames": frames,
            "t0": time.monotonic(), "load0": loadavg(), "cpu0": _children_cpu()}


def finish_job(h: dict, other_cpu_s: float = 0.0) -> dict:
    """other_cpu_s: CPU of other children reaped meanwhile (a bare run beside this one)."""
    _, err = h["proc"].communicate()
    wall = time.monotonic() - h["t0"]
    if h["proc"].returncode:
        raise SystemExit(f"job failed ({h['proc'].returncode}):\n{err[-3000:]}")
    meta = json.loads((h["out"] / "run.json").read_text())
    frames = h["frames"]
    if meta["merge"]["rows"] != frames:
        raise SystemExit(f"job wrote {meta['merge']['rows']} rows, expected {frames}")
    cpu = _children_cpu() - h["cpu0"] - other_cpu_s
    return {"workers": h["workers"], "frames": frames, "wall_s": round(wall, 2),
            "fps": frames / wall, "cpu_ms_per_frame": 1000 * cpu / frames,
            "cpu_share": cpu / wall, "plan_s": meta["plan"]["seconds"],
            "merge_s": meta["merge"]["seconds"], "load": [h["load0"][0], loadavg()[0]]}


def run_job(root: Path, out: Path, workers: int, chunk_frames: int, frames: int) -> dict:
    return finish_job(start_job(root, out, workers, chunk_frames, frames))


def run_pair(root: Path, work: Path, chunk: int, frames: int) -> tuple[dict, dict]:
    """bare and job(1) at the same time, each on its own core, so both see the same outside load
    (job(1)'s worker is pinned to the first usable core, bare to the second)."""
    cpus = sorted(os.sched_getaffinity(0))
    hj = start_job(root, work / "run-pair", 1, chunk, frames)
    hb = start_bare("default", root, cpus[1], work)
    bare = finish_bare(hb)
    bare_cpu = bare["cpu_ms_per_frame"] * bare["frames"] / 1000
    return bare, finish_job(hj, other_cpu_s=bare_cpu)


def run_bare_all_cores(root: Path, work: Path) -> dict:
    """N bare loops at once, one pinned to each core: what the machine can do with no job."""
    hs = [start_bare("default", root, c, work) for c in sorted(os.sched_getaffinity(0))]
    rs = [finish_bare(h) for h in hs]
    return {"frames": sum(r["frames"] for r in rs), "wall_s": max(r["wall_s"] for r in rs),
            "fps": sum(r["fps"] for r in rs),
            "cpu_ms_per_frame": statistics.mean(r["cpu_ms_per_frame"] for r in rs),
            "cpu_share": sum(r["cpu_share"] for r in rs),
            "load": [rs[0]["load"][0], rs[-1]["load"][1]]}


def summarise(runs: list[dict], key: str) -> dict:
    vals = [r[key] for r in runs]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--copies", type=int, default=16,
                   help="copies of each source video (16 x (58 + 80) = 2,208 frames)")
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                   help="N for job(N) (default: usable cores)")
    p.add_argument("--chunk-frames", type=int, default=0,
                   help="default: workload / (4 N), so every worker gets the same number of chunks")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--skip", default="", help="comma-separated: bare,capped,job1,jobN")
    p.add_argument("--paired", action="store_true",
                   help="also: bare and job(1) at the same time on two cores, and N bare loops "
                        "at once (one per core): comparisons that share the outside load")
    p.add_argument("--work", type=Path, default=Path("/tmp/phoenix-bench"))
    p.add_argument("--json", default="bench.json", help="file name under docs/results/")
    p.add_argument("--bare", help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--cpu", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.bare:
        bare_main(args.bare, args.root, args.cpu, args.result)
        return 0

    args.work.mkdir(parents=True, exist_ok=True)
    wl = build_workload(args.work / "PHOENIX-2014-T", args.copies)
    one = build_one_frame(args.work / "one-frame" / "PHOENIX-2014-T")
    root, frames, n = Path(wl["root"]), wl["frames"], args.workers
    chunk = args.chunk_frames or math.ceil(frames / (4 * n))
    cpu = sorted(os.sched_getaffinity(0))[0]
    skip = set(filter(None, args.skip.split(",")))
    print(f"workload: {wl['videos']} videos, {frames} frames ({wl['origin']}); chunk {chunk}; "
          f"N = {n}", file=sys.stderr)
    keys = ("bare", "capped", "startup", "job1", "jobN", "pair_bare", "pair_job1", "bareN")
    runs: dict[str, list[dict]] = {k: [] for k in keys}
    for rep in range(args.repeat):
        if "bare" not in skip:
            runs["bare"].append(run_bare("default", root, cpu, args.work))
            print(f"[{rep}] bare: {runs['bare'][-1]}", file=sys.stderr)
        if "capped" not in skip:
            runs["capped"].append(run_bare("capped", root, cpu, args.work))
            print(f"[{rep}] bare capped: {runs['capped'][-1]}", file=sys.stderr)
        runs["startup"].append(run_job(Path(one["root"]), args.work / "run-one", 1, 1000, 1))
        print(f"[{rep}] start-up: {runs['startup'][-1]}", file=sys.stderr)
        if "job1" not in skip:
            runs["job1"].append(run_job(root, args.work / "run-1", 1, chunk, frames))
            print(f"[{rep}] job(1): {runs['job1'][-1]}", file=sys.stderr)
        if "jobN" not in skip:
            runs["jobN"].append(run_job(root, args.work / f"run-{n}", n, chunk, frames))
            print(f"[{rep}] job({n}): {runs['jobN'][-1]}", file=sys.stderr)
        if args.paired:
            pb, pj = run_pair(root, args.work, chunk, frames)
            runs["pair_bare"].append(pb)
            runs["pair_job1"].append(pj)
            print(f"[{rep}] paired bare: {pb}\n[{rep}] paired job(1): {pj}", file=sys.stderr)
            runs["bareN"].append(run_bare_all_cores(root, args.work))
            print(f"[{rep}] {n} x bare at once: {runs['bareN'][-1]}", file=sys.stderr)

    def fps(k: str) -> float | None:
        return summarise(runs[k], "fps")["median"] if runs[k] else None

    def cell(k: str, key: str, fmt: str = "{:.1f}") -> str:
        if not runs[k]:
            return "-"
        s = summarise(runs[k], key)
        spread = f" ({fmt.format(s['min'])}-{fmt.format(s['max'])})" if s["n"] > 1 else ""
        return fmt.format(s["median"]) + spread

    bare, job1, jobn = fps("bare"), fps("job1"), fps("jobN")
    ratios = {
        "job1_over_bare": job1 / bare if job1 and bare else None,
        "jobN_over_N_bare": jobn / (n * bare) if jobn and bare else None,
        "job1_over_bare_capped": job1 / fps("capped") if job1 and fps("capped") else None,
        "jobN_over_N_job1": jobn / (n * job1) if jobn and job1 else None,
        "paired_job1_over_bare": (fps("pair_job1") / fps("pair_bare")
                                  if runs["pair_job1"] else None),
        "jobN_over_bareN_at_once": jobn / fps("bareN") if jobn and runs["bareN"] else None,
        # CPU seconds per frame: what a core costs per frame, whatever share of it we were given
        "cpu_job1_over_bare": (summarise(runs["bare"], "cpu_ms_per_frame")["median"]
                               / summarise(runs["job1"], "cpu_ms_per_frame")["median"]
                               if runs["bare"] and runs["job1"] else None),
        "cpu_jobN_over_job1": (summarise(runs["job1"], "cpu_ms_per_frame")["median"]
                               / summarise(runs["jobN"], "cpu_ms_per_frame")["median"]
                               if runs["jobN"] and runs["job1"] else None),
    }
    label = {"bare": "bare (MediaPipe default threads, 1 core)",
             "capped": "bare capped (num_threads=1, 1 core)",
             "startup": "start-up: `run` on 1 frame, 1 worker",
             "job1": "job(1): `run`, 1 worker", "jobN": f"job({n}): `run`, {n} workers",
             "pair_bare": "paired: bare, beside job(1)", "pair_job1": "paired: job(1), beside bare",
             "bareN": f"{n} x bare at once, one per core"}
    rows = []
    for k in keys:
        if runs[k]:
            rows.append([label[k], runs[k][0]["frames"], cell(k, "wall_s"),
                         cell(k, "fps") if k != "startup" else "-",
                         cell(k, "cpu_ms_per_frame") if k != "startup" else "-",
                         cell(k, "cpu_share", "{:.2f}") if "cpu_share" in runs[k][0] else "-",
                         " ".join(f"{r['load'][0]}/{r['load'][1]}" for r in runs[k])])
    print(table(rows, ["measurement", "frames", "wall s", "frames/s", "CPU ms/frame",
                       "cores got", "load 1-min before/after"]))
    for k, v in ratios.items():
        if v is not None:
            print(f"{k}: {v:.3f}")
    path = save_json(args.json, {"command": " ".join(sys.argv), "machine": machine(),
                                 "workload": wl, "chunk_frames": chunk, "workers": n,
                                 "runs": runs, "ratios": ratios})
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
