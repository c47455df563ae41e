#!/usr/bin/env python3
"""`run --estimator wholebody` against N rtmlib loops at once, on the same tiny models and frames.

What the job costs around the models: the README-style command (`run --dataset D --out O
--estimator wholebody --detector DET --pose-model POSE`, default options: workers = usable cores),
command start to exit, against N = usable cores plain rtmlib loops at once, each pinned to its own
core, each over its share of the videos: cv2.imread, rtmlib's YOLOX, the largest box, rtmlib's
RTMPose, per frame (frames/s = the sum of each loop's frames / its own loop time, start-up
excluded, as scripts/bench/run.py counts the bare MediaPipe loop). rtmlib's sessions are given one
intra-op thread each, as a worker's are: rtmlib's own default (a thread per core) pinned to one core
only slows it, which would flatter the job. The models are tests/tiny_onnx.py's (a few ms a frame:
the job's own work weighs far more here than beside a real RTMW); the frames the shared sample's
(scripts/bench/workload.py). The two commands alternate, their order rotating each cycle.

    .venv/bin/python scripts/bench/wholebody.py                    # 3 cycles, 20,700 frames: ~6 min
    .venv/bin/python scripts/bench/wholebody.py --copies 10 --repeat 1 --json ''   # a quick look
    .venv/bin/python scripts/bench/wholebody.py --against /tmp/wt-main   # and main's run beside
    # the realistic-cost models (scripts/bench/realistic_models.py), three batch sizes, >= 2,000 frames
    .venv/bin/python scripts/bench/wholebody.py --model-set light --copies 15 --batch-size 1,8,32 \
        --json wholebody-light.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import loadavg, machine, save_json  # noqa: E402
from run import balanced_shares, child_env, phoenix_keypoints, timed  # noqa: E402

TARGET = {"tiny": 0.95, "light": 0.98, "heavy": 0.98}  # run / (cores x rtmlib loops), issues 32, 41
MODELS = {"tiny": "tests/tiny_onnx.py (detector 96x128 with NMS inside, SimCC pose 64x48)",
          "light": "realistic_models.py: YOLOX-tiny 416 + RTMW-m 256x192 cost (3.2 + 4.3 GMACs)",
          "heavy": "realistic_models.py: YOLOX-m 640 + RTMW-x-l 384x288 cost (36.9 + 17.7 GMACs)"}


def bare_child(root: Path, cpu: int, share: str, models: str, result: Path) -> None:
    """Pin to one core, then rtmlib's YOLOX + RTMPose over this share of the videos."""
    import cv2
    from tiny_onnx import rtmlib_signer

    det, pose, videos = pinned_rtmlib(root, cpu, share, models)
    t0, frames = time.monotonic(), 0
    for files in videos:
        for f in files:
            rtmlib_signer(det, pose, cv2.imread(f))
            frames += 1
    result.write_text(json.dumps({"cpu": cpu, "frames": frames, "loop_s": time.monotonic() - t0}))


def pinned_rtmlib(root: Path, cpu: int, share: str, models: str) -> tuple[Any, Any, list]:
    """Pinned to one core: rtmlib's YOLOX and RTMPose on one intra-op thread each, and this
    share ("i/n") of the corpus's videos (each a list of frame files)."""
    os.sched_setaffinity(0, [cpu])
    import onnxruntime as ort
    from tiny_onnx import rtmlib_wholebody

    from phoenix_keypoints.extract.corpora import discover

    paths = {k: Path(v) for k, v in json.loads(models).items()}
    det, pose = rtmlib_wholebody(paths)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    for tool in (det, pose):
        tool.session = ort.InferenceSession(tool.onnx_model, sess_options=so,
                                            providers=["CPUExecutionProvider"])
    index, count = (int(x) for x in share.split("/"))
    videos = [[str(root / v.folder / f) for f in v.files] for v in discover(root).videos]
    return det, pose, balanced_shares(videos, count)[index]


def measure_run(root: Path, out: Path, frames: int, models: dict[str, Path],
                extra: tuple[str, ...] = (), tree: Path | None = None) -> dict:
    """The README's command (plus `extra` flags), command start to exit; of another checkout's
    code with `tree` (PYTHONPATH: its phoenix_keypoints/ reaches its extract/ and jobs/)."""
    env = None
    if tree is not None:
        env = child_env()
        env["PYTHONPATH"] = str(tree)
    shutil.rmtree(out, ignore_errors=True)
    t = timed([[*phoenix_keypoints(), "run", "--dataset", root, "--out", out, "--estimator",
                "wholebody", "--detector", models["detector"], "--pose-model", models["pose"],
                *extra]], out.parent / f"{out.name}.log", env)
    info = json.loads((out / "run.json").read_text())
    if info["merge"]["rows"] != frames:
        raise SystemExit(f"run wrote {info['merge']['rows']} rows, expected {frames}")
    first = (info.get("extraction") or {}).get("first_frame")
    return {**t, "frames": frames, "fps": frames / t["wall_s"],
            "workers": (info.get("extraction") or {}).get("workers"),
            "startup_s": round(first - t["start"], 2) if first else None}


