"""`run`: plan once, extract what is not committed yet, merge. The same call resumes after a crash.

The order of events is the data flow: dataset -> plan -> chunks -> workers -> parts -> merge ->
keypoints + tensors. Local workers are started first, so they import mediapipe and build their
graphs while the coordinator reads the dataset and plans.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from jobs import messages, summary
from jobs.devices import worker_slots
from jobs.extraction import extract, make_backend
from jobs.finish import finish
from jobs.locks import locked
from jobs.merge import CorruptPart
from jobs.options import RunOptions
from jobs.prepare import load_or_plan, plan_shared
from jobs.resume import scan_parts
from jobs.rundir import RunDir, RunError, first_missing, remove_new_folder
from jobs.runinfo import RunInfo
from jobs.scheduler import Backend, Outcome
from jobs.shards import resolve_shard, shard_chunks
from jobs.todo import work_left

MERGE_TRIES = 3  # a part found corrupt while merging is redone, then merged again


@dataclass
class RunRequest:
    """Everything `run` was asked (RunOptions: what decides the output; the rest: how to run)."""

    out: Path
    options: RunOptions = field(default_factory=RunOptions)
    num_gpus: int | None = None
    workers_per_gpu: int | None = None
    fresh: bool = False
    allow_partial: bool = False
    retry_failed: bool = False
    num_shards: int | None = None
    shard_index: int | None = None
    backend: str = "local"
    address: str | None = None
    pkl: Path | None = None  # --output_path: also export the keypoints to this pkl at the end


@contextmanager
def run_folder(rd: RunDir, lock: str = "run", shared: bool = False) -> Iterator[None]:
    """Create --out if needed and hold its lock; a refusal leaves no folder behind that it made."""
    if rd.path.exists() and not rd.path.is_dir():
        raise RunError(f"--out {rd.path} is a file, not a folder: give a folder for the run.")
    made = first_missing(rd.path)
    rd.path.mkdir(parents=True, exist_ok=True)
    try:
        with locked(rd, lock, shared=shared):
            yield
    except BaseException:  # refused (dataset, model, folder), stopped or failed before a plan
        if made is not None and not rd.exists():
            remove_new_folder(rd, made)
        raise


def _holistic(rd: RunDir, req: RunRequest) -> dict:
    """The graph options workers need before planning: the run's own when it resumes."""
    return req.options.holistic(rd.load() if rd.exists() and not req.fresh else None)


def _exit(outcome: Outcome, what: str) -> int:
    """The exit status for a stopped or failed extraction, with what to tell the user."""
    if outcome.signal:
        messages.say(f"{what}stopped; run the same command to resume ({len(outcome.done)} chunk(s) "
                     "committed this time).")
        return 128 + outcome.signal
    if outcome.error:
        messages.error(outcome.error)
        return 1
    return 0


def _extract_all(rd: RunDir, req: RunRequest, info: RunInfo, backend: Backend | None,
                 retry_failed: bool) -> int:
    """Extract every chunk without a trusted part; 0, or the exit status that ends the run."""
    plan = rd.load_plan()
    work = work_left(rd, info, plan, retry_failed=retry_failed)
    if not work.todo:
        if backend is not None:
            backend.close(0)
        return 0
    backend = backend or make_backend(rd, info.options.holistic, req.backend, req.num_gpus,
                                      req.workers_per_gpu, req.address)
    return _exit(extract(rd, info, plan, work, backend), "")


def _merge(rd: RunDir, req: RunRequest, info: RunInfo) -> int | None:
    """Merge when every chunk is done; None when a corrupt part must be redone first."""
    if not req.allow_partial:
        failed = scan_parts(rd, info, rd.load_plan(), move_bad=False).failed
        if failed:
            messages.error(summary.failed_videos(failed))
            return 1
    try:
        record = finish(rd, allow_partial=req.allow_partial)
    except CorruptPart as e:
        messages.warn(f"{e.why}; redoing chunk {e.chunk}")
        return None
    summary.merged(rd, record)
    if req.pkl is not None:
        from jobs.outputs import export_pkl

        messages.result(f"pkl:       {req.pkl} ({export_pkl(rd, req.pkl)} videos)")
    return 1 if record.failed_videos else 0


