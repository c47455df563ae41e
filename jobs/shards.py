"""Shards: a fixed split of a plan's chunks over S independent jobs (SLURM array tasks).

Shard i owns the chunks c with c % S == i, so shards never touch the same chunk and each gets a
spread of the dataset. S is written into run.json when the plan is made and never derived from
the scheduler: a resubmission of only some array indices must not change who owns what. A shard is
complete when every chunk it owns has a trusted part; nothing else records completion.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from jobs.rundir import RunError

ARRAY_ENV = "SLURM_ARRAY_TASK_ID"


def shard_chunks(chunks: Iterable[int], num_shards: int, shard: int) -> list[int]:
    """Shard i gets every num_shards-th chunk from i: a fixed split, balanced, never overlapping."""
    return [c for c in chunks if c % num_shards == shard]


def shard_of(chunk: int, num_shards: int) -> int:
    return chunk % num_shards


@dataclass
class ShardState:
    num_shards: int
    complete: list[int]
    missing: dict[int, list[int]]  # shard -> its chunks without a trusted part


def shard_state(chunks: Iterable[int], done: Iterable[int], num_shards: int) -> ShardState:
    """Which shards have all their chunks committed (a shard that owns no chunk is complete)."""
    have = set(done)
    missing: dict[int, list[int]] = {}
    for c in sorted(set(chunks)):
        if c not in have:
            missing.setdefault(shard_of(c, num_shards), []).append(c)
    complete = [i for i in range(num_shards) if i not in missing]
    return ShardState(num_shards, complete, missing)


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
