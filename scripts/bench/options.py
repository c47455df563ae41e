#!/usr/bin/env python3
"""Per-frame cost of the Holistic options against the default, measured as scripts/bench/run.py does:
the same frames, the settings alternated round by round (order rotating) so outside load falls on
all of them alike, one process pinned to one core, ratios reported.

Settings: default; refine (refine_face_landmarks); static (static_image_mode); world (default
graph, pose_world copied out as well: Holistic computes it anyway, so its cost is the copy);
no-world (default graph, pose_world not copied: the previous version's work). Each round runs one
video through each setting's own graph (built once, reset per round, as a worker does).

    .venv/bin/python scripts/bench/options.py --rounds 5     # ~2 min; docs/results/bench-options.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
from common import loadavg, machine, save_json, table  # noqa: E402

SETTINGS = ("default", "no-world", "refine", "static")
VIDEO = "signer_demo-1"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dataset", type=Path,
                    default=Path(__file__).resolve().parents[3] / "shared/data/phoenix-sample/"
                    "PHOENIX-2014-T")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    os.sched_setaffinity(0, [sorted(os.sched_getaffinity(0))[0]])

    from phoenix_keypoints.extract.families.holistic.points import PARTS
    from phoenix_keypoints.extract.families.holistic.runner import Extractor, HolisticOptions
    from phoenix_keypoints.extract.keypoints.frames import read_frame

    frames = [read_frame(p)[0] for p in sorted(args.dataset.glob(f"features/*/*/{VIDEO}/*.png"))]
    options = {"default": HolisticOptions(), "no-world": HolisticOptions(),
               "refine": HolisticOptions(refine_face_landmarks=True),
               "static": HolisticOptions(static_image_mode=True)}
    graphs = {s: Extractor(o) for s, o in options.items()}
    graphs["no-world"].layout = dict(PARTS)  # the previous version's columns: no pose_world copy
    times: dict[str, list[float]] = {s: [] for s in SETTINGS}
    load_before = loadavg()
    for r in range(args.rounds + 1):  # round 0 warms every graph and is not counted
        order = SETTINGS[r % len(SETTINGS):] + SETTINGS[:r % len(SETTINGS)]
        for s in order:
            ex = graphs[s]
            ex.start_video()
            t0 = time.perf_counter()
            for rgb in frames:
                ex.process(rgb)
            if r:
                times[s].append((time.perf_counter() - t0) / len(frames) * 1000)
    for ex in graphs.values():
        ex.close()
    base = statistics.median(times["default"])
    rows = [[s, f"{statistics.median(v):.2f}", f"{min(v):.2f}", f"{statistics.median(v) / base:.3f}"]
            for s, v in times.items()]
    print(table(rows, ["setting", "median ms/frame", "min", "x default"]))
    save_json("bench-options.json", {
        "machine": machine(), "load_before": load_before, "load_after": loadavg(),
        "frames_per_round": len(frames), "rounds": args.rounds, "ms_per_frame": times,
        "command": " ".join(sys.argv)})


if __name__ == "__main__":
    main()