def run_whole(req: RunRequest) -> int:
    """`run` without shards: this node plans, extracts everything left, merges."""
    rd = RunDir(req.out)
    with run_folder(rd):
        backend: Backend | None = None
        if req.backend == "local":  # start now: workers import mediapipe while we plan
            backend = make_backend(rd, _holistic(rd, req), "local", req.num_gpus, req.workers_per_gpu)
            for slot in range(backend.slot_count()):
                backend.start(slot)
        try:
            workers = len(worker_slots(req.num_gpus, req.workers_per_gpu))
            info = load_or_plan(rd, req.options, workers, req.fresh)
            summary.dataset_problems(info)
            for attempt in range(MERGE_TRIES):
                code = _extract_all(rd, req, info, backend, req.retry_failed and attempt == 0)
                backend = None  # closed by the extraction
                if code:
                    return code
                result = _merge(rd, req, info)
                if result is not None:
                    return result
        finally:
            if backend is not None:
                backend.close(0)
    messages.error("parts keep failing their checksums; check the disk.")
    return 1


def run_shard(req: RunRequest, num_shards: int, shard: int) -> int:
    """`run --num-shards S --shard-index I`: extract shard I's chunks into the shared run folder.

    No merge here: the merge job (or `merge` on a login node) does it once every shard is complete.
    """
    rd = RunDir(req.out)
    if req.fresh:
        raise RunError("--fresh cannot be used with --num-shards: one shard would delete what the "
                       f"others wrote. Delete {rd.path} (or use another --out) before submitting.")
    with run_folder(rd, "run", shared=True), locked(rd, f"shard-{shard}"):
        workers = num_shards * len(worker_slots(req.num_gpus, req.workers_per_gpu))
        info = plan_shared(rd, req.options, num_shards, workers)
        if shard == 0:
            summary.dataset_problems(info)
        plan = rd.load_plan()
        owned = set(shard_chunks(sorted({c for c in plan["chunk"].to_pylist() if c >= 0}),
                                 num_shards, shard))
        work = work_left(rd, info, plan, owned)
        outcome = Outcome()
        if work.todo:
            backend = make_backend(rd, info.options.holistic, req.backend, req.num_gpus,
                                   req.workers_per_gpu, req.address, shard)
            outcome = extract(rd, info, plan, work, backend, shard)
    code = _exit(outcome, f"shard {shard}/{num_shards} ")
    if code:
        return code
    failed = {v for f in outcome.failed.values() for v in f}
    if failed:
        messages.warn(f"shard {shard}: {len(failed)} video(s) failed: "
                      f"{messages.listing(sorted(failed), 5)}")
    messages.result(f"shard {shard}/{num_shards} complete ({len(outcome.done)} chunk(s) done now). "
                    f"Once every shard is: `phoenix-keypoints merge --out {rd.path}`.")
    return 0


def run(req: RunRequest) -> int:
    """The `run` command: plan, extract, merge on this node (or Ray); one shard only with shards."""
    sharded = resolve_shard(req.num_shards, req.shard_index)
    if req.pkl is not None and sharded:
        raise RunError("--output_path exports after the merge, which a shard does not do: run "
                       "`phoenix-keypoints export --format pkl` once the merge job is done.")
    if sharded:
        return run_shard(req, *sharded)
    written = req.pkl.stat().st_mtime_ns if req.pkl is not None and req.pkl.exists() else None
    code = run_whole(req)
    if req.pkl is not None and (not req.pkl.exists() or req.pkl.stat().st_mtime_ns == written):
        messages.say(f"pkl not written ({req.pkl}): the run did not finish; {messages.RESUME}.")
    return code


def merge_command(rd: RunDir, allow_partial: bool) -> int:
    """`merge`: finish a run whose chunks are committed (the SLURM merge job runs this)."""
    rd.load()  # not a run folder: say so before taking a lock in it
    with locked(rd):
        record = finish(rd, allow_partial=allow_partial)
    summary.merged(rd, record)
    return 0

