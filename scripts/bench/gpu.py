#!/usr/bin/env python3
"""Whole-body on a GPU node: `run --device cuda` against W rtmlib CUDA loops, equal work, by wall.

For each model pair (scripts/bench/realistic_models.py: `light` YOLOX-tiny + RTMW-m, `heavy`
YOLOX-m + RTMW-x-l, at their published costs) on the shared sample's frames repeated
(scripts/bench/workload.py), each run of --runs:

- `default`: the README's command with `--device cuda` and nothing else (the tool picks workers
  per GPU and the batch size from the cores, GPUs and card memory: run.json says what it chose),
  marked `"default": true`; `WxB`: `--workers-per-gpu W --batch-size B`;
- beside it, W rtmlib loops per GPU on the same frames (cv2.imread, YOLOX, the largest box,
  RTMPose, one frame at a time, rtmlib's own CUDA sessions), all started at once: their wall,
  command start to the last loop's exit (not a sum of each loop's rate), measured once per W;
- for each: frames/s by wall and `by_wall` (the loops' wall over the run's), steady frames/s (first
  to last frame), start-up, each GPU's peak memory (and per worker, beside the tool's estimate) and
  mean use (nvidia-smi every 0.5 s), and the keypoints against the loops' (max px over every
  frame both have points for, frames over 0.01 and 1 px);
- `pieces` (issue 47 item 5): one process on one GPU at batch B, a frame's time in decode (imread),
  the detector's and the pose model's pre-processing, their session calls with numpy in and out
  (copies included) and with IO binding (inputs already on the device: the difference is the
  copies), and decoding the points: where the time goes that keeps GPU use low.

It fails loudly, never measuring the CPU by mistake: onnxruntime falls back to the CPU with only a
warning when CUDA cannot start, so every worker's providers in run.json and every rtmlib session's
must start with CUDAExecutionProvider, or that run gets no figure (its row says why) and the
script exits 1; no GPU or no CUDA provider stops it before anything runs. A run that fails (out of
memory, say) is recorded so and the next one measured; the JSON is written after each pair.
--budget-s stops starting new measurements (those are listed as skipped): with the defaults it
ends in under 8 minutes on one H200.

    # a GPU node with an index: the `gpu` extra in place of onnxruntime, then measure
    .venv/bin/python scripts/gpu_install.py && .venv/bin/python scripts/bench/gpu.py
    # the lent GPU machine (no index; onnxruntime-gpu carried in parts): scripts/bench/gpu_device.sh
    # anywhere: the same code path on the CPU, tiny and fast (tests/test_bench_models.py runs it)
    .venv/bin/python scripts/bench/gpu.py --device cpu --dry-run --json ''
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import loadavg, machine, save_json  # noqa: E402
from realistic_models import PAIRS, write  # noqa: E402
from run import balanced_shares, timed  # noqa: E402
from wholebody import measure_run  # noqa: E402

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
RUNS = {"light": "default,8x1,8x8,8x32", "heavy": "default,8x1,8x8"}
COPIES = {"light": 60, "heavy": 20}  # x 138 frames: 8,280 and 2,760


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


# --- rtmlib's loops ------------------------------------------------------------------------------
def loop_child(root: Path, gpu: str, share: str, models: str, device: str, result: Path) -> None:
    """One rtmlib loop on one GPU (or the CPU) over its share of the videos; its points kept."""
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
    videos = {v.name: [str(root / v.folder / f) for f in v.files] for v in discover(root).videos}
    mine = balanced_shares(list(videos.values()), count)[index]
    t0, keys, points = time.monotonic(), [], []
    for name, files in ((n, f) for n, f in videos.items() if any(f is m for m in mine)):
        for i, f in enumerate(files):
            row, _ = rtmlib_signer(det, pose, cv2.imread(f))
            keys.append(f"{name}/{i}")
            points.append(row[:, :2].astype(np.float32))
    loop_s = time.monotonic() - t0
    np.savez(result.with_suffix(".npz"), keys=np.array(keys), xy=np.array(points))
    result.write_text(json.dumps({"gpu": gpu, "frames": len(keys), "loop_s": loop_s,
                                  "providers": providers}))


def measure_loops(root: Path, per_gpu: int, devices: list[str], work: Path, models: dict,
                  device: str) -> dict:
    """per_gpu rtmlib loops on each GPU at once on the run's frames, by wall."""
    where = [d for d in devices for _ in range(per_gpu)]
    results = [work / f"loops-{per_gpu}" / f"loop-{i}.json" for i in range(len(where))]
    spec = json.dumps({k: str(v) for k, v in models.items()})
    results[0].parent.mkdir(parents=True, exist_ok=True)
    cmds = [[sys.executable, __file__, "--loop-child", root, "--gpu", gpu, "--share",
             f"{i}/{len(where)}", "--models", spec, "--device", device, "--result", results[i]]
            for i, gpu in enumerate(where)]
    with GpuWatch(device == "cuda") as watch:
        t = timed(cmds, work / f"loops-{per_gpu}.log")
    loops = [json.loads(r.read_text()) for r in results]
    frames, longest = sum(r["frames"] for r in loops), max(r["loop_s"] for r in loops)
    return {"what": "rtmlib", "workers_per_gpu": per_gpu, **t, "frames": frames,
            "fps": round(frames / t["wall_s"], 1), "fps_steady": round(frames / longest, 1),
            "startup_s": round(t["wall_s"] - longest, 2), **watch.summary(),
            "points": [str(r.with_suffix(".npz")) for r in results], "loops": loops}


