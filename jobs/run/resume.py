"""The resume scan: which chunks of the plan already have a part that can be trusted.

Nothing else records completion: a chunk is done when its part passes jobs.rundir.parts.check_part,
so any process on any node that sees the run folder reaches the same answer. A resume also stats the
frames each part was made from (jobs.rundir.stale): a part made from a frame that has changed since
is not trusted, and only its chunk is redone. `status` skips that check to stay cheap.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from phoenix_keypoints.jobs.run.plan import plan_record
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.parts import PartInfo, check_part, reject
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo
from phoenix_keypoints.jobs.rundir.stale import describe, stale_parts
from phoenix_keypoints.jobs.schedule.chunks import plan_chunks

WORST = 10  # videos named as those with the most frames not ok


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

    @property
    def statuses(self) -> dict[str, int]:
        """Rows per status in the trusted parts, from their footers (most first)."""
        return _ranked(info.statuses for info in self.done.values())

    def worst_videos(self, n: int = WORST) -> dict[str, int]:
        """The n videos with the most frames not ok: {video: frames}, most first."""
        return _ranked((info.not_ok for info in self.done.values()), n)


def _ranked(counts: Iterable[dict[str, int]], n: int | None = None) -> dict[str, int]:
    """The counts summed, most first (ties by name, so the order never depends on the parts')."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:n])


def scan_parts(rd: RunDir, info: RunInfo, plan: pa.Table, move_bad: bool = True,
               check_frames: bool = False) -> PartsState:
    """Check every committed part against the plan: footer, fingerprint, rows.

    check_frames (a resume): also stat the frames each part was made from; a part with a frame
    that changed since is not trusted. Parts that fail are moved to parts/rejected/ with a .why
    file (move_bad) and counted missing.
    """
    state = PartsState(plan_chunks(plan))
    kept = plan_record(plan).kept
    for chunk, videos in state.chunks.items():
        path = rd.part_path(chunk)
        if not path.exists():
            continue
        part, why = check_part(path, chunk, info.fingerprint, videos, kept.get(chunk))
        if part is None:
            state.rejected[chunk] = why
            if move_bad:
                reject(rd, path, why)
        else:
            state.done[chunk] = part
    if check_frames and state.done:
        _untrust_changed(rd, info, state, move_bad)
    return state


def _untrust_changed(rd: RunDir, info: RunInfo, state: PartsState, move_bad: bool) -> None:
    """Take the parts made from frames that changed on disk out of state.done (stat only)."""
    paths = {c: rd.part_path(c) for c in state.done}
    skip = {c: set(part.dropped) for c, part in state.done.items() if part.dropped}
    stale, unreadable = stale_parts(paths, Path(info.dataset.root), skip=skip)
    whys = {c: describe(found) for c, found in stale.items()} | unreadable
    for chunk, why in sorted(whys.items()):
        del state.done[chunk]
        state.rejected[chunk] = why
        if move_bad:
            reject(rd, paths[chunk], why)
