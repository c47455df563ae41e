"""One task of a SLURM array (`run --num-shards S --shard-index I`): claim chunks, extract, merge.

Every shard claims the next chunks of the shared plan (jobs.cluster.claims) until none is left; the first
to start also merges the parts beside the extraction (jobs.run.merge.BackgroundMerge) and, once every
chunk is committed, writes the outputs, so the array's merge job finds them complete.
"""

from __future__ import annotations

import time

from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.cluster.claims import MERGER, ClaimQueue, FileClaims
from phoenix_keypoints.jobs.run import summary
from phoenix_keypoints.jobs.run.done import Done, scan_parts
from phoenix_keypoints.jobs.run.extraction import extract, make_backend
from phoenix_keypoints.jobs.run.finish import finish
from phoenix_keypoints.jobs.run.merge import BackgroundMerge, CorruptPart
from phoenix_keypoints.jobs.run.options import RunRequest
from phoenix_keypoints.jobs.run.outputs import outputs_state
from phoenix_keypoints.jobs.run.plan import plan_record
from phoenix_keypoints.jobs.run.prepare import plan_shared
from phoenix_keypoints.jobs.run.todo import work_left
from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError
from phoenix_keypoints.jobs.rundir.locks import locked, run_folder
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo
from phoenix_keypoints.jobs.schedule.devices import worker_slots
from phoenix_keypoints.jobs.schedule.scheduler import Outcome


def _shard_extract(rd: RunDir, req: RunRequest, info: RunInfo, shard: int,
                   claims: FileClaims) -> tuple[Outcome, BackgroundMerge | None]:
    """Claim and extract chunks until none is left to take; the merger also merges meanwhile."""
    plan = rd.load_plan()
    work = work_left(rd, info, plan, shard=shard)  # bound by the planned versions; exit 2 if not
    merger = claims.claim(MERGER) or _merger_gone(claims)
    if merger and not work.state.missing and outputs_state(rd, info) == "ok":
        merger = False  # merged already (this shard started after the array's work was done)
    merging = None
    if merger:  # this shard merges while the others extract
        chunks, kept = work.state.chunks, plan_record(plan).kept
        merging = BackgroundMerge(rd, plan, sorted(chunks), ready=lambda c: Done.trusted(
            rd, info.fingerprint, c, chunks[c], kept.get(c))).start()
    outcome = Outcome()
    if work.todo:
        queue = ClaimQueue(work.todo, claims, time.monotonic, wait_for_all=merger)
        backend = make_backend(rd, req.worker_settings(info), req.backend, req.num_gpus,
                               req.workers_per_gpu, req.address, shard)
        outcome = extract(rd, info, plan, work, backend, queue, shard)
    return outcome, merging


def _merger_gone(claims: FileClaims) -> bool:
    holder = claims.holder(MERGER)
    return holder is not None and not claims.alive(holder) and claims.take_over(MERGER, holder)


def run_shard(req: RunRequest, num_shards: int, shard: int) -> int:
    """`run --num-shards S --shard-index I`: one coordinator of a SLURM array on its node.

    It claims chunks until none is left. The first shard to start also merges the parts while the
    others extract and, once every chunk is committed, writes the outputs; the array's merge job
    then finds them complete.
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
        claims = FileClaims(rd.path, shard, rd.part_path)
        outcome, code = Outcome(), 1
        try:
            outcome, merging = _shard_extract(rd, req, info, shard, claims)
            code = summary.ended(outcome, f"shard {shard}/{num_shards} ")
            if merging is not None:  # kept the merger role (and its claim) until the outputs are out
                code = code or _shard_merge(rd, info, merging)
                merging.discard()
        finally:
            claims.release(MERGER)
            claims.finish(done=code == 0)
    return code or _shard_done(outcome, shard, num_shards)


def _shard_done(outcome: Outcome, shard: int, num_shards: int) -> int:
    failed = {v for f in outcome.failed.values() for v in f}
    if failed:
        messages.warn(f"shard {shard}: {len(failed)} video(s) failed: "
                      f"{messages.listing(sorted(failed), 5)}")
    messages.result(f"shard {shard}/{num_shards} complete ({len(outcome.done)} chunk(s) done here); "
                    "nothing left to take.")
    return 0


def _shard_merge(rd: RunDir, info: RunInfo, merging: BackgroundMerge) -> int:
    """The merger shard, every chunk committed: write the outputs (or leave them to `merge`)."""
    state = scan_parts(rd, info, rd.load_plan(), move_bad=False)
    if state.missing or state.failed:
        messages.say("not merging here: " + ("videos failed" if state.failed else "chunks missing")
                     + f"; see `phoenix-keypoints status --out {rd.path}`.")
        return 0
    try:
        record = finish(rd, merging=merging)
    except CorruptPart as e:
        messages.warn(f"{e.why}; `phoenix-keypoints slurm --out {rd.path} --submit` redoes it")
        return 0
    summary.merged(rd, record)
    return 0
