#!/usr/bin/env python3
"""Whole-body on a GPU: `run --device cuda` against rtmlib's CUDA loop, frames/s per GPU and memory.

On the realistic-cost models (scripts/bench/realistic_models.py: YOLOX-tiny + RTMW-m cost by
default, `--pair heavy` for YOLOX-m + RTMW-x-l) and the shared sample's frames repeated
(scripts/bench/workload.py): for each W in --workers, W rtmlib loops per GPU (cv2.imread, YOLOX,
the largest box, RTMPose, one frame at a time, rtmlib's own CUDA sessions; frames/s = the sum of
each loop's frames over its own loop time), then the README's command with `--device cuda
--num-gpus G --workers-per-gpu W --batch-size B` for each B in --batch (frames/s command start
to exit, and first to last frame). nvidia-smi is read every 0.5 s: each GPU's peak memory and
mean use. Written to docs/results/ as JSON; under 8 minutes on one GPU with the defaults
(--budget-s stops starting new measurements).

It fails loudly, never measuring the CPU by mistake: onnxruntime falls back to the CPU with only
a warning when CUDA cannot start, so every worker's providers in run.json (`extraction.runtime`)
and every rtmlib session's must start with CUDAExecutionProvider, or the script exits 1 saying
which did not; no GPU or no CUDA provider stops it before anything runs.

    # on a GPU node with PyPI: swap onnxruntime for the `gpu` extra's onnxruntime-gpu, then run
    .venv/bin/python scripts/bench/gpu.py --install
    .venv/bin/python scripts/bench/gpu.py --pair heavy --json gpu-heavy.json
    # anywhere: the same code path on the CPU, tiny and fast (tests/test_bench_models.py runs it)
    .venv/bin/python scripts/bench/gpu.py --device cpu --dry-run --json ''
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import REPO, loadavg, machine, save_json  # noqa: E402
from realistic_models import PAIRS, write  # noqa: E402
from run import balanced_shares, timed  # noqa: E402
from wholebody import measure_run  # noqa: E402

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


def wanted(device: str) -> str:
    return CUDA if device == "cuda" else CPU


def gpus() -> list[dict]:
    """The GPUs nvidia-smi lists ([] without nvidia-smi or a GPU)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    return [{"index": int(r[0]), "name": r[1], "memory_mib": float(r[2]), "driver": r[3]}
            for r in rows if len(r) == 4 and r[0].isdigit()]


class GpuWatch:
    """nvidia-smi every 0.5 s while a measurement runs: each GPU's peak memory, mean use."""

    def __init__(self, active: bool) -> None:
        self.active, self.peak_mib, self.use = active, {}, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used,utilization.gpu",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                 timeout=30).stdout
            for line in out.splitlines():
                i, mem, use = (c.strip() for c in line.split(","))
                self.peak_mib[i] = max(self.peak_mib.get(i, 0.0), float(mem))
                self.use.setdefault(i, []).append(float(use))

    def __enter__(self) -> GpuWatch:
        if self.active:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.active:
            self._thread.join()

    def summary(self) -> dict:
        return {"peak_memory_mib": self.peak_mib,
                "mean_use_pct": {i: round(statistics.mean(u), 1) for i, u in self.use.items() if u}}


def check_runtime(info: dict, device: str) -> dict:
    """Every worker's providers from run.json, refused (exit 1) unless each starts with the one
    --device asked for: the proof of where the frames ran, not what was asked."""
    runtime = (info.get("extraction") or {}).get("runtime") or {}
    if not runtime:
        raise SystemExit("run.json records no worker runtime (extraction.runtime): cannot tell "
                         "where the frames ran; refusing to report a figure")
    want = wanted(device)
    wrong = {slot: r.get("providers") for slot, r in runtime.items()
             if not r.get("providers") or r["providers"][0] != want}
    if wrong:
        raise SystemExit(f"{want} is not what ran: workers {sorted(wrong)} ran on {wrong} "
                         f"(onnxruntime fell back); no figure is reported")
    return runtime


