#!/usr/bin/env python3
"""Time `phoenix-keypoints report` on a fabricated full release (947,756 frames) and sample its memory.

The run folder is fabricated once into --run (scripts/bench/fabricate.py, then the real `merge`,
whose tensors/ the report reads the face mask from; parts/ is deleted afterwards, the report never
reads it) and reused by later calls. Each repeat runs the real command in a subprocess and records
wall time, CPU time, peak RSS of the process tree (sampled from /proc every 0.1 s) and the
kernel's high-water mark, plus the machine's load, which says how far the numbers can be trusted on
a shared machine. --face-column hides tensors/ during the timing, to measure the slower path taken
when a run has no usable tensor mask.

    .venv/bin/python scripts/bench/report.py --run /tmp/bench-report/fab --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
from common import REPO, SHARED_INDEX, machine, measure, save_json  # noqa: E402
from fabricate import fabricate  # noqa: E402


def ensure_run(run: Path, fraction: float) -> dict:
    """The fabricated, merged run folder: made once, then reused."""
    meta = run / "run.json"
    if meta.is_file() and (run / "keypoints.parquet").is_file() and json.loads(
            meta.read_text()).get("merge"):
        return {"reused": True}
    shutil.rmtree(run, ignore_errors=True)
    print(f"fabricating {fraction:g} of the release in {run} ...", file=sys.stderr)
    fab = fabricate(run, fraction)
    print("merging ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "phoenix_keypoints", "merge", "--out", str(run)], cwd=REPO,
                   check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(run / "parts", ignore_errors=True)
    os.sync()
    return {"reused": False, **fab}


def time_report(run: Path) -> dict:
    """One `phoenix-keypoints report --out run` as a user runs it."""
    res = measure([sys.executable, "-m", "phoenix_keypoints", "report", "--out", str(run)], every_s=0.1,
                  tree=True)
    out = run / "report"
    return {**res, "page_mib": round((out / "index.html").stat().st_size / 2**20, 2),
            "videos_parquet_kib": round((out / "videos.parquet").stat().st_size / 1024, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", type=Path, default=Path("/tmp/phoenix-bench-report/fab"),
                   help="where the fabricated run folder is (made there on first use)")
    p.add_argument("--fraction", type=float, default=1.0, help="share of the release (default 1)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--face-column", action="store_true",
                   help="hide tensors/ so the report decodes the face column itself")
    p.add_argument("--json", default="report.json", help="file name under docs/results/")
    args = p.parse_args()
    if not (SHARED_INDEX / "PHOENIX-2014-T.train.frame_counts.tsv").is_file():
        print(f"error: release index not found at {SHARED_INDEX}", file=sys.stderr)
        return 2
    fab = ensure_run(args.run, args.fraction)
    hidden = args.run / "tensors.hidden"
    if args.face_column:
        (args.run / "tensors").rename(hidden)
    try:
        results = []
        for i in range(args.repeat):
            res = time_report(args.run)
            results.append(res)
            print(f"  run {i + 1}: {res['wall_s']} s wall, {res['cpu_s']} s CPU, peak RSS "
                  f"{res['peak_rss_mib_sampled']} MiB (tree, sampled) / "
                  f"{res['peak_rss_mib_kernel']} MiB (kernel), load {res['load_before'][0]}",
                  file=sys.stderr)
    finally:
        if args.face_column:
            hidden.rename(args.run / "tensors")
    kp = args.run / "keypoints.parquet"
    path = save_json(args.json, {
        "command": " ".join(sys.argv), "machine": machine(), "fabricated": fab,
        "keypoints_mib": round(kp.stat().st_size / 2**20, 1),
        "face_source": "face column" if args.face_column else "tensor mask",
        "results": results,
    })
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
