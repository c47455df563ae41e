"""Finish a run: refuse gaps (unless partial is allowed), merge the parts, write the tensors, record it.

What `merge` does, and what `run` does once every chunk is committed. run.json's `merge` record is
cleared before the outputs are replaced and written after both are complete, so a crash in between
shows as an interrupted merge, never as outputs that match a record they do not.
"""

from __future__ import annotations

import time

from phoenix_keypoints.extract.keypoints.versions import combined
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.run.done import PartsState, scan_parts
from phoenix_keypoints.jobs.run.merge import BackgroundMerge
from phoenix_keypoints.jobs.rundir.folder import JobFailed, RunDir, RunError
from phoenix_keypoints.jobs.rundir.made_under import MadeUnder
from phoenix_keypoints.jobs.rundir.runinfo import MergeInfo, RunInfo
from phoenix_keypoints.jobs.rundir.shards import array_expr, live_shards, shard_state


def _missing_bits(rd: RunDir, info: RunInfo, state: PartsState) -> tuple[list[str], list[str]]:
    """(what is missing, what to do about it), for the refusal message."""
    missing, failed = state.missing, state.failed
    bits, steps = [], []
    live = live_shards(rd.shard_progress_files())
    if missing and info.num_shards > 1 and live:
        running = messages.listing([str(i) for i in sorted(live)])
        bits.append(f"{len(missing)} chunk(s) not done; shard(s) {running} still running")
        steps.append(f"Wait for them (`phoenix-keypoints status --out {rd.path}`); the array merges "
                     "by itself once every chunk is done")
    elif missing and info.num_shards > 1:
        ids = shard_state(rd.claims_dir, True, info.num_shards).missing
        bits.append(f"{len(ids)} of {info.num_shards} shard(s) not complete: "
                    f"{messages.listing([str(i) for i in ids], 20)} ({len(missing)} chunk(s) missing)")
        steps.append(f"Resubmit them (sbatch --array={array_expr(ids)}): `phoenix-keypoints slurm "
                     f"--out {rd.path} --num-shards {info.num_shards} --submit`, or finish on one "
                     f"node with `phoenix-keypoints run --out {rd.path}`")
    elif missing:
        bits.append(f"{len(missing)} chunk(s) not done ({messages.listing([str(c) for c in missing])})")
        steps.append(f"Run `phoenix-keypoints run --out {rd.path}` to finish it")
    if failed:
        bits.append(f"{len(failed)} video(s) failed ({messages.listing(sorted(failed), 5)})")
        steps.append(f"fix the failed videos' frames, then `phoenix-keypoints run --out {rd.path} "
                     "--retry-failed` redoes them")
    if state.rejected:
        bits.append("untrusted part(s) moved to parts/rejected/: " + messages.listing(
            [f"chunk {c} ({why})" for c, why in sorted(state.rejected.items())], 5))
    return bits, steps


def finish(rd: RunDir, allow_partial: bool = False,
           merging: BackgroundMerge | None = None) -> MergeInfo:
    """Write keypoints.parquet and tensors/ from the parts; refuse gaps unless allow_partial.

    merging: a merge that ran beside the extraction; what it merged already is not read again.
    """
    if merging is not None:  # before the scan: a part it found corrupt is no longer in parts/
        try:
            merging.settle()
        except OSError as e:
            raise _cannot_write(rd, e) from None
    info = rd.load()
    plan = rd.load_plan()
    state = scan_parts(rd, info, plan)
    missing, failed = state.missing, state.failed
    merging = merging or BackgroundMerge(rd, plan, sorted(state.chunks), ready=lambda c: False)
    if (missing or failed) and not allow_partial:
        merging.discard()
        bits, steps = _missing_bits(rd, info, state)
        raise RunError(f"cannot merge {rd.path}: {'; '.join(bits)}. {'; '.join(steps)}. Or merge with "
                       "--allow-partial to write what there is (run.json's merge section then lists "
                       "what is missing).")
    t0 = time.monotonic()
    if info.merge is not None or info.merge_interrupted:  # the record describes the old outputs
        info = rd.update(_mark_interrupted)
    versions, mixed = made_with(info, state)
    try:
        rows, per_split = merging.complete(sorted(state.done), versions, made_on(state))
    except OSError as e:  # disk full, quota, permissions: nothing half-written is left as done
        raise _cannot_write(rd, e) from None
    record = MergeInfo(
        time=time.time(), seconds=round(time.monotonic() - t0, 3), rows=rows,
        frames_per_split=per_split, partial=bool(missing or failed), missing_chunks=missing,
        missing_videos=sorted(v for c in missing for v in state.chunks[c]), failed_videos=failed,
        statuses=state.statuses, worst_videos=state.worst_videos(), mixed_versions=mixed,
        execution=made_on(state))
    rd.update(lambda i: _record(i, record, versions))
    if mixed:
        messages.warn(mixed_line(rd.keypoints_path.name, versions, mixed))
    return record


def made_with(info: RunInfo, state: PartsState) -> tuple[dict[str, str], list[str]]:
    """(what the committed parts' values were made with, the keys in which they differ): from
    their footers; a part written before footers recorded it, as run.json records the run's
    (MadeUnder.of_part)."""
    recorded = info.value_versions()
    return combined({c: dict(MadeUnder.of_part(part, recorded).versions)
                     for c, part in state.done.items()})


def made_on(state: PartsState) -> list[dict]:
    """How the committed parts' values were computed, each record once, in chunk order."""
    out: list[dict] = []
    for chunk in sorted(state.done):
        record = state.done[chunk].execution
        if record and record not in out:
            out.append(record)
    return out


def mixed_line(what: str, versions: dict[str, str], mixed: list[str]) -> str:
    """What a file (or the parts) made under more than one version of something says."""
    return (f"{what} holds keypoints made under more than one version of what they depend on: "
            + "; ".join(f"{k} {versions[k]}" for k in mixed) + ". For keypoints of one pipeline, "
            "make the run again where the versions you want are installed (`run --fresh`, or "
            "another --out).")


def _cannot_write(rd: RunDir, e: OSError) -> JobFailed:
    return JobFailed(f"cannot write the merged outputs in {rd.path} ({e}). Free space or fix "
                     f"permissions, then run `phoenix-keypoints merge --out {rd.path}` (or the same "
                     "`run`) again.")


def _mark_interrupted(info: RunInfo) -> None:
    info.merge, info.merge_interrupted = None, True


def _record(info: RunInfo, record: MergeInfo, versions: dict[str, str]) -> None:
    info.merge, info.merge_interrupted = record, False
    info.versions.update(versions)  # the merged frames' truth
