"""What is left to do in a run folder: the chunks (of this coordinator) that are not done
(jobs/run/done.py `Done`, the resume rule), and whether they may be done here (jobs/rundir/
made_under.py): not under other versions than the committed parts were made with, nor, in a shard
of an array, than the run recorded when it was planned."""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass, field

import pyarrow as pa

from phoenix_keypoints.extract.keypoints.versions import (
    DECODER,
    NOT_RECORDED,
    differences,
    named,
    pip_hint,
    value_versions,
)
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.run.done import PartsState, scan_parts
from phoenix_keypoints.jobs.run.identity import input_arg
from phoenix_keypoints.jobs.run.plan import handout_order
from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError
from phoenix_keypoints.jobs.rundir.made_under import MadeUnder
from phoenix_keypoints.jobs.rundir.parts import remove_stale_temps
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo


@dataclass
class Work:
    todo: list[int]  # in the order they are handed out (jobs.run.plan.handout_order)
    frames_total: int
    frames_done: int
    state: PartsState
    versions: dict[str, str] = field(default_factory=dict)  # the run's binding ones: every worker's
    # how the committed parts' values were computed (extract.keypoints.execution): every worker's
    execution: dict = field(default_factory=dict)


def work_left(rd: RunDir, info: RunInfo, plan: pa.Table, retry_failed: bool = False,
              shard: int | None = None) -> Work:
    """Scan the committed parts (and their frames), set aside untrusted ones, list the rest.

    retry_failed: also redo chunks whose part lists failed videos (after the user fixed their
    frames); the old part stays until the new one replaces it, so a crash loses nothing.
    shard: this coordinator is that shard of an array: other shards' temps are theirs, and the
    versions the run recorded when it was planned bind it (shard_versions).
    """
    state = scan_parts(rd, info, plan, check_frames=True)
    chunks = sorted(state.chunks)
    for chunk, why in sorted(state.rejected.items()):
        messages.say(f"part of chunk {chunk} not trusted ({why}): moved to parts/rejected/, "
                     "redoing it")
    rd.parts_dir.mkdir(exist_ok=True)
    if shard is None:  # a SLURM shard leaves them: other shards may be committing theirs
        remove_stale_temps(rd, set(chunks))
    retry = state.retried(retry_failed)
    if retry:
        names = sorted(v for c in retry for v in state.done[c].failed)
        messages.say(f"--retry-failed: redoing {len(retry)} chunk(s) with failed video(s): "
                     f"{messages.listing(names)}")
    frames = {c: state.chunk_frames(c) for c in chunks}
    todo = state.todo(handout_order(frames, info.plan.workers), retry)
    done = sum(state.done[c].rows for c in chunks if c in state.done and c not in retry)
    versions = same_versions(rd, info, state, set(todo), shard) if todo else {}
    execution = MadeUnder.binding(state.done[c] for c in sorted(state.done) if c not in todo)
    return Work(todo, sum(frames.values()), done, state, versions, execution)


def recorded_execution(rd: RunDir, info: RunInfo) -> dict:
    """How the run's committed parts computed their values ({} where none records it): kept for
    callers of this name; the rule is MadeUnder.of_run (jobs/rundir/made_under.py)."""
    return dict(MadeUnder.of_run(rd, info).execution)


def versions_here(info: RunInfo) -> dict[str, str]:
    """This process's versions of what the run's values depend on (its workers run this Python)."""
    decoder = ""
    if info.dataset.decoder:
        from phoenix_keypoints.extract.sources.video import decoder_version

        decoder = decoder_version()
    return value_versions(info.options.estimator, decoder)


def same_versions(rd: RunDir, info: RunInfo, state: PartsState, todo: set[int],
                  shard: int | None = None) -> dict[str, str]:
    """Refuse (exit 2) to extract here when the committed parts were made under other versions
    of what the values depend on: one file would hold two pipelines' keypoints. With none
    committed, a single coordinator's run takes this Python's versions; a shard's does not
    (shard_versions). Returns the versions every worker of this run must have."""
    # a shard reads run.json as it is now: had two shards planned at once (a filesystem that
    # ignores the plan lock), the run.json written last binds each shard that checks after it
    now, recorded = versions_here(info), (rd.load() if shard is not None else info).value_versions()
    here = MadeUnder(now)
    made = {c: MadeUnder.of_part(part, recorded) for c, part in state.done.items() if c not in todo}
    clash = {c: d for c, m in sorted(made.items()) if (d := m.version_differences(here))}
    if clash:
        first = next(iter(clash.values()))
        raise RunError(
            f"{rd.path}: {len(clash)} of its committed chunk(s) were made under other versions of "
            f"what the keypoints depend on than this Python has ({named(first)}); extracting the "
            "rest here would put two pipelines' keypoints into one file. Go on where those "
            f"versions are installed{pip_hint(first)}, or make the whole run again under these: "
            f"{messages.fresh(rd.path, input_arg(info))}, or give another --out.")
    if shard is not None:
        shard_versions(rd, recorded, now, shard)
    elif differences(recorded, now):
        rd.update(lambda i: _adopt(i, now))
    return now


def binding(recorded: dict[str, str]) -> dict[str, str]:
    """The versions of a run's record that bind its shards: a key an older run.json lacks binds
    nothing."""
    return {k: v for k, v in recorded.items() if v != NOT_RECORDED}


def shard_versions(rd: RunDir, recorded: dict[str, str], now: dict[str, str], shard: int) -> None:
    """Refuse (exit 2) a shard whose Python has other versions than run.json recorded when the run
    was planned (by `slurm`, or by the first shard under the plan lock). Shards start together:
    were each to adopt its own while no part is committed, two nodes' installs would both extract
    into one file. run.json is written once, before any shard extracts, so it is the one rule
    every shard reads alike, whichever starts first."""
    diffs = differences(binding(recorded), now)
    if diffs:
        raise RunError(
            f"shard {shard} on {socket.gethostname()}: this Python ({sys.executable}) has other "
            f"versions of what the keypoints depend on than the run {rd.path} was planned under "
            f"({named(diffs, 'in the run', 'here')}). Every shard extracts under the run's versions, "
            "so that one file holds one pipeline; nothing was extracted here. Install the run's "
            f"versions on this node{pip_hint(diffs)}, or plan the run where the shards run: "
            "`phoenix-keypoints slurm` with this Python and another --out (or the same --out once "
            "its folder is deleted).")


def _adopt(info: RunInfo, now: dict[str, str]) -> None:
    info.versions.update(now)
    info.dataset.decoder = now.get(DECODER, info.dataset.decoder)
