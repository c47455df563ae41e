"""Merge committed parts into ONE keypoints.parquet, then write the model-input tensors.

Chunks are contiguous in output order, so the merged file is the parts appended in chunk order:
a stream with one part in memory at a time, whatever the dataset's size. Every page is read with
its checksum verified; a part that fails is moved aside and named, and `run` redoes it.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from extract.schema import SCHEMA, parquet_write_options
from extract.tensors import write_tensors
from jobs.outputs import corpus_from_plan
from jobs.parts import PartInfo, check_part, reject
from jobs.rundir import RunDir, RunError, fsync_dir
from jobs.shards import array_expr, shard_state


class CorruptPart(RunError):
    """A committed part failed its checksums while merging; it was moved aside."""

    def __init__(self, message: str, chunk: int, why: str = "") -> None:
        super().__init__(message)
        self.chunk = chunk
        self.why = why or message


@dataclass
class PartsState:
    """Which chunks of the plan have a trusted part, and what is missing or failed."""

    chunks: dict[int, dict[str, int]]  # chunk -> {video: frames}
    done: dict[int, PartInfo] = field(default_factory=dict)
    rejected: dict[int, str] = field(default_factory=dict)  # chunk -> why its part was refused

    @property
    def missing(self) -> list[int]:
        return sorted(set(self.chunks) - set(self.done))

    @property
    def failed(self) -> dict[str, str]:
        return {v: why for info in self.done.values() for v, why in info.failed.items()}

    @property
    def frames_done(self) -> int:
        return sum(info.rows for info in self.done.values())


def plan_chunks(plan: pa.Table) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for c, v, n in zip(plan["chunk"].to_pylist(), plan["video"].to_pylist(),
                       plan["num_frames"].to_pylist(), strict=True):
        if c >= 0:
            out.setdefault(c, {})[v] = n
    return out


def scan_parts(rd: RunDir, meta: dict[str, Any], plan: pa.Table,
               only: set[int] | None = None, move_bad: bool = True) -> PartsState:
    """Check every committed part against the plan (footer, fingerprint, rows).

    Parts that fail are moved to parts/rejected/ with a .why file (move_bad) and counted missing.
    """
    state = PartsState(plan_chunks(plan))
    for chunk, videos in state.chunks.items():
        if only is not None and chunk not in only:
            continue
        path = rd.part_path(chunk)
        if not path.exists():
            continue
        info, why = check_part(path, chunk, meta["fingerprint"], videos)
        if info is None:
            state.rejected[chunk] = why
            if move_bad:
                reject(rd, path, why)
        else:
            state.done[chunk] = info
    return state


def _read_part(path: Path) -> pa.Table:
    """A committed part's rows, every page's checksum verified, without our footer metadata."""
    table = pq.ParquetFile(path, page_checksum_verification=True).read()
    return table.replace_schema_metadata(None)


def merge(rd: RunDir, allow_partial: bool = False) -> dict[str, Any]:
    """Write keypoints.parquet and tensors/ from the parts; refuse gaps unless allow_partial."""
    meta = rd.load()
    plan = rd.load_plan()
    state = scan_parts(rd, meta, plan)
    missing, failed = state.missing, state.failed
    if (missing or failed) and not allow_partial:
        bits = []
        num_shards = meta.get("num_shards", 1)
        todo = f"Run `phoenix-keypoints run --out {rd.path}` to finish it"
        if missing and num_shards > 1:
            shards = shard_state(state.chunks, state.done, num_shards)
            ids = sorted(shards.missing)
            bits.append(f"{len(ids)} of {num_shards} shard(s) not complete: "
                        f"{', '.join(map(str, ids[:20]))}{' ...' if len(ids) > 20 else ''} "
                        f"({len(missing)} chunk(s) missing)")
            todo = (f"Resubmit them (sbatch --array={array_expr(ids)}): `phoenix-keypoints slurm "
                    f"--out {rd.path} --num-shards {num_shards} --submit`, or finish on one node "
                    f"with `phoenix-keypoints run --out {rd.path}`")
        elif missing:
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            bits.append(f"{len(missing)} chunk(s) not done ({shown})")
        if failed:
            bits.append(f"{len(failed)} video(s) failed ({', '.join(sorted(failed)[:5])})")
        if state.rejected:
            bits.append("untrusted part(s) moved to parts/rejected/: " + ", ".join(
                f"chunk {c} ({why})" for c, why in sorted(state.rejected.items())[:5]))
        steps = [todo] if missing else []
        if failed:
            steps.append("fix the failed videos' frames, then `phoenix-keypoints run --out "
                         f"{rd.path} --retry-failed` redoes them")
        raise RunError(
            f"cannot merge {rd.path}: {'; '.join(bits)}. {'; '.join(steps)}. Or merge with "
            "--allow-partial to write what there is (run.json's merge section then lists what "
            "is missing)."
        )
    t0 = time.monotonic()
    tmp = rd.keypoints_path.with_name(".keypoints.parquet.tmp")
    rows = 0
    chunks = sorted(state.done)
    try:
        # One part is read (decompressed, checksums verified) in a thread while the previous one
        # is encoded: pyarrow releases the GIL, so on 2+ cores the read costs no wall time.
        with ThreadPoolExecutor(1) as pool, \
                pq.ParquetWriter(tmp, SCHEMA, **parquet_write_options()) as w:
            ahead = pool.submit(_read_part, rd.part_path(chunks[0])) if chunks else None
            for i, chunk in enumerate(chunks):
                path = rd.part_path(chunk)
                try:
                    table = ahead.result()
                except (OSError, pa.ArrowException) as e:
                    dest = reject(rd, path, f"unreadable while merging: {e}")
                    raise CorruptPart(
                        f"part of chunk {chunk} is corrupt ({e}); moved to {dest}. Run "
                        f"`phoenix-keypoints run --out {rd.path}` to redo it.", chunk,
                        f"part of chunk {chunk} is corrupt ({e}); moved to {dest}") from None
                if i + 1 < len(chunks):
                    ahead = pool.submit(_read_part, rd.part_path(chunks[i + 1]))
                w.write_table(table, row_group_size=max(1, table.num_rows))
                rows += table.num_rows
                del table
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        if "merge" in meta:  # the record describes the old outputs: gone until this one is done
            rd.update(merge=None)
        os.replace(tmp, rd.keypoints_path)
        fsync_dir(rd.path)
        per_split = write_tensors(rd.keypoints_path, rd.tensors_dir, corpus_from_plan(plan))
    except OSError as e:  # disk full, quota, permissions: nothing half-written is left as done
        raise RunError(
            f"cannot write the merged outputs in {rd.path} ({e}). Free space or fix permissions, "
            f"then run `phoenix-keypoints merge --out {rd.path}` (or the same `run`) again."
        ) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    result = {
        "time": time.time(),
        "seconds": round(time.monotonic() - t0, 3),
        "rows": rows,
        "frames_per_split": per_split,
        "partial": bool(missing or failed),
        "missing_chunks": missing,
        "missing_videos": sorted(v for c in missing for v in state.chunks[c]),
        "failed_videos": failed,
    }
    rd.update(merge=result)
    return result
