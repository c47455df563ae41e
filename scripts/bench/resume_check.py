#!/usr/bin/env python3
"""What a resume's check of its committed parts costs for the whole release: part footers only (as
`status` reads them) against footers plus a stat of every frame the parts were made from (a resume:
jobs.run.done.scan_parts with check_frames), and what `verify` costs on the same frames.

It fabricates a planned run of the release from the index (scripts/bench/fabricate.py: the real
plan, run.json and one part per chunk with realistic provenance columns; landmark columns null,
since neither check reads them) and a dataset of sparse files, each with its row's recorded size
and mtime, so every stat finds a file that matches (nothing is rejected; the work is all there).

    .venv/bin/python scripts/bench/resume_check.py --tmp /tmp/rcheck             # whole release
    .venv/bin/python scripts/bench/resume_check.py --tmp /tmp/rcheck --fraction 0.1 --json x.json
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families.holistic.declaration import SCHEMA
from phoenix_keypoints.extract.families.holistic.points import PARTS, WORLD_PARTS
from phoenix_keypoints.jobs.run.done import scan_parts
from phoenix_keypoints.jobs.run.options import RunOptions
from phoenix_keypoints.jobs.run.prepare import new_run
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.parts import PartInfo, write_part

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    RssSampler,
    loadavg,
    machine,
    rss_mib,
    save_json,
    scale_parser,
    table,
)
from fabricate import fake_provenance, index_dataset  # noqa: E402


def part_table(rng: np.random.Generator, videos: list[dict]) -> pa.Table:
    """A part's rows: the plan's frames, realistic provenance, no landmarks (never read here)."""
    n = sum(v["num_frames"] for v in videos)
    cols = {
        "split": pa.array([v["split"] for v in videos for _ in range(v["num_frames"])]),
        "video": pa.array([v["video"] for v in videos for _ in range(v["num_frames"])]),
        "frame": pa.array([i for v in videos for i in range(v["num_frames"])], pa.int32()),
        "time_s": pa.nulls(n, pa.float64()),
        "image": pa.array([f"{v['folder']}/{f}" for v in videos for f in v["files"]]),
        "width": pa.nulls(n, pa.int32()), "height": pa.nulls(n, pa.int32()),
        "status": pa.array(["ok"] * n), "note": pa.nulls(n, pa.string()),
        **fake_provenance(rng, n),
    }
    cols.update({p: pa.nulls(n, pa.list_(pa.float32())) for p in (*PARTS, *WORLD_PARTS)})
    return pa.table(cols, schema=SCHEMA)


def fabricate(tmp: Path, fraction: float, index: Path) -> tuple[RunDir, int]:
    """The run folder and a dataset of sparse frames matching its rows; returns (rd, parts)."""
    ds = index_dataset(index, fraction)
    info, plan = new_run(ds, RunOptions().resolved(), 32)
    root = tmp / "data"
    info.dataset.root = str(root)
    rd = RunDir(tmp / "run")
    rd.parts_dir.mkdir(parents=True)
    rd.save_plan(plan)
    rd.save(info)
    return rd, write_parts(rd, root)


def write_parts(rd: RunDir, root: Path) -> int:
    """One committed part per chunk of the run's plan, realistic provenance, and each frame file
    under root made (or cut) sparse to its row's size and mtime, so every stat matches; the parts."""
    info, plan = rd.load(), rd.load_plan()
    by_chunk: dict[int, list[dict]] = {}
    for row in plan.select(["chunk", "split", "video", "folder", "files", "num_frames"]).to_pylist():
        by_chunk.setdefault(row["chunk"], []).append(row)
    rng = np.random.default_rng(0)
    for chunk, videos in sorted(by_chunk.items()):
        t = part_table(rng, videos)
        write_part(rd.part_path(chunk), t, PartInfo.of_rows(chunk, t["video"].to_pylist(),
                                                            t["status"].to_pylist(), {}),
                   info.fingerprint)
        for image, size, mtime in zip(*(t[c].to_pylist() for c in
                                        ("image", "file_size", "file_mtime_ns")), strict=True):
            path = root / image
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.ftruncate(fd, size)  # sparse: the size a stat sees, no blocks
            os.close(fd)
            os.utime(path, ns=(mtime, mtime))
    return len(by_chunk)


def timed(fn, rounds: int) -> tuple[list[float], float]:
    """Seconds per round (the first warms the page cache) and the peak RSS in MiB meanwhile."""
    out = []
    with RssSampler(os.getpid(), every_s=0.05) as rss:
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            out.append(round(time.perf_counter() - t0, 3))
    return out, rss.peak


def main() -> int:
    args = scale_parser(__doc__).parse_args()
    shutil.rmtree(args.tmp, ignore_errors=True)
    t0 = time.monotonic()
    rd, parts = fabricate(args.tmp, args.fraction, args.index)
    made = round(time.monotonic() - t0, 1)
    info, plan = rd.load(), rd.load_plan()
    rows = int(pq.ParquetFile(rd.part_path(0)).metadata.num_rows)  # sanity: parts are readable
    rss_before = rss_mib(os.getpid())
    footers, footers_rss = timed(lambda: scan_parts(rd, info, plan, move_bad=False), args.rounds)
    state = scan_parts(rd, info, plan, move_bad=False, check_frames=True)
    assert not state.rejected and len(state.done) == parts, state.rejected
    checked, checked_rss = timed(lambda: scan_parts(rd, info, plan, move_bad=False,
                                                    check_frames=True), args.rounds)
    result = {"machine": machine(), "load_before": loadavg(), "fraction": args.fraction,
              "frames": info.dataset.frames, "parts": parts, "first_part_rows": rows,
              "fabricated_s": made, "rss_before_mib": rss_before,
              "footers_s": footers, "footers_peak_rss_mib": footers_rss,
              "footers_and_frames_s": checked, "footers_and_frames_peak_rss_mib": checked_rss}
    print(table([["footers only (status)", min(footers), round(footers_rss)],
                 ["footers + stat of every frame (resume)", min(checked), round(checked_rss)]],
                ["scan_parts", "s (best)", "peak RSS MiB"]))
    if args.json:
        print(save_json(args.json, result))
    shutil.rmtree(args.tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
