#!/usr/bin/env python3
"""What recording a frame's provenance costs a worker, and what checking it costs `verify`.

Worker: the frame read as it is now (one open, fstat around the read, sha256 of the bytes) against
the read it replaced (Path.read_bytes), alone and followed by the same decode, on the shared
sample's real frames; all variants interleaved round by round so that load on a shared machine
hits them alike, and the added cost taken as the median of per-round differences. Reported as ms
per frame and as a share of a MediaPipe frame (~50 ms of CPU, docs/results/bench-quiet.json).

Check: extract.sources.provenance.changed_frames over as many rows as the release has (the
sample's frames repeated), stat only, and over fewer rows with content=True; from a warm page cache.

    .venv/bin/python scripts/bench/provenance.py                  # 200 rounds x 143 frames
    .venv/bin/python scripts/bench/provenance.py --rounds 50 --json provenance.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.keypoints.frames import decode_frame, read_file, read_frame
from phoenix_keypoints.extract.sources.provenance import changed_frames

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_SAMPLE, loadavg, machine, save_json, table  # noqa: E402

MEDIAPIPE_MS = 50.0  # CPU ms per frame of the Holistic graph on 210x260 (docs/results/bench-quiet.json)


def _old_read(path: Path) -> object:
    """The read before provenance: whole file by path, then decode."""
    return decode_frame(path.read_bytes())


# name -> (function of a path, the variant it is compared with, round by round)
VARIANTS: dict[str, tuple[Callable[[Path], object], str]] = {
    "read only, before (read_bytes)": (lambda p: p.read_bytes(), ""),
    "read only, now (read_file)": (read_file, "read only, before (read_bytes)"),
    "read only, now without sha256": (lambda p: read_file(p, digest=False),
                                      "read only, before (read_bytes)"),
    "read + decode, before": (_old_read, ""),
    "read + decode, now (read_frame)": (read_frame, "read + decode, before"),
}


def time_reads(paths: list[Path], rounds: int) -> dict[str, list[float]]:
    """ms per frame of each variant, one value per round; variants interleaved within a round."""
    variants = {name: fn for name, (fn, _) in VARIANTS.items()}
    per_round: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():  # warm the page cache and cv2
        for p in paths:
            fn(p)
    for r in range(rounds):
        order = list(variants.items())
        order = order[r % len(order):] + order[:r % len(order)]
        for name, fn in order:
            t0 = time.perf_counter()
            for p in paths:
                fn(p)
            per_round[name].append((time.perf_counter() - t0) * 1e3 / len(paths))
    return per_round


def _recorded(root: Path, n_rows: int) -> pa.Table:
    """n_rows recorded rows: the dataset's frames, as the worker records them, repeated."""
    ds = discover(root)
    images = [f"{v.folder}/{f}" for v in ds.videos for f in v.files]
    rows: dict[str, list] = {"image": [], "file_size": [], "file_mtime_ns": [], "file_sha256": []}
    for im in images:
        src = read_frame(root / im)[3]
        for k, val in zip(rows, (im, src.size, src.mtime_ns, src.sha256), strict=True):
            rows[k].append(val)
    reps = -(-n_rows // len(images))
    return pa.table({k: v * reps for k, v in rows.items()}).slice(0, n_rows)


def time_check(root: Path, stat_rows: int, content_rows: int, threads: int) -> dict[str, float]:
    """Seconds of changed_frames: stat only over stat_rows, content=True over content_rows."""
    out = {}
    for content, n in ((False, stat_rows), (True, content_rows)):
        recorded = _recorded(root, n)
        t0 = time.perf_counter()
        found = changed_frames(root, recorded, content=content, threads=threads)
        out["content_s" if content else "stat_s"] = round(time.perf_counter() - t0, 2)
        assert not found, found[:3]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--dataset", type=Path, default=SHARED_SAMPLE)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--stat-rows", type=int, default=947_756,
                   help="rows for changed_frames, stat only (default: as many as the release)")
    p.add_argument("--content-rows", type=int, default=5_000,
                   help="rows for changed_frames with content=True (reads and hashes each)")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--json", help="also save the result as docs/results/NAME")
    args = p.parse_args()
    if not (args.dataset / "annotations").is_dir():
        print(f"error: dataset not found at {args.dataset}", file=sys.stderr)
        return 2
    ds = discover(args.dataset)
    paths = [args.dataset / v.folder / f for v in ds.videos for f in v.files]
    load_before = loadavg()
    per_round = time_reads(paths, args.rounds)
    rows = []
    for name, (_, base) in VARIANTS.items():
        ms = statistics.median(per_round[name])
        if base:  # paired: the median of per-round differences, robust to load drifting
            added = statistics.median(a - b for a, b in zip(per_round[name], per_round[base],
                                                            strict=True))
            rows.append([name, f"{ms:.4f}", f"{added:+.4f}", f"{added / MEDIAPIPE_MS:+.3%}"])
        else:
            rows.append([name, f"{ms:.4f}", "", ""])
    print(f"{len(paths)} frames x {args.rounds} rounds, mean file "
          f"{statistics.mean(os.path.getsize(p) for p in paths) / 1024:.1f} KiB, "
          f"load {load_before} -> {loadavg()}")
    print(table(rows, ["variant", "ms/frame (median of rounds)", "added ms/frame (paired)",
                       f"share of a {MEDIAPIPE_MS:g} ms frame"]))
    check = time_check(args.dataset, args.stat_rows, args.content_rows, args.threads)
    print(f"changed_frames, {args.threads} threads, warm cache: stat {args.stat_rows:,} rows in "
          f"{check['stat_s']} s; content {args.content_rows:,} rows in {check['content_s']} s "
          f"({check['content_s'] * 1e3 / max(1, args.content_rows):.3f} ms/frame)")
    if args.json:
        save_json(args.json, {"command": " ".join(sys.argv), "machine": machine(),
                              "frames": len(paths), "rounds": args.rounds,
                              "table": rows, "stat_rows": args.stat_rows,
                              "content_rows": args.content_rows, "check": check})
    return 0


if __name__ == "__main__":
    sys.exit(main())
