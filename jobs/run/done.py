"""What is done in a run folder: `Done`, the one owner of the resume rule (issue 56 item 3).

Nothing records completion but the parts themselves (no marker file to go stale, nothing a killed
process must have written last), so any process on any node that sees the run folder reaches the
same answer. A chunk of the plan is done when:

1. its part is committed: `parts/chunk-N.parquet` exists (a worker writes a temp and renames it;
   jobs/rundir/parts.py `write_part`), and
2. the part is trusted (`Done.trusted`, which is jobs/rundir/parts.py `check_part`): its footer
   reads, it carries this run's fingerprint (or, for a chunk a re-plan kept, the plan's it was
   made under: jobs/run/prepare.py), holds this chunk, names only its videos, has the rows the
   plan expects; and
3. on a resume (`check_frames`), none of the frames it was made from changed on disk since
   (jobs/rundir/stale.py: a stat of each). `status` skips that check to stay cheap.

A chunk not done is missing (no part) or rejected (why, in words: `why_not`); a rejected part is
moved to parts/rejected/ with a .why file, never deleted. `--retry-failed` also redoes chunks
whose part lists failed videos (`todo`); the old part stays until the new one replaces it, so a
crash loses nothing. In a SLURM array a shard skips a chunk whose part exists (jobs/cluster/
claims.py `committed`: a stat, as the work list it hands out was made by this scan; the shard that
merges beside them takes another shard's part only once `Done.trusted`, and the merge's own scan
decides). The merge reads only done chunks (jobs/run/finish.py); one whose part fails to read
there is rejected and redone (jobs/run/merge.py). A run is finished (`merged`) when its last full
merge's outputs are whole (jobs/run/outputs.py `outputs_state`) and no chunk is missing. Whether
the rest may be computed here is another rule: jobs/rundir/made_under.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from phoenix_keypoints.jobs.run.outputs import outputs_state
from phoenix_keypoints.jobs.run.plan import plan_record
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.parts import KeptPart, PartInfo, check_part, reject
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo
from phoenix_keypoints.jobs.rundir.stale import describe, stale_parts
from phoenix_keypoints.jobs.schedule.chunks import plan_chunks

WORST = 10  # videos named as those with the most frames not ok


@dataclass
class Done:
    """Which chunks of the plan have a trusted part, and why the others have none (the rule: this
    module's docstring). Made by `Done.scan`; `PartsState` is its older name."""

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

    def why_not(self, chunk: int) -> str:
        """Why `chunk` is not done, in words ('' where it is)."""
        if chunk in self.done:
            return ""
        return self.rejected.get(chunk, "no part committed")

    def retried(self, retry_failed: bool) -> set[int]:
        """The done chunks --retry-failed redoes: those whose part lists failed videos."""
        return {c for c, part in self.done.items() if part.failed} if retry_failed else set()

    def todo(self, order: Iterable[int], retry: Collection[int] = ()) -> list[int]:
        """The chunks of `order` (in that order) left to extract: not done, or retried."""
        return [c for c in order if c not in self.done or c in retry]

    @classmethod
    def scan(cls, rd: RunDir, info: RunInfo, plan: pa.Table, move_bad: bool = True,
             check_frames: bool = False) -> Done:
        """The scan of every committed part against the plan: `scan_parts`."""
        return scan_parts(rd, info, plan, move_bad, check_frames)

    @staticmethod
    def trusted(rd: RunDir, fingerprint: str, chunk: int, videos: dict[str, int],
                kept: KeptPart | None = None) -> bool:
        """Whether `chunk`'s part is committed and trusted now, footers only (another shard's part,
        before a merge beside the extraction takes it)."""
        path = rd.part_path(chunk)
        return path.exists() and check_part(path, chunk, fingerprint, videos, kept)[0] is not None

    @staticmethod
    def merged(rd: RunDir, info: RunInfo) -> bool:
        """Whether the run is finished: its last full merge's outputs are whole and every chunk of
        the plan has a trusted part (footers only, no stat of the frames)."""
        return outputs_state(rd, info) == "ok" and not scan_parts(rd, info, rd.load_plan()).missing


PartsState = Done  # the name callers and benches knew


def _ranked(counts: Iterable[dict[str, int]], n: int | None = None) -> dict[str, int]:
    """The counts summed, most first (ties by name, so the order never depends on the parts')."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:n])


def scan_parts(rd: RunDir, info: RunInfo, plan: pa.Table, move_bad: bool = True,
               check_frames: bool = False) -> Done:
    """Check every committed part against the plan: footer, fingerprint, rows (Done's rule).

    check_frames (a resume): also stat the frames each part was made from; a part with a frame
    that changed since is not trusted. Parts that fail are moved to parts/rejected/ with a .why
    file (move_bad) and counted missing.
    """
    state = Done(plan_chunks(plan))
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


def _untrust_changed(rd: RunDir, info: RunInfo, state: Done, move_bad: bool) -> None:
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
