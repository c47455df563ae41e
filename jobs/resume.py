"""The resume scan: which chunks of the plan already have a part that can be trusted.

Nothing else records completion: a chunk is done when its part passes jobs.parts.check_part, so any
process on any node that sees the run folder reaches the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from jobs.chunks import plan_chunks
from jobs.parts import PartInfo, check_part, reject
from jobs.rundir import RunDir
from jobs.runinfo import RunInfo


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

    @property
    def frames_total(self) -> int:
        return sum(sum(v.values()) for v in self.chunks.values())

    def chunk_frames(self, chunk: int) -> int:
        return sum(self.chunks[chunk].values())


def scan_parts(rd: RunDir, info: RunInfo, plan: pa.Table, only: set[int] | None = None,
               move_bad: bool = True) -> PartsState:
    """Check every committed part (of chunks `only`) against the plan: footer, fingerprint, rows.

    Parts that fail are moved to parts/rejected/ with a .why file (move_bad) and counted missing.
    """
    state = PartsState(plan_chunks(plan))
    for chunk, videos in state.chunks.items():
        if only is not None and chunk not in only:
            continue
        path = rd.part_path(chunk)
        if not path.exists():
            continue
        part, why = check_part(path, chunk, info.fingerprint, videos)
        if part is None:
            state.rejected[chunk] = why
            if move_bad:
                reject(rd, path, why)
        else:
            state.done[chunk] = part
    return state
