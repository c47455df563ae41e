"""The run folder's locks: the one place any process takes one.

- "run": held exclusive by a whole-run `run`, `merge`, `tensors`; shared by each SLURM shard. So
  shards on other nodes do not block each other, while nothing writes outputs beside them.
- "shard-I": held exclusive by shard I, so two copies of one shard are refused.
- "plan": taken (waiting) by whoever plans, so two shards started by hand never plan at once.
A refused lock is a message naming the holder, never a wait (except `plan`).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager

from phoenix_keypoints.jobs.rundir.folder import (
    RunDir,
    RunError,
    first_missing,
    remove_new_folder,
    remove_worker_logs,
)


@contextmanager
def locked(rd: RunDir, name: str = "run", shared: bool = False, wait: bool = False) -> Iterator[None]:
    """Hold lock `name` of the run folder for the duration of the block."""
    if not rd.path.is_dir():
        raise RunError(f"{rd.path} is not a folder: give --out a folder for the run.")
    with open(rd.path / f".{name}.lock", "a+") as f:  # readable too: NFS emulates LOCK_SH with it
        try:
            fcntl.flock(f, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                        | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            raise RunError(
                f"another phoenix-keypoints process is using {rd.path} ({name} lock); wait for it "
                f"to end, or stop it first (`phoenix-keypoints status --out {rd.path}` shows it)."
            ) from None
        yield


@contextmanager
def run_folder(rd: RunDir, lock: str = "run", shared: bool = False,
               wait: bool = False) -> Iterator[None]:
    """Create --out if needed and hold its lock; a refusal leaves no folder behind that it made."""
    if rd.path.exists() and not rd.path.is_dir():
        raise RunError(f"--out {rd.path} is a file, not a folder: give a folder for the run.")
    made = first_missing(rd.path)
    rd.path.mkdir(parents=True, exist_ok=True)
    try:
        with locked(rd, lock, shared=shared, wait=wait):
            yield
    except BaseException:  # refused (dataset, model, folder), stopped or failed before a plan
        if made is not None and not rd.exists():
            remove_new_folder(rd, made)
        elif not rd.exists():  # the user's own folder, nothing planned in it: only theirs stays
            remove_worker_logs(rd)
        raise
