"""What is left to do in a run folder: the chunks (of this coordinator) without a trusted part."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from jobs import messages
from jobs.run.plan import handout_order
from jobs.run.resume import PartsState, scan_parts
from jobs.rundir.folder import RunDir
from jobs.rundir.parts import remove_stale_temps
from jobs.rundir.runinfo import RunInfo


@dataclass
class Work:
    todo: list[int]  # in the order they are handed out (jobs.run.plan.handout_order)
    frames_total: int
    frames_done: int
    state: PartsState


def work_left(rd: RunDir, info: RunInfo, plan: pa.Table, retry_failed: bool = False,
              clean_temps: bool = True) -> Work:
    """Scan the committed parts (and their frames), set aside untrusted ones, list the rest.

    retry_failed: also redo chunks whose part lists failed videos (after the user fixed their
    frames); the old part stays until the new one replaces it, so a crash loses nothing.
    """
    state = scan_parts(rd, info, plan, check_frames=True)
    chunks = sorted(state.chunks)
    for chunk, why in sorted(state.rejected.items()):
        messages.say(f"part of chunk {chunk} not trusted ({why}): moved to parts/rejected/, "
                     "redoing it")
    rd.parts_dir.mkdir(exist_ok=True)
    if clean_temps:  # a SLURM shard leaves them: other shards may be committing theirs
        remove_stale_temps(rd, set(chunks))
    retry = {c for c in chunks if c in state.done and state.done[c].failed} if retry_failed else set()
    if retry:
        names = sorted(v for c in retry for v in state.done[c].failed)
        messages.say(f"--retry-failed: redoing {len(retry)} chunk(s) with failed video(s): "
                     f"{messages.listing(names)}")
    frames = {c: state.chunk_frames(c) for c in chunks}
    todo = [c for c in handout_order(frames, info.plan.workers)
            if c not in state.done or c in retry]
    done = sum(state.done[c].rows for c in chunks if c in state.done and c not in retry)
    return Work(todo, sum(frames.values()), done, state)