# --- the tool ------------------------------------------------------------------------------------
def measure_job(root: Path, work: Path, frames: int, models: dict, device: str,
                workers: int | None, batch: int | None, need: object) -> dict:
    """The README's command on the GPUs (or the CPU): --device, and --workers-per-gpu and
    --batch-size where given (default: what the tool picks); proof of where it ran."""
    extra = ["--device", device]
    extra += ["--workers-per-gpu", str(workers)] if workers else []
    extra += ["--batch-size", str(batch)] if batch else []
    out = work / f"run-{workers or 'default'}x{batch or 'default'}"
    with GpuWatch(device == "cuda") as watch:
        r = measure_run(root, out, frames, models, tuple(extra))
    info = json.loads((out / "run.json").read_text())
    runtime = check_runtime(info, device)
    first = runtime[min(runtime, key=int)]
    ext = info["extraction"]
    steady = frames / (ext["last_frame"] - ext["first_frame"]) if ext.get("last_frame") else None
    per_gpu = ext["workers"] // max(1, len({w.get("gpu", "") for w in runtime.values()} or {""}))
    used = first["batch_size"]
    return {**r, "what": "run", "default": not (workers or batch), "workers_per_gpu": per_gpu,
            "batch_size": used, "fps": round(r["fps"], 1),
            "fps_steady": round(steady, 1) if steady else None, **watch.summary(),
            "estimated_gib_per_worker": round(need(used) / 2**30, 2) if need else None,
            "chosen": first.get("chosen", ""), "execution": first.get("execution"),
            "providers": sorted({p for w in runtime.values() for p in w["providers"][:1]}),
            "run_dir": str(out)}


def compare(run_dir: Path, points: list[str]) -> dict:
    """The run's keypoints against the loops' on every frame both have points for: max |dx|, |dy|
    in pixels, and how many frames differ by more than 0.01 and 1 px."""
    import pyarrow.parquet as pq

    ref = {}
    for path in points:
        with np.load(path) as z:
            ref.update(zip(z["keys"].tolist(), z["xy"], strict=True))
    t = pq.read_table(run_dir / "keypoints.parquet", columns=["video", "frame", "wholebody"])
    worst, over, over1, n = 0.0, 0, 0, 0
    for video, frame, row in zip(*(t[c].to_pylist() for c in ("video", "frame", "wholebody")),
                                 strict=True):
        key = f"{video}/{frame}"
        if row is None or key not in ref:
            continue
        d = float(np.abs(np.asarray(row, np.float32).reshape(-1, 3)[:, :2] - ref[key]).max())
        worst, n = max(worst, d), n + 1
        over, over1 = over + (d > 0.01), over1 + (d > 1.0)
    return {"frames_compared": n, "max_px": round(worst, 6), "frames_over_0.01px": over,
            "frames_over_1px": over1}