def measure_bare(root: Path, n: int, work: Path, models: dict[str, Path]) -> dict:
    cpus = sorted(os.sched_getaffinity(0))[:n]
    results = [work / f"bare-{i}.json" for i in range(n)]
    spec = json.dumps({k: str(v) for k, v in models.items()})
    cmds = [[sys.executable, __file__, "--bare-child", root, "--cpu", cpu, "--share", f"{i}/{n}",
             "--models", spec, "--result", results[i]] for i, cpu in enumerate(cpus)]
    t = timed(cmds, work / "bare.log")
    loops = [json.loads(r.read_text()) for r in results]
    return {**t, "frames": sum(r["frames"] for r in loops),
            "fps": sum(r["frames"] / r["loop_s"] for r in loops), "loops": loops}


def build_models(which: str, folder: Path) -> dict[str, Path]:
    """The detector and pose files of --model-set: the tests' tiny ones, or a realistic-cost pair
    (scripts/bench/realistic_models.py, batch axis named so that --batch-size batches)."""
    if which == "tiny":
        from tiny_onnx import tiny_models

        return tiny_models(folder)
    from realistic_models import PAIRS, write

    det, pose = (write(name, folder) for name in PAIRS[which])
    return {"detector": Path(det["files"]["detector"]["path"]),
            "pose": Path(pose["files"]["pose"]["path"])}


def cycle(rep: int, root: Path, frames: int, n: int, work: Path, models: dict,
          sizes: list[int | None], against: tuple[Path, ...] = ()) -> dict:
    """One alternated cycle: the rtmlib loops, `run` at each batch size and each other
    checkout's `run` (default options), the order rotating."""
    trees = {f"run@{t.name}": t for t in against}
    names = ["bare", *(f"run-b{b}" if b else "run" for b in sizes), *trees]
    order = names[rep % len(names):] + names[:rep % len(names)]
    out: dict = {"order": order}
    for what in order:
        if what == "bare":
            r = measure_bare(root, n, work, models)
        elif what in trees:
            r = measure_run(root, work / "run", frames, models, tree=trees[what])
        else:
            size = sizes[names.index(what) - 1]
            r = measure_run(root, work / "run", frames, models,
                            ("--batch-size", str(size)) if size else ())
        r["cpu_ms_per_frame"] = round(r["cpu_s"] * 1e3 / r["frames"], 2)
        out[what] = r
        print(f"[#{rep}] {what}: {r['fps']:.1f} frames/s, {r['cpu_ms_per_frame']} ms CPU a frame, "
              f"wall {r['wall_s']} s, load {loadavg()[0]}", file=sys.stderr, flush=True)
    out["run_over_rtmlib"] = {w: out[w]["fps"] / out["bare"]["fps"] for w in names[1:]}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--copies", type=int, default=150, help="copies of the two sample videos (138 "
                                                          "frames a copy)")
    p.add_argument("--repeat", type=int, default=3, help="alternated cycles")
    p.add_argument("--model-set", choices=sorted(MODELS), default="tiny",
                   help="tiny (tests/tiny_onnx.py) or a realistic-cost pair: light (YOLOX-tiny + "
                        "RTMW-m) or heavy (YOLOX-m + RTMW-x-l)")
    p.add_argument("--batch-size", default="", help="`run --batch-size` values, each measured "
                                                   "(default: the tool's default, no flag)")
    p.add_argument("--against", type=Path, action="append", default=[],
                   help="another checkout (a git worktree; repeatable) whose run alternates too")
    p.add_argument("--json", default="wholebody.json", help="file under docs/results/ ('': none)")
    for hidden in ("--bare-child", "--cpu", "--share", "--models", "--result"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.bare_child:
        bare_child(Path(args.bare_child), int(args.cpu), args.share, args.models, Path(args.result))
        return 0
    from tiny_onnx import RTMLIB_VERSION
    from workload import build_workload

    n = len(os.sched_getaffinity(0))
    sizes = [int(b) for b in args.batch_size.split(",") if b] or [None]
    with tempfile.TemporaryDirectory(prefix="bench-wholebody-") as tmp:
        work = Path(tmp)
        models = build_models(args.model_set, work / "models")
        wl = build_workload(work / "PHOENIX-2014-T", args.copies)
        cycles = [cycle(rep, Path(wl["root"]), wl["frames"], n, work, models, sizes,
                        tuple(args.against)) for rep in range(args.repeat)]
    ratios = {w: [c["run_over_rtmlib"][w] for c in cycles] for w in cycles[0]["run_over_rtmlib"]}
    target = TARGET[args.model_set]
    res = {"command": " ".join(sys.argv), "machine": machine(), "workers": n,
           "rtmlib": RTMLIB_VERSION, "workload": {k: wl[k] for k in ("origin", "videos", "frames")},
           "models": MODELS[args.model_set], "cycles": cycles, "run_over_rtmlib": ratios,
           "mean": {w: statistics.mean(r) for w, r in ratios.items()}, "target": target}
    for w, r in ratios.items():
        print(f"{w} / ({n} x rtmlib loop): per cycle {', '.join(f'{x:.3f}' for x in r)}; mean "
              f"{res['mean'][w]:.3f} (target >= {target})")
    if args.json:
        print(save_json(args.json, res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
