"""What a detector answering 20,000 boxes a frame costs (issue 46 item 3): an RTMDet-style model
with NMS inside (tests/tiny_onnx.py's many_boxes_detector: 20,000 boxes at score 0.9 on every
frame) over a folder of 3 frames of the shared sample, with a tiny 21-point hand model (rtmlib's
Hand: every box posed, up to --max-persons) and a tiny 17-point body model (the largest box
alone; and with --det-every 3, rtmlib's PoseTracker, which poses every box), each the README's
`run` command with `--workers 1`. Wall and CPU seconds and peak RSS of the process tree.

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
from tiny_onnx import many_boxes_detector, pose_model  # noqa: E402

CASES = {"hand21": ("21", []), "hand21-cap-1000": ("21", ["--max-persons", "1000"]),
         "coco17": ("17", ["--detector-kind", "rtmdet"]),
         "coco17-det-every-3": ("17", ["--detector-kind", "rtmdet", "--det-every", "3"])}


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
        det = many_boxes_detector(work / "many.onnx")
        clip = work / "clip"
        clip.mkdir()
        for i, f in enumerate(sorted(Path(SHARED_SAMPLE).rglob("*.png"))[::40][:3]):
            (clip / f"{i:04d}.png").write_bytes(f.read_bytes())
        for name in args.cases:
            points, more = CASES[name]
            cmd = [args.python, "-m", "phoenix_keypoints", "run", "--dataset", str(clip), "--out",
                   str(work / name), "--estimator", "wholebody", "--detector", str(det),
                   "--pose-model", str(pose_model(work, "simcc", int(points))), "--workers", "1",
                   *more]
            got = measure(cmd, tree=True)
            got.pop("rss_timeline")
            out["cases"][name] = {"command": " ".join(cmd[2:]), **got}
            rows.append([name, got["wall_s"], got["cpu_s"], got["peak_rss_mib_sampled"]])
    print(table(rows, ["case", "wall s", "CPU s", "peak RSS MiB (tree)"]))
    if args.save:
        print(save_json(args.save, out))


if __name__ == "__main__":
    main()
