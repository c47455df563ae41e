"""Cut the selected videos into chunks: whole videos, contiguous in output order.

Contiguous chunks mean the merged file is the parts concatenated in chunk order, with no sort.
Chunks are handed out in plan order, so their sizes decide how busy the workers stay:
- guided (default): each chunk takes a share of the frames still to come, remaining / (2 x workers),
  capped at MAX_CHUNK_FRAMES (about 50 s of one core: the most a crash can cost) and never less than
  one video. Large chunks first keep the per-chunk cost low; ever smaller chunks toward the end let
  every worker finish within about one video of the others.
- balanced (--chunk-frames N): ceil(total / N) chunks of near-equal frame totals.
The plan is made once and stored in the run folder; a resume with another worker count or on other
nodes uses it as it is, so it finds its parts. When the corpus changes under a run (jobs/run/changes.py),
`extend_plan` re-plans around what is committed: every chunk keeps its number and its parts, and the
videos to extract go into new chunks, so the chunks no longer follow output order (the merge does).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from phoenix_keypoints.extract.corpora.base import Dataset
from phoenix_keypoints.jobs.rundir.parts import KeptPart, Key

MAX_CHUNK_FRAMES = 1000
GUIDED_SHARE = 2  # each chunk takes remaining / (GUIDED_SHARE x workers) frames
LATE_MARGIN = 1.5  # a chunk starts while LATE_MARGIN x workers x its length is still left

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
        # entries of the frame folder that are no frames (extract/sources/folder.py), to be reported
        ("ignored", pa.list_(pa.struct([("name", pa.string()), ("reason", pa.string())]))),
        # the frame source (extract/sources/) `folder` is a locator of, and the first frame taken
        ("source", pa.string()),
        ("start", pa.int32()),
        ("extra", pa.string()),  # other corpus columns as a JSON object, "" when none
        # "path -> target" of the links its frames are read through (extract/sources/links.py)
        ("links", pa.list_(pa.string())),
    ]
)


def _dense(cuts: list[int]) -> list[int]:
    """Renumber chunk ids 0, 1, 2, ... in order (a long video can swallow a whole slot)."""
    dense, last, cur = [], None, -1
    for c in cuts:
        if c != last:
            cur, last = cur + 1, c
        dense.append(cur)
    return dense


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
    return _dense(out)


def guided_cuts(frames: Sequence[int], workers: int, cap: int = MAX_CHUNK_FRAMES) -> list[int]:
    """Chunk index per video, chunk sizes shrinking from `cap` to one video as the end nears."""
    remaining = sum(frames)
    out: list[int] = []
    chunk, size, target = 0, 0, 0.0
    for n in frames:
        if size and size + n / 2 > target:  # the video's midpoint would overshoot: next chunk
            chunk, size = chunk + 1, 0
        if size == 0:
            target = min(cap, remaining / (GUIDED_SHARE * max(1, workers)))
        out.append(chunk)
        size += n
        remaining -= n
    return out


def make_plan(dataset: Dataset, workers: int, chunk_frames: int | None = None) -> pa.Table:
    """One row per selected video, in output order, with its chunk (or -1 and the problem)."""
    ok = [v for v in dataset.videos if not v.problem]
    sizes = [v.num_frames for v in ok]
    cuts = iter(balanced_cuts(sizes, chunk_frames) if chunk_frames else guided_cuts(sizes, workers))
    rows: dict[str, list] = {name: [] for name in PLAN_SCHEMA.names}
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
        rows["source"].append(v.source)
        rows["start"].append(v.start)
        rows["extra"].append(v.extra)
        rows["links"].append(list(v.links))
    return pa.table(rows, schema=PLAN_SCHEMA)


def handout_order(frames: dict[int, int], workers: int) -> list[int]:
    """The order chunks are handed out in: plan order, with long chunks pulled forward.

    Plan order hands out the largest chunks first (guided sizes shrink along it) and lets the merge
    beside the run write parts as they come. But a chunk must not start so late that the other
    workers run out of work before it ends: one that starts when R frames are left (after it) ends
    last unless its length is at most R / workers. So each chunk is handed out no later than the
    point where LATE_MARGIN x workers x its length is still left; most chunks keep their place,
    and only the long single videos of the end move earlier.
    """
    order = sorted(frames)
    total = sum(frames.values())
    key: dict[int, float] = {}
    start = 0
    for c in order:
        key[c] = min(start, max(0.0, total - LATE_MARGIN * max(1, workers) * frames[c]))
        start += frames[c]
    return sorted(order, key=lambda c: (key[c], c))


def cuts_digest(plan: pa.Table) -> str:
    """Which video is in which chunk, as a digest: part of the run's fingerprint."""
    h = hashlib.sha256()
    for c, v in zip(plan["chunk"].to_pylist(), plan["video"].to_pylist(), strict=True):
        h.update(f"{c}\0{v}\0".encode())
    return h.hexdigest()


# --- a plan extended around committed parts (the corpus changed under the run) -------------------
PLAN_META = b"phoenix_keypoints.plan"
@dataclass
class PlanRecord:
    """What a plan says of itself (its Parquet metadata): the run fingerprint it was made under,
    its kept parts, and the change that made it (run.json's `changes` entry, written here first
    so that a re-plan stopped before run.json is completed with its history)."""

    fingerprint: str = ""  # "" in a plan made before it was recorded
    kept: dict[int, KeptPart] = field(default_factory=dict)
    change: dict | None = None


