#!/usr/bin/env python3
"""Time planning on a PHOENIX-2014-T tree of 10% of the release's size (empty frame files).

Builds the tree from the release index (every 10th video: ~826 videos, ~95k empty
`imagesNNNN.png`, corpus csv files with those rows), then times, each --repeat times:
discover() (corpus parse + listing every folder), make_plan(), and jobs.runner.prepare() as `run`
calls it on a new run folder (discover + plan + write plan.parquet and run.json) and on a resume
(discover again and compare fingerprints). The file system cache is warm after the first pass;
the first pass is reported separately.

    .venv/bin/python scripts/bench/plan.py --fraction 0.1 --work /tmp/phoenix-bench-plan
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_INDEX, loadavg, machine, save_json, table  # noqa: E402
from fabricate import index_dataset  # noqa: E402

from phoenix_keypoints.extract.corpora import discover  # noqa: E402
from phoenix_keypoints.extract.corpora.base import SPLITS  # noqa: E402
from phoenix_keypoints.jobs.run.options import RunOptions  # noqa: E402
from phoenix_keypoints.jobs.run.plan import make_plan  # noqa: E402
from phoenix_keypoints.jobs.run.prepare import load_or_plan  # noqa: E402
from phoenix_keypoints.jobs.rundir.folder import RunDir  # noqa: E402


def build_tree(root: Path, fraction: float) -> tuple[int, int]:
    """A PHOENIX-2014-T tree with empty frame files; returns (videos, frames)."""
    ds = index_dataset(SHARED_INDEX, fraction)
    manual = root / "annotations" / "manual"
    manual.mkdir(parents=True)
    for split in SPLITS:
        lines = ["name|video|start|end|speaker|orth|translation"]
        lines += [f"{v.name}|{v.name}/1/*.png|-1|-1|{v.speaker}|{v.gloss}|{v.translation}"
                  for v in ds.videos if v.split == split]
        (manual / f"PHOENIX-2014-T.{split}.corpus.csv").write_text("\n".join(lines) + "\n")
    for v in ds.videos:
        folder = root / v.folder
        folder.mkdir(parents=True)
        for name in v.files:
            (folder / name).touch()
    return len(ds.videos), ds.num_frames


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--fraction", type=float, default=0.1)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--work", type=Path, default=Path("/tmp/phoenix-bench-plan"))
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json", default="plan.json", help="file name under docs/results/")
    args = p.parse_args()
    if not (SHARED_INDEX / "PHOENIX-2014-T.train.frame_counts.tsv").is_file():
        print(f"error: release index not found at {SHARED_INDEX}", file=sys.stderr)
        return 2
    shutil.rmtree(args.work, ignore_errors=True)
    root = args.work / "PHOENIX-2014-T"
    build_s, (videos, frames) = timed(build_tree, root, args.fraction)
    print(f"tree: {videos} videos, {frames} empty frames, built in {build_s:.1f} s", file=sys.stderr)
    load0 = loadavg()
    times: dict[str, list[float]] = {"discover": [], "make_plan": [], "prepare (new run)": [],
                                     "prepare (resume)": []}
    for i in range(args.repeat):
        t, ds = timed(discover, root)
        times["discover"].append(t)
        t, _ = timed(make_plan, ds, 32)
        times["make_plan"].append(t)
        rd = RunDir(args.work / f"run-{i}")
        t, _ = timed(load_or_plan, rd, RunOptions(dataset=root), 32)
        times["prepare (new run)"].append(t)
        t, _ = timed(load_or_plan, rd, RunOptions(), 32)
        times["prepare (resume)"].append(t)
    stats = {k: {"first_s": round(v[0], 3), "median_s": round(statistics.median(v), 3),
                 "min_s": round(min(v), 3), "max_s": round(max(v), 3)} for k, v in times.items()}
    rows = [[k, s["first_s"], s["median_s"], s["min_s"], s["max_s"]] for k, s in stats.items()]
    print(f"{videos} videos, {frames} frames; load {load0[0]} -> {loadavg()[0]}")
    print(table(rows, ["step", "first pass s", "median s", "min s", "max s"]))
    path = save_json(args.json, {"command": " ".join(sys.argv), "machine": machine(),
                                 "videos": videos, "frames": frames, "repeat": args.repeat,
                                 "load_before": load0, "load_after": loadavg(), "steps": stats})
    print(f"wrote {path}", file=sys.stderr)
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
