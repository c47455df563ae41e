#!/usr/bin/env python3
"""`run --det-every 10` against `run --det-every 1` against N rtmlib PoseTracker loops at once
(issue 39 item 4, issue 41's row), on realistic-cost models and the shared sample's frames.

Three commands, alternated, their order rotating each cycle: the README-style whole-body command
(default options: workers = usable cores, batch 8) with `--det-every 1` and with `--det-every 10`,
and N = usable cores loops of rtmlib's `PoseTracker(det_frequency=10)`, each pinned to its own core
over its share of the videos (reset per video, cv2.imread per frame; rtmlib's sessions on one
intra-op thread, as a worker's). frames/s: `run`'s frames / its wall time, command start to exit;
the loops' the sum of each loop's frames / its own loop time, start-up excluded (as
scripts/bench/wholebody.py counts them). CPU milliseconds a frame beside each.

Models: scripts/bench/realistic_models.py's light pair's costs (YOLOX-tiny 416x416 and RTMW-m
256x192: their convolution trunks) behind one-signer heads from tests/tiny_onnx.py (build_models
says which): the stand-ins' usual heads find 2-3 random boxes on PHOENIX frames and move their
points across the crop, so PoseTracker would run the pose model on every box and lose them from
frame to frame, which a real model on a one-signer corpus does not. The loops count their
detector calls: the share of frames detected is printed and kept in the JSON.

    .venv/bin/python scripts/bench/wholebody_tracking.py --copies 3 --repeat 2 \\
        --json wholebody-tracking.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import loadavg, machine, save_json  # noqa: E402
from run import timed  # noqa: E402
from wholebody import measure_run, pinned_rtmlib  # noqa: E402

EVERY = 10
MODELS = ("realistic_models.py light pair's costs: YOLOX-tiny 416 (3.2 GMACs, NMS inside, one box) "
          "+ RTMW-m 256x192 (4.3 GMACs, tests/tiny_onnx.py's pose_steady head)")


def build_models(folder: Path) -> dict[str, Path]:
    """The light pair's costs behind heads of one signer: the detector stand-in answering one box
    (kept when its score passes rtmlib's 0.3, else the whole frame), the pose stand-in's points
    steady in the crop with the signer's extent (pose_steady, span 0.18-0.82: the next box is the
    box's size). So PoseTracker follows one person, as a real YOLOX + RTMW on PHOENIX: one pose
    crop a frame, a detection every K frames (the loops count them)."""
    from realistic_models import SPECS, add_trunk
    from tiny_onnx import detector_end2end, pose_steady

    folder.mkdir(parents=True, exist_ok=True)
    det, pose = folder / "yolox-tiny-one-box.onnx", folder / "rtmw-m-steady.onnx"
    detector_end2end(det, hw=SPECS["yolox-tiny"].hw, boxes=1, batch="batch")
    pose_steady(pose, hw=SPECS["rtmw-m"].hw, batch="batch", span=(0.18, 0.82))
    for path, name in ((det, "yolox-tiny"), (pose, "rtmw-m")):
        add_trunk(path, SPECS[name].gmacs * 1e9)
    return {"detector": det, "pose": pose}


def tracker_child(root: Path, cpu: int, share: str, models: str, result: Path) -> None:
    """Pinned to one core: rtmlib's PoseTracker(det_frequency=EVERY) over this share of videos."""
    import cv2
    import numpy as np
    from tiny_onnx import rtmlib_reference

    det, pose, videos = pinned_rtmlib(root, cpu, share, models)
    calls = [0]

    def detect(image: np.ndarray) -> np.ndarray:
        calls[0] += 1
        return det(image)

    counted = type("Det", (), {"det_mode": "human", "__call__": lambda _, image: detect(image)})
    solution = type("Solution", (), {"__init__": lambda self, **_: None, "pose_model": pose,
                                     "det_model": counted()})
    tracker = rtmlib_reference().PoseTracker(solution, det_frequency=EVERY)
    t0, frames = time.monotonic(), 0
    for files in videos:
        tracker.reset()
        for f in files:
            tracker(cv2.imread(f))
            frames += 1
    result.write_text(json.dumps({"cpu": cpu, "frames": frames, "detected": calls[0],
                                  "loop_s": time.monotonic() - t0}))


def measure_trackers(root: Path, n: int, work: Path, models: dict[str, Path]) -> dict:
    cpus = sorted(os.sched_getaffinity(0))[:n]
    results = [work / f"tracker-{i}.json" for i in range(n)]
    spec = json.dumps({k: str(v) for k, v in models.items()})
    cmds = [[sys.executable, __file__, "--tracker-child", root, "--cpu", cpu, "--share",
             f"{i}/{n}", "--models", spec, "--result", results[i]] for i, cpu in enumerate(cpus)]
    t = timed(cmds, work / "tracker.log")
    loops = [json.loads(r.read_text()) for r in results]
    frames = sum(r["frames"] for r in loops)
    return {**t, "frames": frames, "fps": sum(r["frames"] / r["loop_s"] for r in loops),
            "detected_share": round(sum(r["detected"] for r in loops) / frames, 3), "loops": loops}


def cycle(rep: int, root: Path, frames: int, n: int, work: Path, models: dict) -> dict:
    names = ["run-k1", f"run-k{EVERY}", f"posetracker-k{EVERY}"]
    order = names[rep % 3:] + names[:rep % 3]
    out: dict = {"order": order}
    for what in order:
        if what.startswith("posetracker"):
            r = measure_trackers(root, n, work, models)
        else:
            r = measure_run(root, work / "run", frames, models,
                            ("--det-every", what.removeprefix("run-k")))
        r["cpu_ms_per_frame"] = round(r["cpu_s"] * 1e3 / r["frames"], 1)
        out[what] = r
        print(f"[#{rep}] {what}: {r['fps']:.2f} frames/s, {r['cpu_ms_per_frame']} ms CPU a frame, "
              f"wall {r['wall_s']} s, load {loadavg()[0]}"
              + (f", detected {r['detected_share']:.0%} of frames" if "detected_share" in r else ""),
              file=sys.stderr, flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--copies", type=int, default=3, help="copies of the two sample videos (138 "
                                                        "frames a copy)")
    p.add_argument("--repeat", type=int, default=2, help="alternated cycles")
    p.add_argument("--json", default="wholebody-tracking.json", help="file under docs/results/")
    for hidden in ("--tracker-child", "--cpu", "--share", "--models", "--result"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.tracker_child:
        tracker_child(Path(args.tracker_child), int(args.cpu), args.share, args.models,
                      Path(args.result))
        return 0
    from tiny_onnx import RTMLIB_VERSION
    from workload import build_workload

    n = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as tmp:
        work = Path(tmp)
        models = build_models(work / "models")
        wl = build_workload(work / "PHOENIX-2014-T", args.copies)
        cycles = [cycle(rep, Path(wl["root"]), wl["frames"], n, work, models)
                  for rep in range(args.repeat)]
    names = [k for k in cycles[0] if k != "order"]
    fps = {w: statistics.mean(c[w]["fps"] for c in cycles) for w in names}
    k = f"run-k{EVERY}"
    res = {"command": " ".join(sys.argv), "machine": machine(), "workers": n,
           "rtmlib": RTMLIB_VERSION, "workload": {x: wl[x] for x in ("origin", "videos", "frames")},
           "models": MODELS, "cycles": cycles, "mean_fps": fps,
           "k10_over_k1": fps[k] / fps["run-k1"], "k10_over_posetracker": fps[k] / fps[names[2]]}
    print(f"mean frames/s: {', '.join(f'{w} {v:.2f}' for w, v in fps.items())}; --det-every "
          f"{EVERY} / --det-every 1 = {res['k10_over_k1']:.2f}, / {n} PoseTracker loops = "
          f"{res['k10_over_posetracker']:.3f}")
    if args.json:
        print(save_json(args.json, res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
