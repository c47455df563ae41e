#!/usr/bin/env python3
"""Memory and time of the legacy exports (`export --format legacy-pkl` / `legacy-npz`) on merged
run folders of growing size: shows the writer's memory stays flat as the dataset grows.

Each export runs as the real command in a subprocess; its VmRSS is sampled every 0.5 s and its
peak taken from the kernel (wait4's ru_maxrss). Run folders come from scripts/bench/fabricate.py
followed by `phoenix-keypoints merge --out DIR` (the whole release: 947,756 frames).

    python scripts/bench/legacy.py --runs /tmp/fab10 /tmp/fab100 --json legacy.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def measure(run: Path, fmt: str, to: Path) -> dict:
    """One export in a subprocess: wall s, CPU s, peak RSS MiB, the RSS timeline, output size."""
    cmd = [sys.executable, "-m", "phoenix_keypoints", "export", "--out", str(run), "--format", fmt,
           "--to", str(to)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    timeline = []
    while True:  # wait4 (not poll) so the child's own rusage is kept
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        r = rss_mib(proc.pid)
        if r is not None:
            timeline.append((round(time.monotonic() - t0, 1), round(r)))
        time.sleep(0.5)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out, err = proc.stdout.read(), proc.stderr.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err.decode()}")
    size = sum(p.stat().st_size for p in to.rglob("*")) if to.is_dir() else to.stat().st_size
    return {"format": fmt, "frames": pq.ParquetFile(run / "keypoints.parquet").metadata.num_rows,
            "wall_s": round(wall, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024),
            "output_mib": round(size / 2**20), "stdout": out.decode().strip(),
            "rss_timeline": timeline}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=Path, nargs="+", required=True, help="merged run folders")
    p.add_argument("--formats", default="legacy-pkl,legacy-npz")
    p.add_argument("--json", help="file name under docs/results/")
    args = p.parse_args()
    rows = []
    for run in args.runs:
        for fmt in args.formats.split(","):
            to = run.parent / f"{run.name}.{fmt}" if fmt == "legacy-npz" else \
                run.parent / f"{run.name}.pkl"
            row = {"run": str(run), **measure(run, fmt, to)}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "rss_timeline"}), flush=True)
    if args.json:
        dest = REPO / "docs" / "results" / args.json
        dest.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
