"""Temp Parquet parts: one per chunk, committed by an atomic rename, checked before they are trusted.

A part is committed when `parts/chunk-NNNNNN.parquet` exists: it is written under a temp name,
fsynced and renamed, so a crash leaves no half part under the final name. On resume a part is
trusted only if its footer reads, it was written for this run (fingerprint in its metadata), its
chunk is the one its name says, and its row count matches the plan. A chunk kept by a re-plan
(jobs.run.plan.KeptPart) also trusts the part made under the earlier plan, which may hold rows of
videos that left the chunk since: they are counted out here and left out by the merge. Page
checksums let the merge, which reads every page, catch corruption inside a part whose footer
survived.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_FAMILY, declaration_of_schema
from phoenix_keypoints.extract.keypoints.filemeta import read_parquet
from phoenix_keypoints.jobs import faults
from phoenix_keypoints.jobs.rundir.folder import NotAFile, RunDir, fsync_dir, open_regular

META_KEY = b"phoenix_keypoints"
TEMP_GLOB = ".chunk-*.tmp"


Key = tuple[str, str]  # (split, video): a name can be in two splits


@dataclass(frozen=True)
class KeptPart:
    """A chunk kept by a re-plan whose committed part was made under an earlier plan.

    Its part carries that plan's run fingerprint and may hold rows of videos that have left the
    chunk since (removed, moved or with other frames now): `dropped`, as (split, video, frames).
    The part stays trusted for what it holds, and the merge leaves the dropped rows out; a part
    made for the chunk as it is now carries the run's own fingerprint and holds no dropped rows.
    """

    fingerprint: str
    dropped: tuple[tuple[str, str, int], ...] = ()

    def holds(self, videos: dict[str, int]) -> dict[str, int]:
        """{video: frames} such a part holds: the chunk's videos and the dropped ones."""
        out = dict(videos)
        for _, video, n in self.dropped:
            out[video] = out.get(video, 0) + n
        return out


@dataclass
class PartInfo:
    """What a part's footer says: its chunk, rows, failed videos and how its frames went.

    `statuses` and `not_ok` are counted by the worker from the rows it writes, so `status` and the
    merge record can say how many frames were not ok, and where, without reading a page.
    """

    chunk: int
    rows: int
    failed: dict[str, str] = field(default_factory=dict)  # video -> why it has no rows
    statuses: dict[str, int] = field(default_factory=dict)  # row status -> rows
    not_ok: dict[str, int] = field(default_factory=dict)  # video -> rows whose status is not ok
    # the estimator settings its rows were made with; the footer keeps them under its family's
    # name (the default family's are its options, as before; another family's settings name it).
    # Parts written before kept every family's under the default family's name: read as well
    settings: dict = field(default_factory=dict)
    # (split, video)s whose rows it holds but the chunk no longer has (a KeptPart's dropped videos);
    # the counts above leave them out
    dropped: frozenset[Key] = frozenset()
    # the versions its values depend on, as its worker had them (extract.keypoints.versions); empty
    # in a part written before parts recorded them
    versions: dict[str, str] = field(default_factory=dict)
    # how a batching family's values were computed (extract.keypoints.execution: device, GPU,
    # provider and options, batch shape); empty for other families and older parts
    execution: dict = field(default_factory=dict)

    @classmethod
    def of_rows(cls, chunk: int, videos: Sequence[str], statuses: Sequence[str],
                failed: dict[str, str], settings: dict | None = None,
                versions: dict[str, str] | None = None,
                execution: dict | None = None) -> PartInfo:
        """The footer of a part holding these rows (one video and status per row)."""
        bad = Counter(v for v, s in zip(videos, statuses, strict=True) if s != "ok")
        return cls(chunk, len(statuses), dict(failed), dict(Counter(statuses)), dict(bad),
                   dict(settings or {}), versions=dict(versions or {}),
                   execution=dict(execution or {}))


