#!/usr/bin/env python3
"""Time `phoenix-keypoints merge` (keypoints.parquet + tensors) on fabricated full-scale parts.

For each --fraction, fabricates a run folder from the release index (scripts/bench/fabricate.py),
runs the real `merge` command in a subprocess and reports its wall time and peak RSS (sampled from
/proc every 0.25 s, and the kernel's own high-water mark from getrusage), with an RSS timeline so a
reader can see it stays flat. Run folders are deleted afterwards unless --keep.

    .venv/bin/python scripts/bench/merge.py --fractions 0.1,1 --work /tmp/bench-merge
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    SHARED_INDEX,
    machine,
    measure,
    save_json,
    table,
)
from fabricate import fabricate  # noqa: E402


def du_mib(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def time_merge(run_dir: Path) -> dict:
    """Run `phoenix-keypoints merge --out run_dir` as a user would; wall time and memory."""
    res = measure([sys.executable, "-m", "phoenix_keypoints", "merge", "--out", str(run_dir)])
    kp = run_dir / "keypoints.parquet"
    return {
        **res,
        "keypoints_mib": round(kp.stat().st_size / 2**20, 1),
        "tensors_mib": du_mib(run_dir / "tensors"),
        "parts_mib": du_mib(run_dir / "parts"),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--fractions", default="0.1,1", help="comma-separated dataset fractions")
    p.add_argument("--work", type=Path, default=Path("/tmp/phoenix-bench-merge"))
    p.add_argument("--keep", action="store_true", help="keep the run folders")
    p.add_argument("--json", default="merge.json", help="file name under docs/results/")
    args = p.parse_args()
    if not (SHARED_INDEX / "PHOENIX-2014-T.train.frame_counts.tsv").is_file():
        print(f"error: release index not found at {SHARED_INDEX}", file=sys.stderr)
        return 2
    results = []
    for frac in (float(f) for f in args.fractions.split(",")):
        run_dir = args.work / f"fab-{frac:g}"
        shutil.rmtree(run_dir, ignore_errors=True)
        print(f"fabricating {frac:g} of the release in {run_dir} ...", file=sys.stderr)
        fab = fabricate(run_dir, frac)
        os.sync()
        print(f"  {fab}; merging ...", file=sys.stderr)
        res = {"fraction": frac, **fab, **time_merge(run_dir)}
        res["frames_per_s"] = round(res["frames"] / res["wall_s"])
        results.append(res)
        print(f"  merge {res['wall_s']} s, peak RSS {res['peak_rss_mib_kernel']} MiB",
              file=sys.stderr)
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    rows = [[f"{r['fraction']:g}", r["videos"], r["frames"], r["chunks"], r["wall_s"], r["cpu_s"],
             r["frames_per_s"], r["peak_rss_mib_kernel"], r["keypoints_mib"], r["tensors_mib"],
             f"{r['load_before'][0]} / {r['load_after'][0]}"] for r in results]
    print(table(rows, ["fraction", "videos", "frames", "parts", "merge+tensors wall s", "CPU s",
                       "frames/s", "peak RSS MiB", "keypoints MiB", "tensors MiB", "load 1-min"]))
    path = save_json(args.json, {"command": " ".join(sys.argv), "machine": machine(),
                                 "results": results})
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
