#!/usr/bin/env python3
"""Whole-body frames/s on the CPU: the default batch against `--batch-size 1` against N rtmlib
loops at once, on the same models and frames (issue 33).

Three commands, alternated, their order rotating each cycle: the README-style command with default
options (`run --dataset D --out O --estimator wholebody --detector DET --pose-model POSE`: workers
= usable cores, the default batch), the same with `--batch-size 1`, and N = usable cores plain
rtmlib loops, each pinned to its own core (scripts/bench/wholebody.py says how they are counted).
frames/s = frames / wall time, command start to exit, for `run`; for the loops, the sum of each
loop's frames over its own loop time (start-up excluded), as in wholebody.py. CPU seconds a frame
beside each.

Models: tests/tiny_onnx.py's with a dynamic batch axis (a batch is one session call), or the real
published files where you have them (`--detector`, `--pose-model`: docs/wholebody.md says where;
nothing is downloaded). Frames: the shared sample's (scripts/bench/workload.py).

    .venv/bin/python scripts/bench/wholebody_batch.py                     # tiny models, 3 cycles
    .venv/bin/python scripts/bench/wholebody_batch.py --detector yolox_m.onnx \\
        --pose-model rtmw-x-l-384x288.onnx --copies 2 --json wholebody-batch-rtmw.json
    .venv/bin/python scripts/bench/wholebody_batch.py --sizes 4,16,32     # more batch sizes too
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import loadavg, machine, save_json  # noqa: E402
from wholebody import measure_bare, measure_run  # noqa: E402


def _models(args: argparse.Namespace, work: Path) -> tuple[dict[str, Path], str]:
    """The given model files, else the tiny ones with a dynamic batch axis; and their description."""
    if args.detector or args.pose_model:
        if not (args.detector and args.pose_model):
            raise SystemExit("give both --detector and --pose-model (or neither: the tiny models)")
        for p in (args.detector, args.pose_model):
            if not p.is_file():
                raise SystemExit(f"{p}: no such file")
        return ({"detector": args.detector.resolve(), "pose": args.pose_model.resolve()},
                f"{args.detector.name} + {args.pose_model.name}")
    from tiny_onnx import tiny_models

    return (tiny_models(work / "models", dynamic=True),
            "tests/tiny_onnx.py, dynamic batch axis (detector 96x128 with NMS inside, SimCC 64x48)")


def _cycle(rep: int, variants: dict[str, tuple[str, ...] | None], root: Path, frames: int,
           work: Path, models: dict[str, Path], n: int) -> dict:
    """One alternated cycle: every variant once, the order rotated by `rep`."""
    names = list(variants)
    order = names[rep % len(names):] + names[:rep % len(names)]
    out: dict = {"order": order}
    for what in order:
        extra = variants[what]
        res = (measure_bare(root, n, work, models) if extra is None
               else measure_run(root, work / "run", frames, models, extra))
        res["cpu_ms_per_frame"] = round(1000 * res["cpu_s"] / res["frames"], 3)
        out[what] = res
        print(f"[#{rep}] {what}: {res['fps']:.1f} frames/s, {res['cpu_ms_per_frame']} ms CPU a "
              f"frame, wall {res['wall_s']} s, load {loadavg()[0]}", file=sys.stderr, flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--copies", type=int, default=150, help="copies of the two sample videos (138 "
                                                          "frames a copy)")
    p.add_argument("--repeat", type=int, default=3, help="alternated cycles")
    p.add_argument("--sizes", default="", help="more --batch-size values to run, comma-separated")
    p.add_argument("--detector", type=Path, help="a real YOLOX .onnx (default: the tiny one)")
    p.add_argument("--pose-model", type=Path, help="a real RTMPose/RTMW .onnx")
    p.add_argument("--json", default="wholebody-batch.json", help="file under docs/results/ ('': none)")
    args = p.parse_args()
    from tiny_onnx import RTMLIB_VERSION
    from workload import build_workload

    from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_BATCH

    n = len(os.sched_getaffinity(0))
    variants: dict[str, tuple[str, ...] | None] = {"default": (), "batch1": ("--batch-size", "1"),
                                                   "rtmlib": None}
    for s in filter(None, args.sizes.split(",")):
        variants[f"batch{int(s)}"] = ("--batch-size", str(int(s)))
    with tempfile.TemporaryDirectory(prefix="bench-wholebody-batch-") as tmp:
        work = Path(tmp)
        models, described = _models(args, work)
        wl = build_workload(work / "PHOENIX-2014-T", args.copies)
        cycles = [_cycle(rep, variants, Path(wl["root"]), wl["frames"], work, models, n)
                  for rep in range(args.repeat)]
    summary = {what: {"fps": [round(c[what]["fps"], 1) for c in cycles],
                      "mean_fps": round(statistics.mean(c[what]["fps"] for c in cycles), 1),
                      "cpu_ms_per_frame": [c[what]["cpu_ms_per_frame"] for c in cycles]}
               for what in variants}
    for what in variants:
        summary[what]["over_rtmlib"] = [round(c[what]["fps"] / c["rtmlib"]["fps"], 3) for c in cycles]
        summary[what]["over_batch1"] = [round(c[what]["fps"] / c["batch1"]["fps"], 3) for c in cycles]
    res = {"command": " ".join(sys.argv), "machine": machine(), "workers": n,
           "default_batch": DEFAULT_BATCH, "rtmlib": RTMLIB_VERSION, "models": described,
           "workload": {k: wl[k] for k in ("origin", "videos", "frames")}, "summary": summary,
           "cycles": cycles}
    for what, s in summary.items():
        print(f"{what}: {', '.join(map(str, s['fps']))} frames/s (mean {s['mean_fps']}); / rtmlib "
              f"{s['over_rtmlib']}; / batch 1 {s['over_batch1']}")
    if args.json:
        print(save_json(args.json, res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