def write_part(path: Path, table: pa.Table, info: PartInfo, fingerprint: str) -> None:
    """Write a chunk's rows and commit them with one rename; on any error no part is left."""
    written = declaration_of_schema(table.schema)
    assert written is not None, "a part's rows are an estimator's table"
    meta = {"fingerprint": fingerprint, "chunk": info.chunk, "rows": info.rows,
            "failed": info.failed, "statuses": info.statuses, "not_ok": info.not_ok,
            written.name: info.settings, "versions": info.versions,
            **({"execution": info.execution} if info.execution else {})}
    table = table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
    try:
        faults.before_write(info.chunk, tmp)
        with open(tmp, "wb") as f:
            pq.write_table(table, f, row_group_size=max(1, table.num_rows),
                           **written.write_options())
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
        with open_regular(path) as f:  # a FIFO or a device in a part's place is refused, not read
            md = pq.read_metadata(f)
    except NotAFile as e:
        raise ValueError(str(e).removeprefix(f"{path}: ")) from None
    except (OSError, pa.ArrowException) as e:
        raise ValueError(f"footer unreadable ({e})") from None
    raw = (md.metadata or {}).get(META_KEY)
    if raw is None:
        raise ValueError("not a phoenix-keypoints part (no metadata)")
    schema = md.schema.to_arrow_schema().remove_metadata()
    written = declaration_of_schema(schema)
    try:
        meta = json.loads(raw)
        key = written.name if written is not None and written.name in meta else DEFAULT_FAMILY
        info = PartInfo(int(meta["chunk"]), int(meta["rows"]), dict(meta.get("failed") or {}),
                        _counts(meta.get("statuses")), _counts(meta.get("not_ok")),
                        dict(meta.get(key) or {}),
                        versions=_strings(meta.get("versions") or {}),
                        execution=_record(meta.get("execution") or {}))
        fingerprint = str(meta["fingerprint"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"metadata unreadable ({e})") from None
    if md.num_rows != info.rows:
        raise ValueError(f"{md.num_rows} rows, metadata says {info.rows}")
    if sum(info.statuses.values()) != info.rows:
        raise ValueError(f"status counts add up to {sum(info.statuses.values())} rows, not "
                         f"{info.rows}")
    if written is None:
        raise ValueError("schema differs from this version's")
    return info, fingerprint


def _counts(raw: object) -> dict[str, int]:
    """A {name: count} of a footer, checked (a TypeError or ValueError says it is not one)."""
    if not isinstance(raw, dict):
        raise TypeError(f"counts {raw!r} are not an object")
    return {str(k): int(v) for k, v in raw.items()}


def _record(raw: object) -> dict:
    """A footer's execution record, checked to be an object (a TypeError says it is not one)."""
    if not isinstance(raw, dict):
        raise TypeError("execution is not an object")
    return dict(raw)


def _strings(raw: object) -> dict[str, str]:
    """A {name: text} of a footer, checked (a TypeError says it is not one)."""
    if not isinstance(raw, dict):
        raise TypeError("versions are not an object")
    return {str(k): str(v) for k, v in raw.items()}


def check_part(path: Path, chunk: int, fingerprint: str, video_frames: dict[str, int],
               kept: KeptPart | None = None) -> tuple[PartInfo | None, str]:
    """(info, "") when the part can be trusted for this chunk of this run, else (None, why).

    kept: the chunk was kept by a re-plan; a part of the plan it was made under is trusted too,
    and its info counts only the rows of the chunk's videos (`dropped` names the others)."""
    try:
        info, fp = read_part_info(path)
    except ValueError as e:
        return None, str(e)
    earlier = kept is not None and fp == kept.fingerprint and fp != fingerprint
    if fp != fingerprint and not earlier:
        return None, "written by another run (other dataset or options)"
    if info.chunk != chunk:
        return None, f"holds chunk {info.chunk}, not {chunk}"
    holds = kept.holds(video_frames) if earlier and kept is not None else video_frames
    unknown = set(info.failed) - set(holds)
    if unknown:
        return None, f"names videos not in this chunk: {sorted(unknown)[:3]}"
    expected = sum(n for v, n in holds.items() if v not in info.failed)
    if info.rows != expected:
        return None, f"{info.rows} rows, the plan expects {expected}"
    if earlier and kept is not None and kept.dropped:
        return _without(path, info, {(s, v) for s, v, _ in kept.dropped}), ""
    return info, ""


def _without(path: Path, info: PartInfo, dropped: set[Key]) -> PartInfo:
    """A kept part's info counting only the rows of its chunk's videos (reads 3 small columns)."""
    try:
        t = read_parquet(path, columns=["split", "video", "status"])
    except (OSError, pa.ArrowException):
        return info  # unreadable beyond its footer: the merge's checksums find it
    keep = [(s, v) not in dropped for s, v in zip(t["split"].to_pylist(), t["video"].to_pylist(),
                                                  strict=True)]
    t = t.filter(pa.array(keep, pa.bool_()))
    gone = {v for _, v in dropped}
    out = PartInfo.of_rows(info.chunk, t["video"].to_pylist(), t["status"].to_pylist(),
                           {v: why for v, why in info.failed.items() if v not in gone},
                           info.settings, info.versions, info.execution)
    out.dropped = frozenset(dropped)
    return out


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
