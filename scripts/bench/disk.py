#!/usr/bin/env python3
"""Disk a run's outputs take per frame, and for the whole release: keypoints.parquet, parts/,
tensors/, and the .pose export, measured on a default `run` over the shared sample's real frames.

Why measured on real frames: keypoints compress by their values (a fabricated run would not say),
and a run keeps its parts after the merge (a resume checks them), so they count too.

    .venv/bin/python scripts/bench/disk.py            # ~1 min on 2 cores; docs/results/disk.json
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_SAMPLE, machine, save_json  # noqa: E402

RELEASE_FRAMES = 947_756  # PHOENIX-2014-T, all splits (docs/how-it-works.md)


def size(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def cli(*args: object) -> None:
    subprocess.run([sys.executable, "-m", "phoenix_keypoints", *map(str, args)], check=True,
                   stdout=subprocess.DEVNULL)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", type=Path, default=SHARED_SAMPLE)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        cli("run", "--dataset", args.dataset, "--out", run)
        cli("export", "--out", run, "--format", "pose", "--to", Path(tmp) / "poses")
        frames = int(subprocess.run(
            [sys.executable, "-c", f"import pyarrow.parquet as pq; print(pq.ParquetFile("
                                   f"{str(run / 'keypoints.parquet')!r}).metadata.num_rows)"],
            check=True, capture_output=True, text=True).stdout)
        outputs = {"keypoints.parquet": run / "keypoints.parquet", "parts/": run / "parts",
                   "tensors/": run / "tensors", ".pose export": Path(tmp) / "poses"}
        per_frame = {name: size(path) / frames for name, path in outputs.items()}
    release = {name: round(b * RELEASE_FRAMES / 1e9, 2) for name, b in per_frame.items()}
    result = {"command": "scripts/bench/disk.py", "machine": machine(), "frames": frames,
              "bytes_per_frame": {k: round(v) for k, v in per_frame.items()},
              "release_frames": RELEASE_FRAMES, "release_gb": release,
              "release_gb_run_folder": round(sum(release[k] for k in ("keypoints.parquet", "parts/",
                                                                      "tensors/")), 1)}
    print(save_json("disk.json", result))
    for name in per_frame:
        print(f"{name}: {per_frame[name]:.0f} bytes/frame, {release[name]} GB for the release")


if __name__ == "__main__":
    main()
