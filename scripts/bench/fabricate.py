#!/usr/bin/env python3
"""Fabricate a finished run folder for the whole PHOENIX-2014-T release, without any pixels.

From the release index (corpus csv + frame counts per video, ../shared/data/phoenix-2014-T-index)
this writes run.json, plan.parquet and one committed part per chunk, through the project's own
plan, schema and part code, so `phoenix-keypoints merge --out DIR` accepts them as a real run.
Values are random float32 with the real shapes; parts are null at realistic rates (a face is
missed in ~2% of frames, a hand in ~20-40%), so merge and tensors do the same work as on real data.

    .venv/bin/python scripts/bench/fabricate.py --out /tmp/fab100            # 8,257 videos
    .venv/bin/python scripts/bench/fabricate.py --out /tmp/fab10 --fraction 0.1
"""

from __future__ import annotations

import argparse
import binascii
import csv
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.corpora.base import SPLITS, Dataset, Video
from phoenix_keypoints.extract.corpora.phoenix import FRAMES_DIR
from phoenix_keypoints.extract.families.holistic.declaration import SCHEMA
from phoenix_keypoints.extract.families.holistic.points import layout
from phoenix_keypoints.extract.keypoints.schema import part_column
from phoenix_keypoints.jobs.run.options import RunOptions
from phoenix_keypoints.jobs.run.prepare import new_run
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.parts import PartInfo, write_part

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_INDEX  # noqa: E402

# Chance that MediaPipe finds nothing for a part in a frame (PHOENIX: the face is nearly always
# found, hands often leave the frame or are lost by the tracker).
NULL_RATE = {"pose": 0.005, "face": 0.02, "left_hand": 0.40, "right_hand": 0.20}


def index_dataset(index: Path, fraction: float = 1.0) -> Dataset:
    """A Dataset as discover() would return it for the real release, from the index files."""
    videos: list[Video] = []
    for split in SPLITS:
        counts = {}
        with open(index / f"PHOENIX-2014-T.{split}.frame_counts.tsv", newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                counts[row["name"]] = int(row["num_frames"])
        with open(index / f"PHOENIX-2014-T.{split}.corpus.csv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="|", quoting=csv.QUOTE_NONE))
        step = max(1, round(1 / fraction))
        for row in rows[::step]:
            n = counts[row["name"]]
            videos.append(Video(
                split, row["name"], f"{FRAMES_DIR}/{split}/{row['name']}",
                tuple(f"images{i:04d}.png" for i in range(1, n + 1)),
                row["speaker"], row["orth"], row["translation"]))
    videos.sort(key=lambda v: (v.split, v.name))
    return Dataset(index, "phoenix-2014-T", videos, [], f"fabricated-from-index-{fraction}")


def fake_provenance(rng: np.random.Generator, n: int) -> dict[str, pa.Array]:
    """Provenance columns as the worker writes them: PNG-like sizes, mtimes, distinct sha256 hex.

    The hex column is built as one buffer (no per-row Python string), like the real one it is
    incompressible, so merge and file sizes are measured with its true weight.
    """
    digests = np.frombuffer(binascii.hexlify(rng.bytes(32 * n)), np.uint8)
    offsets = np.arange(0, 64 * (n + 1), 64, dtype=np.int32)
    return {
        "file_size": pa.array(rng.integers(70_000, 110_000, n, dtype=np.int64)),
        "file_mtime_ns": pa.array(1_300_000_000 * 10**9 + rng.integers(0, 10**15, n,
                                                                       dtype=np.int64)),
        "file_sha256": pa.StringArray.from_buffers(n, pa.py_buffer(offsets),
                                                   pa.py_buffer(digests)),
    }


def fake_table(rng: np.random.Generator, videos: list[dict]) -> pa.Table:
    """A part's rows for these plan rows: real shapes, random values, realistic nulls."""
    split = [v["split"] for v in videos for _ in range(v["num_frames"])]
    video = [v["video"] for v in videos for _ in range(v["num_frames"])]
    frame = [i for v in videos for i in range(v["num_frames"])]
    image = [f"{v['folder']}/{name}" for v in videos for name in v["files"]]
    n = len(frame)
    cols = {
        "split": pa.array(split, pa.string()), "video": pa.array(video, pa.string()),
        "frame": pa.array(frame, pa.int32()), "image": pa.array(image, pa.string()),
        "time_s": pa.nulls(n, pa.float64()),
        "width": pa.array(np.full(n, 210, np.int32)), "height": pa.array(np.full(n, 260, np.int32)),
        "status": pa.array(["ok"] * n, pa.string()), "note": pa.nulls(n, pa.string()),
        **fake_provenance(rng, n),
    }
    present = {}
    for part, (k, c) in layout().items():  # pose_world is found exactly where pose is
        present[part] = present["pose"] if part == "pose_world" else rng.random(n) >= NULL_RATE[part]
        block = rng.random((n, k * c), dtype=np.float32)
        cols[part] = part_column(block, present[part], k * c)
    return pa.table(cols, schema=SCHEMA)


def fabricate(out: Path, fraction: float = 1.0, index: Path = SHARED_INDEX,
              chunk_frames: int | None = None, workers: int = 32, seed: int = 0) -> dict:
    """Write the run folder (planned as `run` would for `workers`); returns a summary."""
    t0 = time.monotonic()
    ds = index_dataset(index, fraction)
    options = RunOptions(chunk_frames=chunk_frames).resolved()
    info, plan = new_run(ds, options, workers)
    info.fabricated = True
    rd = RunDir(out)
    rd.path.mkdir(parents=True, exist_ok=True)
    rd.parts_dir.mkdir(exist_ok=True)
    rd.save_plan(plan)
    rd.save(info)
    rng = np.random.default_rng(seed)
    by_chunk: dict[int, list[dict]] = {}
    for row in plan.select(["chunk", "split", "video", "folder", "files", "num_frames"]).to_pylist():
        by_chunk.setdefault(row["chunk"], []).append(row)
    for i, (chunk, videos) in enumerate(sorted(by_chunk.items())):
        table = fake_table(rng, videos)
        part = PartInfo.of_rows(chunk, table["video"].to_pylist(), table["status"].to_pylist(), {})
        write_part(rd.part_path(chunk), table, part, info.fingerprint)
        if i % 100 == 0:
            print(f"  part {i}/{len(by_chunk)}", file=sys.stderr, flush=True)
    return {"videos": len(ds.videos), "frames": ds.num_frames, "chunks": len(by_chunk),
            "seconds": round(time.monotonic() - t0, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--fraction", type=float, default=1.0, help="every 1/F-th video (default 1)")
    p.add_argument("--index", type=Path, default=SHARED_INDEX)
    p.add_argument("--chunk-frames", type=int, help="fixed chunk size (default: the plan's own)")
    p.add_argument("--workers", type=int, default=32, help="workers the plan is made for (32)")
    args = p.parse_args()
    if not (args.index / "PHOENIX-2014-T.train.frame_counts.tsv").is_file():
        print(f"error: release index not found at {args.index}", file=sys.stderr)
        return 2
    print(fabricate(args.out, args.fraction, args.index, args.chunk_frames, args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