def loop_child(root: Path, gpu: str, share: str, models: str, device: str, result: Path) -> None:
    """One rtmlib loop on one GPU (or the CPU) over its share of the videos."""
    if device == "cuda":
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    import cv2
    from tiny_onnx import rtmlib_signer, rtmlib_wholebody

    from phoenix_keypoints.extract.corpora import discover

    det, pose = rtmlib_wholebody({k: Path(v) for k, v in json.loads(models).items()}, device=device)
    providers = {"detector": det.session.get_providers(), "pose": pose.session.get_providers()}
    if any(p[0] != wanted(device) for p in providers.values()):
        raise SystemExit(f"rtmlib: {wanted(device)} is not what its sessions run on: {providers}")
    index, count = (int(x) for x in share.split("/"))
    videos = [[str(root / v.folder / f) for f in v.files] for v in discover(root).videos]
    t0, frames = time.monotonic(), 0
    for files in balanced_shares(videos, count)[index]:
        for f in files:
            rtmlib_signer(det, pose, cv2.imread(f))
            frames += 1
    result.write_text(json.dumps({"gpu": gpu, "frames": frames, "loop_s": time.monotonic() - t0,
                                  "providers": providers}))


def measure_loops(root: Path, per_gpu: int, devices: list[str], work: Path, models: dict,
                  device: str) -> dict:
    """per_gpu rtmlib loops on each GPU at once (per_gpu on the CPU for --device cpu)."""
    where = [d for d in devices for _ in range(per_gpu)]
    results = [work / f"loop-{i}.json" for i in range(len(where))]
    spec = json.dumps({k: str(v) for k, v in models.items()})
    cmds = [[sys.executable, __file__, "--loop-child", root, "--gpu", gpu, "--share",
             f"{i}/{len(where)}", "--models", spec, "--device", device, "--result", results[i]]
            for i, gpu in enumerate(where)]
    with GpuWatch(device == "cuda") as watch:
        t = timed(cmds, work / "loops.log")
    loops = [json.loads(r.read_text()) for r in results]
    fps = sum(r["frames"] / r["loop_s"] for r in loops)
    return {**t, "frames": sum(r["frames"] for r in loops), "fps": round(fps, 1),
            "fps_per_gpu": round(fps / len(devices), 1), **watch.summary(), "loops": loops}


def measure_job(root: Path, work: Path, frames: int, models: dict, device: str, ngpus: int,
                workers: int, batch: int) -> dict:
    """The README's command on the GPUs (or the CPU), and proof of where it ran."""
    extra = ("--device", device, "--num-gpus", str(ngpus), "--workers-per-gpu", str(workers),
             "--batch-size", str(batch))
    with GpuWatch(device == "cuda") as watch:
        r = measure_run(root, work / "run", frames, models, extra)
    info = json.loads((work / "run" / "run.json").read_text())
    runtime = check_runtime(info, device)
    ext = info["extraction"]
    steady = frames / (ext["last_frame"] - ext["first_frame"]) if ext.get("last_frame") else None
    return {**r, "fps": round(r["fps"], 1), "fps_per_gpu": round(r["fps"] / max(ngpus, 1), 1),
            "fps_first_to_last_frame": round(steady, 1) if steady else None, **watch.summary(),
            "providers": sorted({p for w in runtime.values() for p in w["providers"][:1]})}


def install() -> None:
    """The `gpu` extra's onnxruntime-gpu in place of onnxruntime, at the version constraints.txt
    pins (both packages are the one `onnxruntime` module: the CPU one must go first)."""
    pin = re.search(r"^onnxruntime==(\S+)$", (REPO / "constraints.txt").read_text(), re.M)[1]
    pip = [sys.executable, "-m", "pip"]
    for cmd in ([*pip, "uninstall", "-y", "onnxruntime", "onnxruntime-gpu"],
                [*pip, "install", "-c", REPO / "constraints.txt", "-e", f"{REPO}[gpu]",
                 f"onnxruntime-gpu=={pin}"],
                [*pip, "uninstall", "-y", "onnxruntime"],
                [*pip, "install", "--force-reinstall", "--no-deps", f"onnxruntime-gpu=={pin}"]):
        subprocess.run([str(c) for c in cmd], check=True)