def plan_record(plan: pa.Table) -> PlanRecord:
    raw = (plan.schema.metadata or {}).get(PLAN_META)
    if not raw:
        return PlanRecord()
    meta = json.loads(raw)
    kept = {int(c): KeptPart(k["fingerprint"], tuple((s, v, int(n)) for s, v, n in k["dropped"]))
            for c, k in meta.get("kept", {}).items()}
    return PlanRecord(str(meta.get("fingerprint", "")), kept, meta.get("change"))


def with_record(plan: pa.Table, record: PlanRecord) -> pa.Table:
    """The plan with its record in its metadata (saved with it, in the same atomic write)."""
    meta = {"fingerprint": record.fingerprint, "change": record.change,
            "kept": {str(c): {"fingerprint": k.fingerprint, "dropped": [list(d) for d in k.dropped]}
                     for c, k in sorted(record.kept.items())}}
    return plan.replace_schema_metadata({**(plan.schema.metadata or {}),
                                         PLAN_META: json.dumps(meta, sort_keys=True).encode()})


@dataclass
class Extension:
    """What a re-plan did with the old plan's chunks."""

    kept: dict[int, KeptPart]  # kept chunks whose part was made under an earlier plan
    new_chunks: list[int]
    retired: list[int]  # old chunks none of whose videos is left as it was


def _held(old: pa.Table, fingerprint: str, kept: dict[int, KeptPart], parts: dict[int, str]
          ) -> dict[int, list[tuple[str, str, int]]]:
    """chunk -> (split, video, frames) its committed part holds (parts: chunk -> the fingerprint
    its part carries; a part of a fingerprint the plan does not know holds nothing usable)."""
    rows: dict[int, list[tuple[str, str, int]]] = {}
    for c, s, v, n in zip(*(old[k].to_pylist() for k in ("chunk", "split", "video", "num_frames")),
                          strict=True):
        if c >= 0:
            rows.setdefault(c, []).append((s, v, n))
    held = {}
    for c, fp in parts.items():
        if fp == fingerprint:
            held[c] = rows.get(c, [])
        elif c in kept and fp == kept[c].fingerprint:
            held[c] = rows.get(c, []) + list(kept[c].dropped)
    return held


def _new_cuts(frames: Sequence[int], runs: Sequence[int], workers: int,
              chunk_frames: int | None) -> list[int]:
    """Chunk index per new video: cut as a plan cuts, and never across a run (new videos that
    follow each other in output order), so a new chunk is contiguous in output order."""
    cuts = balanced_cuts(frames, chunk_frames) if chunk_frames else guided_cuts(frames, workers)
    out, last = [], None
    for key in zip(runs, cuts, strict=True):
        if key != last:
            out.append(out[-1] + 1 if out else 0)
            last = key
        else:
            out.append(out[-1])
    return out


def extend_plan(old: pa.Table, new: pa.Table, redo: set[Key], parts: dict[int, str],
                fingerprint: str, workers: int, chunk_frames: int | None = None
                ) -> tuple[pa.Table, Extension]:
    """The plan `new` (the corpus as it is now, make_plan's rows) cut around the old plan's chunks.

    A video of `new` that is in the old plan, in a chunk, and not in `redo` (its frames are what
    they were) stays in its chunk under the same number; every other video of `new` with frames
    goes into a new chunk, numbered after the old ones. parts: chunk -> the fingerprint its
    committed part carries; fingerprint: the run fingerprint the old plan was made under.
    """
    kept_before = plan_record(old).kept
    where = {(s, v): c for s, v, c in zip(old["split"].to_pylist(), old["video"].to_pylist(),
                                         old["chunk"].to_pylist(), strict=True) if c >= 0}
    keys = list(zip(new["split"].to_pylist(), new["video"].to_pylist(), strict=True))
    chunk = [-1] * len(keys)
    pending, runs, run = [], [], 0
    for i, (key, c) in enumerate(zip(keys, new["chunk"].to_pylist(), strict=True)):
        if c < 0:
            continue
        if key in where and key not in redo:
            chunk[i], run = where[key], run + 1
        else:
            pending.append(i)
            runs.append(run)
    frames = new["num_frames"].to_pylist()
    first = max(where.values(), default=-1) + 1
    cuts = _new_cuts([frames[i] for i in pending], runs, workers, chunk_frames)
    for i, c in zip(pending, cuts, strict=True):
        chunk[i] = first + c
    plan = new.set_column(new.schema.get_field_index("chunk"), "chunk", pa.array(chunk, pa.int32()))
    now = {(keys[i], c) for i, c in enumerate(chunk) if c >= 0}
    kept = {}
    for c, holds in _held(old, fingerprint, kept_before, parts).items():
        if any(((s, v), c) in now for s, v, _ in holds):
            kept[c] = KeptPart(parts[c], tuple(t for t in holds if ((t[0], t[1]), c) not in now))
    survivors = {c for _, c in now}
    return plan, Extension(kept, sorted({first + c for c in cuts}),
                           sorted(set(where.values()) - survivors))