# --- item 5: where a frame's time goes, in one process ------------------------------------------
def pieces(root: Path, models: dict, device: str, batch: int, frames: int = 256) -> dict:
    """ms a frame in each piece, one worker's models on one GPU at `batch` (fixed shapes)."""
    import cv2
    import onnxruntime as ort

    from phoenix_keypoints.extract.corpora import discover
    from phoenix_keypoints.extract.families.wholebody.runner import WholebodyModels, largest, whole

    files = [root / v.folder / f for v in discover(root).videos for f in v.files][:frames]
    m = WholebodyModels(models["detector"], models["pose"], device, batch=batch,
                        fixed=device == "cuda")
    clock: dict[str, float] = {}

    def timed_piece(name: str, fn: object) -> object:
        t0 = time.perf_counter()
        out = fn()
        clock[name] = clock.get(name, 0.0) + time.perf_counter() - t0
        return out

    on = "cuda" if device == "cuda" else "cpu"
    for start in range(0, len(files) - batch + 1, batch):
        bgrs = timed_piece("decode (imread)", lambda s=start: [cv2.imread(str(f))
                                                               for f in files[s:s + batch]])
        canv = timed_piece("detector pre", lambda b=bgrs: [m.detector._letterbox(x) for x in b])
        x = m.detector.kind.model_input(np.stack([c[0] for c in canv]))
        raw = timed_piece("detector call (numpy in/out)",
                          lambda x=x: m.detector.session.run(None, {m.detector.input: x})[0])
        bound = m.detector.session.io_binding()
        bound.bind_ortvalue_input(m.detector.input, ort.OrtValue.ortvalue_from_numpy(x, on, 0))
        for o in m.detector.session.get_outputs():
            bound.bind_output(o.name, on)
        timed_piece("detector call (IO bound)", lambda b=bound: m.detector.session.run_with_iobinding(b))
        found = timed_piece("detector post", lambda r=raw, c=canv: [
            m.detector._boxes(r[i:i + 1], c[i][1]) for i in range(len(c))])
        boxes = [largest(f) if len(f) else whole(b) for f, b in zip(found, bgrs, strict=True)]
        crops = timed_piece("pose pre (crops)", lambda b=bgrs, bx=boxes: [
            m.pose._crop(i, j) for i, j in zip(b, bx, strict=True)])
        xp = np.ascontiguousarray(np.stack([c[0] for c in crops]).transpose(0, 3, 1, 2), np.float32)
        outs = timed_piece("pose call (numpy in/out)",
                           lambda xp=xp: m.pose.session.run(None, {m.pose.input: xp}))
        bound = m.pose.session.io_binding()
        bound.bind_ortvalue_input(m.pose.input, ort.OrtValue.ortvalue_from_numpy(xp, on, 0))
        for o in m.pose.session.get_outputs():
            bound.bind_output(o.name, on)
        timed_piece("pose call (IO bound)", lambda b=bound: m.pose.session.run_with_iobinding(b))
        timed_piece("pose post (decode)", lambda o=outs, c=crops: [
            m.pose.decode(o, i, ci) for i, ci in enumerate(c)])
    done = (len(files) // batch) * batch
    return {"batch": batch, "frames": done, "providers": m.providers(),
            "ms_a_frame": {k: round(1000 * v / max(done, 1), 3) for k, v in clock.items()}}


# --- the plan ------------------------------------------------------------------------------------
def parse_runs(text: str) -> list[tuple[int | None, int | None]]:
    """'default,8x1,8x32' -> [(None, None), (8, 1), (8, 32)]."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if item == "default":
            out.append((None, None))
            continue
        w, b = item.split("x")
        out.append((int(w), int(b)))
    return out


def measure_pair(args: argparse.Namespace, pair: str, work: Path, found: list[dict],
                 t0: float) -> dict:
    """One model pair: its models and workload, each run of --runs beside its loops, pieces."""
    from workload import build_workload

    from phoenix_keypoints.extract.families.wholebody import gpu_memory_need
    from phoenix_keypoints.extract.families.wholebody.runner import record

    folder = work / pair
    made = {n: write(n, folder / "models", 0.01 if args.dry_run else 1.0) for n in PAIRS[pair]}
    models = {"detector": Path(made[PAIRS[pair][0]]["files"]["detector"]["path"]),
              "pose": Path(made[PAIRS[pair][1]]["files"]["pose"]["path"])}
    settings = record(models["detector"], models["pose"])
    wl = build_workload(folder / "PHOENIX-2014-T", args.copies or (1 if args.dry_run else COPIES[pair]))
    root, frames = Path(wl["root"]), wl["frames"]
    devices = [str(g["index"]) for g in found] or ["cpu"]
    rows, loops = [], {}
    for workers, batch in parse_runs(args.runs or ("default,1x1,2x8" if args.dry_run else RUNS[pair])):
        row = {"what": "run", "workers_per_gpu": workers, "batch_size": batch}
        if time.monotonic() - t0 > args.budget_s:
            rows.append({**row, "skipped": f"--budget-s {args.budget_s} spent"})
            continue
        try:  # a run that fails (out of memory, say) is recorded, and the others still run
            row = measure_job(root, folder, frames, models, args.device, workers, batch,
                              lambda b: gpu_memory_need(settings, b))
            w = row["workers_per_gpu"]
            if w not in loops:
                loops[w] = measure_loops(root, w, devices, folder, models, args.device)
                say(pair, loops[w])
        except SystemExit as e:
            print(f"{pair} W={workers} B={batch} failed: {e}", file=sys.stderr, flush=True)
            rows.append({**row, "failed": str(e)[-2000:]})
            continue
        row["by_wall"] = round(loops[w]["wall_s"] / row["wall_s"], 3)
        row["vs_rtmlib"] = compare(Path(row.pop("run_dir")), loops[w]["points"])
        peak = sum(row.get("peak_memory_mib", {}).values())
        row["peak_gib_per_worker"] = round(peak / 1024 / max(1, w * len(found)), 2) if found else None
        say(pair, row)
        rows.append(row)
    out = {"models": {n: {k: v for k, v in m.items() if k != "files"} for n, m in made.items()},
           "workload": {k: wl[k] for k in ("origin", "videos", "frames")},
           "measurements": rows, "rtmlib_loops": list(loops.values())}
    if time.monotonic() - t0 <= args.budget_s:
        try:
            out["pieces"] = pieces(root, models, args.device, 8 if args.dry_run else 16)
        except Exception as e:  # noqa: BLE001 (a measurement's failure is its record)
            out["pieces"] = {"failed": f"{type(e).__name__}: {e}"[:2000]}
    return out


def say(pair: str, row: dict) -> None:
    extra = f", by wall {row['by_wall']}, {row['vs_rtmlib']}" if "by_wall" in row else ""
    print(f"{pair} {row['what']} W={row['workers_per_gpu']} B={row.get('batch_size')}: "
          f"{row['fps']} frames/s by wall ({row['fps_steady']} steady, start-up "
          f"{row.get('startup_s')} s), memory {row.get('peak_memory_mib')}, use "
          f"{row.get('mean_use_pct')}{extra}; load {loadavg()[0]}", file=sys.stderr, flush=True)


def preflight(device: str) -> list[dict]:
    """The GPUs to use; exit before anything runs where --device cuda cannot be had."""
    from phoenix_keypoints.extract.keypoints.cuda_libs import preload
    from phoenix_keypoints.extract.keypoints.environ import telemetry_off

    telemetry_off()  # as the tool does, before onnxruntime loads
    preload()
    import onnxruntime as ort

    found = gpus()
    if device == "cuda" and not found:
        raise SystemExit("--device cuda: nvidia-smi lists no GPU here")
    if device == "cuda" and CUDA not in ort.get_available_providers():
        raise SystemExit(f"--device cuda: onnxruntime {ort.__version__} has no {CUDA} "
                         f"({ort.get_available_providers()}): run scripts/gpu_install.py first")
    return found if device == "cuda" else []


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--dry-run", action="store_true",
                   help="tiny and fast: models at 1%% of their cost, 138 frames, runs "
                        "default,1x1,2x8, the light pair")
    p.add_argument("--pairs", help="model pairs, of " + ", ".join(PAIRS) + " (default: both; "
                                   "--dry-run: light)")
    p.add_argument("--runs", help="runs beside their loops: 'default' (the tool's choice) and WxB "
                                  f"(default: {RUNS})")
    p.add_argument("--copies", type=int, help="copies of the two sample videos, 138 frames each "
                                              f"(default {COPIES})")
    p.add_argument("--budget-s", type=float, default=400, help="start no measurement after this")
    p.add_argument("--json", default="gpu.json",
                   help="a name under docs/results/, or a path with a folder ('': none)")
    for hidden in ("--loop-child", "--gpu", "--share", "--models", "--result"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.pairs = (args.pairs or ("light" if args.dry_run else ",".join(PAIRS))).split(",")
    return args


def main() -> int:
    args = parse()
    if args.loop_child:
        loop_child(Path(args.loop_child), args.gpu, args.share, args.models, args.device,
                   Path(args.result))
        return 0
    found = preflight(args.device)
    import onnxruntime as ort

    t0 = time.monotonic()
    res = {"command": " ".join(sys.argv), "machine": machine(), "gpus": found,
           "device": args.device, "dry_run": args.dry_run, "onnxruntime": ort.__version__,
           "pairs": {}}
    dest = None
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        for pair in args.pairs:  # written after each pair: a run cut short keeps what it measured
            res["pairs"][pair] = measure_pair(args, pair, Path(tmp), found, t0)
            res["seconds"] = round(time.monotonic() - t0, 1)
            dest = written(args.json, res)
    if dest:
        print(dest)
    failed = [f"{pair} {r['workers_per_gpu']}x{r['batch_size']}" for pair, m in res["pairs"].items()
              for r in m["measurements"] if "failed" in r]
    if failed:
        print(f"failed (no figure, the reason in the JSON): {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def written(where: str, res: dict) -> Path | None:
    """The results as JSON: a name under docs/results/, or a path with a folder ('': none)."""
    if not where:
        return None
    dest = Path(where)
    if dest.parent == Path("."):
        return save_json(where, res)
    dest.write_text(json.dumps(res, indent=2) + "\n")
    return dest


if __name__ == "__main__":
    sys.exit(main())
