"""Cut the selected videos into chunks: whole videos, contiguous in output order, balanced by frames.

Contiguous chunks mean the merged file is the parts concatenated in chunk order, with no sort. The
cut depends only on the dataset and --chunk-frames, never on the worker count, so a run can resume
with another number of workers (or on another node) and still find its parts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyarrow as pa

from extract.dataset import Dataset

PLAN_SCHEMA = pa.schema(
    [
        ("chunk", pa.int32()),  # -1: not processed (problem says why)
        ("split", pa.string()),
        ("video", pa.string()),
        ("folder", pa.string()),
        ("files", pa.list_(pa.string())),
        ("num_frames", pa.int32()),
        ("speaker", pa.string()),
        ("gloss", pa.string()),
        ("translation", pa.string()),
        ("problem", pa.string()),
        # entries of the frame folder that are no frames (extract/dataset.py), to be reported
        ("ignored", pa.list_(pa.struct([("name", pa.string()), ("reason", pa.string())]))),
    ]
)


def balanced_cuts(frames: Sequence[int], target: int) -> list[int]:
    """Chunk index per video: ceil(total/target) contiguous chunks of near-equal frame totals.

    A video goes to the chunk its frame-midpoint falls in, so no chunk is empty and each is within
    one video's length of total/k.
    """
    total = sum(frames)
    if total == 0:
        return [0] * len(frames)
    k = max(1, min(len(frames), math.ceil(total / max(1, target))))
    size = total / k
    out, seen = [], 0
    for n in frames:
        out.append(min(k - 1, int((seen + n / 2) // size)))
        seen += n
    # Renumber so chunk ids are dense (a long video can swallow a whole slot).
    dense, last, cur = [], None, -1
    for c in out:
        if c != last:
            cur, last = cur + 1, c
        dense.append(cur)
    return dense


def make_plan(dataset: Dataset, chunk_frames: int) -> pa.Table:
    """One row per selected video, in output order, with its chunk (or -1 and the problem)."""
    ok = [v for v in dataset.videos if not v.problem]
    cuts = iter(balanced_cuts([v.num_frames for v in ok], chunk_frames))
    rows = {name: [] for name in PLAN_SCHEMA.names}
    for v in dataset.videos:
        rows["chunk"].append(-1 if v.problem else next(cuts))
        rows["split"].append(v.split)
        rows["video"].append(v.name)
        rows["folder"].append(v.folder)
        rows["files"].append(list(v.files))
        rows["num_frames"].append(v.num_frames)
        rows["speaker"].append(v.speaker)
        rows["gloss"].append(v.gloss)
        rows["translation"].append(v.translation)
        rows["problem"].append(v.problem)
        rows["ignored"].append([{"name": n, "reason": r} for n, r in v.ignored])
    return pa.table(rows, schema=PLAN_SCHEMA)
