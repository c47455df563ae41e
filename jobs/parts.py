"""Temp Parquet parts: one per chunk, committed by an atomic rename, checked before they are trusted.

A part is committed when `parts/chunk-NNNNNN.parquet` exists: it is written under a temp name,
fsynced and renamed, so a crash leaves no half part under the final name. On resume a part is
trusted only if its footer reads, it was written for this run (fingerprint in its metadata), its
chunk is the one its name says, and its row count matches the plan. Page checksums let the merge,
which reads every page, catch corruption inside a part whose footer survived.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from extract.schema import SCHEMA, parquet_write_options
from jobs import faults
from jobs.rundir import RunDir, fsync_dir

META_KEY = b"phoenix_keypoints"
TEMP_GLOB = ".chunk-*.tmp"


@dataclass
class PartInfo:
    chunk: int
    rows: int
    failed: dict[str, str] = field(default_factory=dict)  # video -> why it has no rows


def write_part(path: Path, table: pa.Table, info: PartInfo, fingerprint: str) -> None:
    """Write a chunk's rows and commit them with one rename; on any error no part is left."""
    meta = {"fingerprint": fingerprint, "chunk": info.chunk, "rows": info.rows,
            "failed": info.failed}
    table = table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
    try:
        faults.before_write(info.chunk, tmp)
        with open(tmp, "wb") as f:
            pq.write_table(table, f, row_group_size=max(1, table.num_rows),
                           **parquet_write_options())
            f.flush()
            os.fsync(f.fileno())
        faults.before_commit()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def read_part_info(path: Path) -> tuple[PartInfo, str]:
    """(info, fingerprint) from a part's footer; raises ValueError when it is not one of ours."""
    try:
        md = pq.read_metadata(path)
    except (OSError, pa.ArrowException) as e:
        raise ValueError(f"footer unreadable ({e})") from None
    raw = (md.metadata or {}).get(META_KEY)
    if raw is None:
        raise ValueError("not a phoenix-keypoints part (no metadata)")
    try:
        meta = json.loads(raw)
        info = PartInfo(int(meta["chunk"]), int(meta["rows"]), dict(meta.get("failed") or {}))
        fingerprint = str(meta["fingerprint"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"metadata unreadable ({e})") from None
    if md.num_rows != info.rows:
        raise ValueError(f"{md.num_rows} rows, metadata says {info.rows}")
    if not md.schema.to_arrow_schema().remove_metadata().equals(SCHEMA):
        raise ValueError("schema differs from this version's")
    return info, fingerprint


def check_part(
    path: Path, chunk: int, fingerprint: str, video_frames: dict[str, int]
) -> tuple[PartInfo | None, str]:
    """(info, "") when the part can be trusted for this chunk of this run, else (None, why)."""
    try:
        info, fp = read_part_info(path)
    except ValueError as e:
        return None, str(e)
    if fp != fingerprint:
        return None, "written by another run (other dataset or options)"
    if info.chunk != chunk:
        return None, f"holds chunk {info.chunk}, not {chunk}"
    unknown = set(info.failed) - set(video_frames)
    if unknown:
        return None, f"names videos not in this chunk: {sorted(unknown)[:3]}"
    expected = sum(n for v, n in video_frames.items() if v not in info.failed)
    if info.rows != expected:
        return None, f"{info.rows} rows, the plan expects {expected}"
    return info, ""


def reject(rd: RunDir, path: Path, why: str) -> Path:
    """Move an untrusted part aside (never delete what a user may want to inspect)."""
    rd.rejected_dir.mkdir(parents=True, exist_ok=True)
    dest = rd.rejected_dir / path.name
    n = 1
    while dest.exists():
        dest = rd.rejected_dir / f"{path.stem}.{n}{path.suffix}"
        n += 1
    shutil.move(str(path), dest)
    dest.with_name(dest.name + ".why").write_text(why + "\n")
    return dest


def remove_stale_temps(rd: RunDir, chunks: set[int]) -> list[Path]:
    """Temp parts of these chunks left by a killed worker: never valid, safe to remove.

    Only the caller's own chunks: other SLURM shards may be writing theirs into the same folder.
    """
    stale = []
    for p in sorted(rd.parts_dir.glob(TEMP_GLOB)) if rd.parts_dir.is_dir() else []:
        try:
            chunk = int(p.name.split(".")[1].removeprefix("chunk-"))
        except (IndexError, ValueError):
            continue
        if chunk in chunks:
            p.unlink(missing_ok=True)
            stale.append(p)
    return stale