def preflight(device: str) -> list[dict]:
    """The GPUs to use; exit before anything runs where --device cuda cannot be had."""
    import onnxruntime as ort

    found = gpus()
    if device == "cuda" and not found:
        raise SystemExit("--device cuda: nvidia-smi lists no GPU here")
    if device == "cuda" and CUDA not in ort.get_available_providers():
        raise SystemExit(f"--device cuda: onnxruntime {ort.__version__} has no {CUDA} "
                         f"({ort.get_available_providers()}): run with --install first")
    return found if device == "cuda" else []


def measure_all(args: argparse.Namespace, root: Path, frames: int, work: Path, models: dict,
                found: list[dict]) -> list[dict]:
    """For each W: W loops per GPU, then the job at W workers per GPU and each batch size;
    stops starting new ones once --budget-s is spent (those are listed as skipped)."""
    devices = [str(g["index"]) for g in found] or ["cpu"]
    t0, rows = time.monotonic(), []
    for w in args.workers:
        plan = [("rtmlib", w, None)] + [("run", w, b) for b in args.batch]
        for what, workers, batch in plan:
            row = {"what": what, "workers_per_gpu": workers, "batch_size": batch}
            if time.monotonic() - t0 > args.budget_s:
                rows.append({**row, "skipped": f"--budget-s {args.budget_s} spent"})
                continue
            row.update(measure_loops(root, w, devices, work, models, args.device) if what == "rtmlib"
                       else measure_job(root, work, frames, models, args.device, len(found), w, batch))
            print(f"{what} W={workers} B={batch}: {row['fps']} frames/s ({row['fps_per_gpu']} a GPU), "
                  f"memory {row.get('peak_memory_mib')}, load {loadavg()[0]}", file=sys.stderr,
                  flush=True)
            rows.append(row)
    return rows


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--dry-run", action="store_true",
                   help="tiny and fast: models at 1%% of their cost, 138 frames, W 1,2, B 1,8")
    p.add_argument("--pair", choices=sorted(PAIRS), default="light")
    p.add_argument("--workers", help="workers (and rtmlib loops) per GPU (default 1,2,4)")
    p.add_argument("--batch", help="--batch-size values (default 1,8,32)")
    p.add_argument("--copies", type=int, help="copies of the two sample videos, 138 frames each "
                                              "(default 20)")
    p.add_argument("--budget-s", type=float, default=400, help="start no measurement after this")
    p.add_argument("--install", action="store_true", help="swap in onnxruntime-gpu, then exit")
    p.add_argument("--json", default="gpu.json",
                   help="a name under docs/results/, or a path with a folder ('': none)")
    for hidden in ("--loop-child", "--gpu", "--share", "--models", "--result"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args()
    small = args.dry_run
    args.workers = [int(x) for x in (args.workers or ("1,2" if small else "1,2,4")).split(",")]
    args.batch = [int(x) for x in (args.batch or ("1,8" if small else "1,8,32")).split(",")]
    args.copies = args.copies or (1 if small else 20)
    return args


def main() -> int:
    args = parse()
    if args.loop_child:
        loop_child(Path(args.loop_child), args.gpu, args.share, args.models, args.device,
                   Path(args.result))
        return 0
    if args.install:
        install()
        return 0
    found = preflight(args.device)
    import onnxruntime as ort
    from workload import build_workload

    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        work = Path(tmp)
        made = {n: write(n, work / "models", 0.01 if args.dry_run else 1.0) for n in PAIRS[args.pair]}
        models = {"detector": made[PAIRS[args.pair][0]]["files"]["detector"]["path"],
                  "pose": made[PAIRS[args.pair][1]]["files"]["pose"]["path"]}
        wl = build_workload(work / "PHOENIX-2014-T", args.copies)
        rows = measure_all(args, Path(wl["root"]), wl["frames"], work, models, found)
    res = {"command": " ".join(sys.argv), "machine": machine(), "gpus": found,
           "device": args.device, "dry_run": args.dry_run, "onnxruntime": ort.__version__,
           "pair": {n: {k: v for k, v in m.items() if k != "files"} for n, m in made.items()},
           "workload": {k: wl[k] for k in ("origin", "videos", "frames")}, "measurements": rows}
    if args.json:
        dest = Path(args.json)
        if dest.parent == Path("."):
            dest = save_json(args.json, res)
        else:
            dest.write_text(json.dumps(res, indent=2) + "\n")
        print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
