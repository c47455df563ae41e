"""The plan read back as chunks: which videos each chunk holds, and the task a worker gets for one."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.frames import MAX_PIXELS, MAX_SCANS
from phoenix_keypoints.jobs.schedule.events import ChunkTask, VideoRef


class Chunks:
    """chunk -> its videos in output order (videos with a problem are in no chunk).

    Built from the plan's small columns only; a chunk's frame file names (the plan's bulk: 947,756
    names at full scale) are read when its task is made, so a coordinator is ready in a second.
    """

    def __init__(self, plan: pa.Table, root: str, fingerprint: str,
                 max_pixels: int = MAX_PIXELS, max_scans: int = MAX_SCANS,
                 versions: dict[str, str] | None = None) -> None:
        self.plan, self.root, self.fingerprint = plan, root, fingerprint
        self.max_pixels, self.max_scans = max_pixels, max_scans
        self.versions = dict(versions or {})  # the run's, every worker's (ChunkTask.versions)
        self.execution: dict = {}  # how the run's values are computed (ChunkTask.execution)
        chunk = plan["chunk"].to_numpy()
        rows = np.argsort(chunk, kind="stable")
        ids, starts = np.unique(chunk[rows], return_index=True)
        bounds = np.r_[starts, len(rows)]
        self.rows = {int(c): rows[bounds[i]:bounds[i + 1]] for i, c in enumerate(ids) if c >= 0}
        self._frames = plan["num_frames"].to_numpy()

    @classmethod
    def from_plan(cls, plan: pa.Table, root: str, fingerprint: str, max_pixels: int = MAX_PIXELS,
                  max_scans: int = MAX_SCANS, versions: dict[str, str] | None = None) -> Chunks:
        return cls(plan, root, fingerprint, max_pixels, max_scans, versions)

    def __iter__(self) -> Iterator[int]:
        return iter(self.rows)

    def frames(self, chunk: int) -> int:
        return int(self._frames[self.rows[chunk]].sum())

    def videos(self, chunk: int) -> list[VideoRef]:
        rows = self.plan.take(self.rows[chunk])
        cols = rows.select(["split", "video", "folder", "files", "num_frames"]).to_pydict()
        n = rows.num_rows
        source = rows["source"].to_pylist() if "source" in rows.column_names else ["folder"] * n
        start = rows["start"].to_pylist() if "start" in rows.column_names else [0] * n
        return [VideoRef(s, v, f, tuple(files), src, st, count) for s, v, f, files, count, src, st in
                zip(*cols.values(), source, start, strict=True)]

    def task(self, chunk: int, skip: dict[str, str]) -> ChunkTask:
        return ChunkTask(chunk, self.root, self.fingerprint, tuple(self.videos(chunk)), dict(skip),
                         self.max_pixels, self.max_scans, self.versions, self.execution)


def plan_chunks(plan: pa.Table) -> dict[int, dict[str, int]]:
    """chunk -> {video: frames}: what a trusted part of each chunk must hold."""
    out: dict[int, dict[str, int]] = {}
    for c, v, n in zip(plan["chunk"].to_pylist(), plan["video"].to_pylist(),
                       plan["num_frames"].to_pylist(), strict=True):
        if c >= 0:
            out.setdefault(c, {})[v] = n
    return out


def merge_order(plan: pa.Table) -> list[tuple[int, tuple[tuple[str, str], ...]]]:
    """The output in plan order as (chunk, its (split, video)s) runs: what the merge takes from
    which part, in turn. One run per chunk, in chunk order, unless a re-plan put new chunks among
    the old ones (jobs.run.plan.extend_plan): then a chunk's videos may come in several runs."""
    runs: list[tuple[int, list[tuple[str, str]]]] = []
    for c, s, v in zip(plan["chunk"].to_pylist(), plan["split"].to_pylist(),
                       plan["video"].to_pylist(), strict=True):
        if c < 0:
            continue
        if runs and runs[-1][0] == c:
            runs[-1][1].append((s, v))
        else:
            runs.append((c, [(s, v)]))
    return [(c, tuple(keys)) for c, keys in runs]
