"""The plan read back as chunks: which videos each chunk holds, and the task a worker gets for one."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from jobs.events import ChunkTask, VideoRef


@dataclass
class Chunks:
    """chunk -> its videos in output order (videos with a problem are in no chunk)."""

    videos: dict[int, list[VideoRef]]
    root: str
    fingerprint: str

    @classmethod
    def from_plan(cls, plan: pa.Table, root: str, fingerprint: str) -> Chunks:
        out: dict[int, list[VideoRef]] = {}
        cols = plan.select(["chunk", "split", "video", "folder", "files"]).to_pydict()
        for c, split, video, folder, files in zip(*cols.values(), strict=True):
            if c >= 0:
                out.setdefault(c, []).append(VideoRef(split, video, folder, tuple(files)))
        return cls(out, root, fingerprint)

    def frames(self, chunk: int) -> dict[str, int]:
        """video -> frames, for one chunk."""
        return {v.name: len(v.files) for v in self.videos[chunk]}

    def task(self, chunk: int, skip: dict[str, str]) -> ChunkTask:
        return ChunkTask(chunk, self.root, self.fingerprint, tuple(self.videos[chunk]), dict(skip))


def plan_chunks(plan: pa.Table) -> dict[int, dict[str, int]]:
    """chunk -> {video: frames}: what a trusted part of each chunk must hold."""
    out: dict[int, dict[str, int]] = {}
    for c, v, n in zip(plan["chunk"].to_pylist(), plan["video"].to_pylist(),
                       plan["num_frames"].to_pylist(), strict=True):
        if c >= 0:
            out.setdefault(c, {})[v] = n
    return out
