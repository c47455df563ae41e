#!/usr/bin/env python3
"""Summarise a `py-spy record --format raw --idle --subprocesses` profile of a run, per process.

Each sample is put in the first category whose marker appears in its stack (order matters: a
frame read inside extract_video counts as decode, not as the video loop), so the table says
where a worker's wall time goes: imports, graph construction, decode, MediaPipe, landmark copy,
Arrow, part writing, waiting for work.

    py-spy record --idle --subprocesses -r 50 --format raw -o prof.raw -- \\
        .venv/bin/python -m phoenix_keypoints run --dataset ROOT --out RUN --workers-per-gpu 1
    .venv/bin/python scripts/bench/pyspy_summary.py prof.raw
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

CATEGORIES = [
    ("import (mediapipe, cv2, pyarrow)", ("_find_and_load",)),
    ("graph build / close",
     ("new_holistic", "Extractor.close", "close (extract/families/holistic/runner.py")),
    ("tracking reset between videos", ("start_video",)),
    ("PNG read + decode + RGB", ("read_frame",)),
    ("landmarks -> numpy", ("landmarks_to_arrays",)),
    ("MediaPipe process()", ("process (mediapipe",)),
    ("Arrow table build", ("to_table",)),
    ("part write (zstd + fsync)", ("write_part",)),
    ("merge + tensors", ("merge (jobs/run/merge.py",)),
    ("plan (discover + make_plan)", ("prepare (jobs/runner.py",)),
    ("per-frame bookkeeping (rows, progress)", ("extract_video",)),
    ("waiting for a chunk / pipe", ("recv", "wait (multiprocessing", "poll")),
]


def category(stack: str) -> str:
    for name, markers in CATEGORIES:
        if any(m in stack for m in markers):
            return name
    return "other"


def main(path: str) -> None:
    per_proc: dict[str, Counter] = defaultdict(Counter)
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        procs = [f for f in stack.split(";") if f.startswith("process ")]
        kind = "worker" if "spawn_main" in stack else "coordinator"
        key = f"{kind} {procs[-1].split(':')[0].removeprefix('process ')}" if procs else kind
        per_proc[key][category(stack)] += int(count)
    for proc, counts in sorted(per_proc.items()):
        total = sum(counts.values())
        print(f"\n{proc}: {total} samples")
        print("| where | share of wall time |\n|---|---|")
        for name, n in counts.most_common():
            print(f"| {name} | {100 * n / total:.1f}% |")


if __name__ == "__main__":
    main(sys.argv[1])
