"""What a detector answering 20,000 boxes a frame costs (issue 46 item 3): an RTMDet-style model
with NMS inside (tests/tiny_onnx.py's many_boxes_detector: 20,000 boxes at score 0.9 on every
frame) over a folder of 3 frames of the shared sample, with a tiny 21-point hand model (rtmlib's
Hand: every box posed, up to --max-persons) and a tiny 17-point body model (the largest box
alone; and with --det-every 3, rtmlib's PoseTracker, which poses every box), each the README's
`run` command with `--workers 1`. Wall and CPU seconds and peak RSS of the process tree.

Issue 52's two (items 1 and 3): `grid-2048` a YOLOX-style detector without NMS of a 2048x2048
input (tests/tiny_onnx.py's grid_boxes_detector: 86,016 cells, each a 1-pixel box at score 0.9,
none overlapping) with the 17-point model, over the same 3 frames; `grow-100-det-every-3` an
RTMDet-style detector answering 100 equal boxes, a dynamic-batch 17-point model growing 100 MiB
a crop (pose_growing) and `--det-every 3`, over one 210x260 frame. `peak_rss_mib_kernel` is the
largest process's high-water mark (the worker's).

`--python` runs another checkout's interpreter (e.g. ../other-checkout/.venv/bin/python: the code before
the cap, whose hand run posed all 20,000 boxes a frame); `--cases` picks some.

    .venv/bin/python scripts/bench/many_boxes.py [--save many-boxes.json] [--python PY]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] / "tests")]
from common import machine, measure, save_json, table  # noqa: E402
from helpers import SHARED_SAMPLE  # noqa: E402
from tiny_onnx import (  # noqa: E402
    grid_boxes_detector,
    many_boxes_detector,
    pose_growing,
    pose_model,
)

CASES = {"hand21": ("21", []), "hand21-cap-1000": ("21", ["--max-persons", "1000"]),
         "coco17": ("17", ["--detector-kind", "rtmdet"]),
         "coco17-det-every-3": ("17", ["--detector-kind", "rtmdet", "--det-every", "3"]),
         "grid-2048": ("17", []),
         "grow-100-det-every-3": ("17", ["--detector-kind", "rtmdet", "--det-every", "3"])}


def models(work: Path, name: str, points: str, clip: Path) -> tuple[Path, Path, Path]:
    """A case's detector, pose model and frames (issue 52's cases: their own; the others: the
    20,000 boxes and the case's pose model, over the 3 frames)."""
    pose = pose_model(work, "simcc", int(points))
    if name == "grid-2048":
        return grid_boxes_detector(work / "grid2048.onnx", (2048, 2048)), pose, clip
    if name == "grow-100-det-every-3":
        one = work / "one"
        one.mkdir(exist_ok=True)
        (one / "0000.png").write_bytes(next(iter(sorted(clip.iterdir()))).read_bytes())
        grows = pose_growing(pose_model(work, "simcc", 17, dynamic=True), work / "grows.onnx", 100)
        return many_boxes_detector(work / "equal100.onnx", 100, equal=True), grows, one
    return many_boxes_detector(work / "many.onnx"), pose, clip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", help="write the results to docs/results/NAME")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs the tool")
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    args = ap.parse_args()
    os.environ["PYTHONSAFEPATH"] = "1"  # the interpreter's own install, not this checkout's folder
    rows, out = [], {"machine": machine(), "python": args.python, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        clip = work / "clip"
        clip.mkdir()
        for i, f in enumerate(sorted(Path(SHARED_SAMPLE).rglob("*.png"))[::40][:3]):
            (clip / f"{i:04d}.png").write_bytes(f.read_bytes())
        for name in args.cases:
            points, more = CASES[name]
            det, pose, frames = models(work, name, points, clip)
            cmd = [args.python, "-m", "phoenix_keypoints", "run", "--dataset", str(frames),
                   "--out", str(work / name), "--estimator", "wholebody", "--detector", str(det),
                   "--pose-model", str(pose), "--workers", "1", *more]
            got = measure(cmd, tree=True)
            got.pop("rss_timeline")
            out["cases"][name] = {"command": " ".join(cmd[2:]), **got}
            rows.append([name, got["wall_s"], got["cpu_s"], got["peak_rss_mib_sampled"],
                         got["peak_rss_mib_kernel"]])
    print(table(rows, ["case", "wall s", "CPU s", "peak RSS MiB (tree)", "largest process MiB"]))
    if args.save:
        print(save_json(args.save, out))


if __name__ == "__main__":
    main()
