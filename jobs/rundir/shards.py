"""Shards: the S tasks of a SLURM array, each a coordinator on its own node, sharing one run folder.

Work is not divided in advance: every shard claims the next chunks of the shared plan
(jobs.cluster.claims), so shards that start early or run on faster cores do more. S is written
into run.json when the plan is made and only names the shards (logs, heartbeats, completion markers); a
resubmission of some indices takes whatever is left.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from phoenix_keypoints.jobs.rundir.folder import RunError

ARRAY_ENV = "SLURM_ARRAY_TASK_ID"


@dataclass
class ShardState:
    num_shards: int
    complete: list[int]
    missing: list[int]  # shards to (re)submit: work is left and they did not end cleanly


def shard_state(claims_dir: Path, work_left: bool, num_shards: int,
                live: Iterable[int] = ()) -> ShardState:
    """Which array indices to resubmit: none when no chunk is left, else those not complete.

    A shard is complete when it ended with nothing left to take (claims/shard-I.done); one that is
    running (`live`, from its heartbeat) is neither complete nor to be resubmitted. Should every
    shard say it is complete while chunks are still missing (a part rejected since), shard 0 is
    resubmitted: any one shard takes every chunk that is left.
    """
    done = [i for i in range(num_shards) if (claims_dir / f"shard-{i}.done").exists()]
    if not work_left:
        return ShardState(num_shards, list(range(num_shards)), [])
    running = set(live)
    missing = [i for i in range(num_shards) if i not in done and i not in running]
    if not missing and not running:
        missing = [0]
    return ShardState(num_shards, [i for i in done if i not in missing], missing)


def live_shards(progress_files: Iterable[Path]) -> set[int]:
    """Shards whose coordinator runs now, from their heartbeats (progress-shard-I.json)."""
    from phoenix_keypoints.jobs.rundir import heartbeat

    return {int(p.stem.rsplit("-", 1)[1]) for p in progress_files
            if heartbeat.is_live(heartbeat.read(p))}


def array_expr(indices: Iterable[int], max_parallel: int | None = None) -> str:
    """SLURM --array syntax for these indices, runs compressed: [0, 1, 2, 3, 7] -> "0-3,7"."""
    ids = sorted(set(indices))
    if not ids:
        raise ValueError("no array indices")
    runs: list[str] = []
    start = prev = ids[0]
    for i in ids[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(runs) + (f"%{max_parallel}" if max_parallel else "")


def resolve_shard(num_shards: int | None, shard_index: int | None) -> tuple[int, int] | None:
    """(S, I) for a sharded `run`, None for a plain one; I defaults to $SLURM_ARRAY_TASK_ID."""
    if num_shards is None:
        if shard_index is not None:
            raise RunError("--shard-index needs --num-shards (the S the run was planned with).")
        return None
    if shard_index is None:
        env = os.environ.get(ARRAY_ENV)
        if env is None:
            raise RunError(
                f"--num-shards {num_shards} needs --shard-index I (or ${ARRAY_ENV}, which a SLURM "
                "array task sets). To run every chunk on this node, leave out --num-shards."
            )
        try:
            shard_index = int(env)
        except ValueError:
            raise RunError(f"${ARRAY_ENV}={env!r} is not a shard index.") from None
    if not 0 <= shard_index < num_shards:
        raise RunError(
            f"shard index {shard_index} is outside 0..{num_shards - 1} (--num-shards {num_shards}); "
            f"submit the array with --array=0-{num_shards - 1} or a part of it."
        )
    return num_shards, shard_index
