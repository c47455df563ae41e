"""`run`: plan once, extract what is not committed yet, merge. The same call resumes after a crash.

The order of events is the data flow: dataset -> plan -> chunks -> workers -> parts -> merge ->
keypoints + tensors. Local workers are started first, so they import their family's library and
load its graph or models while the coordinator reads the dataset and plans.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from phoenix_keypoints.extract.corpora.base import DatasetError
from phoenix_keypoints.extract.corpora.entries import is_video
from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_FAMILY, ModelFileError, family, loaded
from phoenix_keypoints.extract.outputs.declared import write_family_tensors
from phoenix_keypoints.extract.sources.archive_index import ArchiveError
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.cluster.shard_run import run_shard
from phoenix_keypoints.jobs.run import summary
from phoenix_keypoints.jobs.run.done import Done, scan_parts
from phoenix_keypoints.jobs.run.extraction import extract, make_backend
from phoenix_keypoints.jobs.run.finish import finish
from phoenix_keypoints.jobs.run.identity import input_arg
from phoenix_keypoints.jobs.run.merge import BackgroundMerge, CorruptPart
from phoenix_keypoints.jobs.run.options import RunRequest
from phoenix_keypoints.jobs.run.outputs import corpus_from_plan, outputs_state
from phoenix_keypoints.jobs.run.prepare import (
    FROZEN,
    check_corpus,
    follow_corpus,
    follow_moves,
    load_or_plan,
)
from phoenix_keypoints.jobs.run.todo import Work, work_left
from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError
from phoenix_keypoints.jobs.rundir.locks import locked, run_folder
from phoenix_keypoints.jobs.rundir.made_under import MadeUnder
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo
from phoenix_keypoints.jobs.rundir.shards import resolve_shard
from phoenix_keypoints.jobs.schedule.devices import (
    DoesNotFit,
    gpu_cards,
    gpu_plan,
    usable_cpus,
    visible_gpus,
)
from phoenix_keypoints.jobs.schedule.scheduler import Backend
from phoenix_keypoints.jobs.schedule.worker import skip_pandas_probe
from phoenix_keypoints.jobs.verify import merged_frames_changed

MERGE_TRIES = 3  # a part found corrupt while merging is redone, then merged again


def _settings(rd: RunDir, req: RunRequest) -> dict:
    """The estimator settings workers need before planning: the run's own when it resumes."""
    return req.worker_settings(rd.load() if rd.exists() and not req.fresh else None)


def _resuming(work: Work, info: RunInfo) -> None:
    done = len(work.state.done)
    if done or work.state.rejected:
        messages.say(f"resuming: {done}/{info.plan.chunks} chunk(s) committed; "
                     f"{work.frames_total - work.frames_done} frame(s) in {len(work.todo)} chunk(s) "
                     "left")


def _extract_all(rd: RunDir, req: RunRequest, info: RunInfo, backend: Backend | None,
                 retry_failed: bool) -> tuple[int, BackgroundMerge]:
    """Extract every chunk without a trusted part while merging beside it.

    Returns (0 or the exit status that ends the run, the merge to complete).
    """
    plan = rd.load_plan()
    work = work_left(rd, info, plan, retry_failed=retry_failed)
    _resuming(work, info)
    before = set(work.state.done) - set(work.todo)
    committed: set[int] = set()
    merging = BackgroundMerge(rd, plan, sorted(work.state.chunks),
                              ready=lambda c: c in before or c in committed).start()
    if not work.todo:
        if backend is not None:
            backend.close(0)
        return 0, merging
    backend = backend or make_backend(rd, req.worker_settings(info), req.backend, req.num_gpus,
                                      req.workers_per_gpu, req.address)
    outcome = extract(rd, info, plan, work, backend, on_commit=committed.add)
    if outcome.refused:  # a model file failed in a worker: refused input (exit 2, RunRefused)
        merging.discard()
        raise RunError(outcome.error)
    code = summary.ended(outcome, "")
    if code:
        merging.discard()
    return code, merging


def _merge(rd: RunDir, req: RunRequest, info: RunInfo, merging: BackgroundMerge) -> int | None:
    """Merge when every chunk is done; None when a corrupt part must be redone first."""
    if not req.allow_partial:
        failed = scan_parts(rd, info, rd.load_plan(), move_bad=False).failed
        if failed:
            merging.discard()
            messages.error(summary.failed_videos(failed))
            return 1
    try:
        record = finish(rd, req.allow_partial, merging)
    except CorruptPart as e:
        messages.warn(f"{e.why}; redoing chunk {e.chunk}")
        return None
    summary.merged(rd, record)
    _export_pkl(rd, req)
    return 1 if record.failed_videos else 0


def _export_pkl(rd: RunDir, req: RunRequest, locked_here: bool = True) -> None:
    """--output_path: write the older script's pkl, unless the file there is the one this run
    wrote from its current merge for the same dataset spelling (then nothing is rewritten)."""
    if req.pkl is None:
        return
    from phoenix_keypoints.jobs.run.identity import corpus_spelling
    from phoenix_keypoints.jobs.run.outputs import export_for_run, pkl_record

    info = rd.load()
    given = str(req.options.dataset) if req.options.dataset is not None else None
    source = corpus_spelling(info, given)
    if info.exports.get(str(req.pkl.absolute())) == pkl_record(req.pkl, info, source):
        messages.result(f"legacy pkl: {req.pkl} is up to date")
        return
    line = export_for_run(rd, "legacy-pkl", req.pkl, given)
    with contextlib.nullcontext() if locked_here else locked(rd):
        rd.update(lambda i: i.exports.__setitem__(str(req.pkl.absolute()),
                                                  pkl_record(req.pkl, i, source)))
    messages.result(line)


def _complete(rd: RunDir, req: RunRequest) -> bool:
    """A finished run asked again: say so (mending lost tensors, recording model files that
    moved) and touch nothing else.

    "Finished" means the last merge wrote every chunk, the outputs are whole, the corpus lists the
    videos and frames the plan has (a listing; a change sends the run down the normal path, which
    re-plans, unless --frozen), and no frame changed on disk since it was read (a stat of each; a
    changed one sends the run down the normal path, which redoes its chunk and merges again).
    """
    if req.fresh or req.retry_failed or not rd.exists():
        return False
    info = rd.load()
    if req.options.conflicts(info):  # refused by load_or_plan, with its message
        return False
    state = outputs_state(rd, info)
    if state == "stale":
        return False
    rd.use_archive_index(write=False, build=False)
    try:
        check = check_corpus(info, rd.load_plan())
        if not check.current(info):
            if not req.frozen or check.behind:
                return False
            follow_corpus(rd, info, check, 0, FROZEN)  # frozen: warns, changes nothing
        if merged_frames_changed(rd, Path(info.dataset.root)):
            return False
    except (ArchiveError, DatasetError):  # the archive changed (the normal path indexes it again),
        return False  # or the corpus cannot be read: the normal path says why
    # its model files named where they moved: recorded (keypoints.parquet's rows copied)
    info = follow_moves(rd, info, req.options.asked.get(info.options.estimator), merged=True)
    if state == "no tensors":
        with locked(rd):
            messages.say("tensors/ missing or damaged: writing them again from keypoints.parquet")
            write_family_tensors(rd.keypoints_path, rd.tensors_dir, corpus_from_plan(rd.load_plan()))
    assert info.merge is not None
    messages.result(f"complete: {rd.keypoints_path} ({info.merge.rows} frames) and "
                    f"{rd.tensors_dir}/ are up to date; nothing to do. `phoenix-keypoints verify "
                    f"--out {rd.path} --content` compares every frame's content too.")
    _export_pkl(rd, req, locked_here=False)
    return True


def _starting(rd: RunDir, req: RunRequest, info: RunInfo, backend: Backend) -> None:
    """The start-of-run lines (local backend: Ray places its own workers)."""
    slots = getattr(backend, "slots", None)
    if slots is None:
        return
    plan = rd.load_plan()
    frames: dict[str, int] = {}
    unusable = 0  # listed with frames found, but in no chunk (its problem is said at the start)
    for split, n, chunk in zip(*(plan[k].to_pylist() for k in ("split", "num_frames", "chunk")),
                               strict=True):
        frames[split] = frames.get(split, 0) + (n if chunk >= 0 else 0)
        unusable += chunk < 0
    writes = f"{rd.path}/ (keypoints.parquet, tensors/)" + (f" and {req.pkl}" if req.pkl else "")
    summary.starting(info, frames, slots, len(usable_cpus()), writes, req.worker_flags, unusable,
                     _runs_on(req, info, slots), _on_gpu(req, info, slots), visible_gpus())


def _runs_on(req: RunRequest, info: RunInfo, slots: list) -> str:
    """What the family says of how its workers will run (its runs_on: a family that batches
    frames names its device and batches), given the run's slots and --batch-size/--device."""
    return family(info.options.estimator).runs_on(info.options.settings(), req.batch_size,
                                                  req.device, any(s.gpu for s in slots))


def _on_gpu(req: RunRequest, info: RunInfo, slots: list) -> bool:
    """Whether the family's workers will run on their GPUs (its on_gpu: a family without it runs
    on the CPU, a GPU only pins its workers)."""
    return bool(family(info.options.estimator).on_gpu(req.device, any(s.gpu for s in slots)))


def _refuse_unavailable(req: RunRequest) -> None:
    """A family that cannot run in this Python (its library has no wheel here, e.g. the default family's
    on 3.13): refuse before any worker starts, in one line that says why and what to do. A finished run
    answers without it; the family is the one asked, or the run folder's own when resumed without one."""
    estimator = _estimator_of(req)
    if (why := family(estimator).unavailable()) is not None:
        raise ModelFileError(why)
    _refuse_device(req, estimator)


def _refuse_device(req: RunRequest, estimator: str) -> None:
    """--batch-size and --device are for families that run frames in batches (their declaration
    says so); --device cuda needs what the family says it needs (its device_refused) and a GPU to
    pin workers to. Refused before any worker starts (exit 2)."""
    if not family(estimator).declaration(None).batches:
        if req.batch_size is not None or req.device not in (None, "auto", "cpu"):
            batching = [n for n, f in loaded() if f.declaration(None).batches]
            raise RunError(f"--batch-size and --device cuda are for --estimator "
                           f"{' or '.join(batching)}; the {estimator} family runs one frame at a "
                           "time on the CPU.")
        return
    if req.device != "cuda":
        return
    why = family(estimator).device_refused(req.device)
    if why:
        raise RunError(f"--device {req.device}: {why}")
    gpus = visible_gpus()
    if (req.num_gpus if req.num_gpus is not None else len(gpus)) == 0:
        seen = ", ".join(gpus) or "none (CUDA_VISIBLE_DEVICES and nvidia-smi list no GPU)"
        raise RunError(f"--device cuda: no GPU to pin workers to (visible: {seen}). Pass "
                       "--num-gpus N where GPUs are visible, or --device cpu.")


def _estimator_of(req: RunRequest) -> str:
    """The estimator this run will use: the one asked, else the run folder's, else the default."""
    asked = req.options.family_asked()
    if asked is None and not req.fresh and RunDir(req.out).exists():
        with contextlib.suppress(Exception):  # an unreadable run.json is refused later, in words
            asked = RunDir(req.out).load().options.estimator
    return asked or DEFAULT_FAMILY


def run_whole(req: RunRequest) -> int:
    """`run` without shards: this node plans, extracts everything left, merges."""
    rd = RunDir(req.out)
    if _complete(rd, req):
        return 0
    _refuse_unavailable(req)
    req = _fit_gpus(req)
    with run_folder(rd):
        # started now: workers import their family's library and load it while we plan
        backend: Backend | None = make_backend(rd, _settings(rd, req), req.backend, req.num_gpus,
                                               req.workers_per_gpu, req.address)
        try:
            for slot in range(_early_workers(req, backend.slot_count())):
                backend.start(slot)
            skip_pandas_probe()  # planning's pa.table() would import pandas only to ask
            info = load_or_plan(rd, req.options, backend.slot_count(), req.fresh,
                                frozen=FROZEN if req.frozen else "")
            _starting(rd, req, info, backend)
            summary.dataset_problems(info)
            for attempt in range(MERGE_TRIES):
                code, merging = _extract_all(rd, req, info, backend, req.retry_failed and attempt == 0)
                backend = None  # closed by the extraction
                if code:
                    return code
                result = _merge(rd, req, info, merging)
                if result is not None:
                    return result
        finally:
            if backend is not None:
                backend.close(0)
    messages.error("parts keep failing their checksums; check the disk.")
    return 1


def _early_workers(req: RunRequest, slots: int) -> int:
    """How many workers to start before planning: one for a video file (one video, one chunk: a
    second worker's start-up would only take a core from the first's; issue 53 item 11), else
    every slot (the scheduler stops those the plan has no chunk for)."""
    root = req.options.dataset
    if root is not None and is_video(Path(root).name) and Path(root).is_file():
        return min(slots, 1)
    return slots


def _made_under(req: RunRequest) -> RunRequest:
    """A resume computes as its committed parts were computed: --device and --batch-size, where
    not given, are the parts' (jobs/rundir/made_under.py), not this node's defaults."""
    rd = RunDir(req.out)
    if req.fresh or not rd.exists() or not rd.parts_dir.is_dir():
        return req
    try:
        info = rd.load()
    except Exception:  # an unreadable run.json is refused later, in words
        return req
    made = MadeUnder.of_run(rd, info)
    resumed = req.as_made(made)
    if resumed is req or (resumed.device, resumed.batch_size) == (req.device, req.batch_size):
        return req
    if made.execution.get("device") != "cpu":  # on the CPU only the device is taken: nothing to say
        messages.say(f"resuming as its committed parts were computed: {made.flags()} "
                     f"({made.said()})")
    why = family(info.options.estimator).device_refused(resumed.device) \
        if req.device in (None, "auto") else None
    if why:
        raise RunError(f"{rd.path}: its committed parts were computed on {made.said()}; their "
                       f"values depend on it, so the rest is computed so too, but --device "
                       f"{resumed.device} cannot run here: {why.split('. ')[0]}. Go on where "
                       f"`{made.flags()}` runs, or make the whole run again here: "
                       f"{messages.fresh(rd.path, input_arg(info))}, or give another --out.")
    return resumed


def _cards_for(req: RunRequest) -> tuple[list, int] | None:
    """The cards a run's workers get, and the cores a GPU's workers share: this node's (a local
    run, or a Ray cluster started here, sized so), or every GPU node's of the Ray cluster at
    --address, read there (jobs/schedule/ray_backend.py). None: no GPU."""
    if req.backend == "ray" and req.address:
        from phoenix_keypoints.jobs.schedule.ray_backend import cluster_cards

        return cluster_cards(req.address, req.num_gpus)
    gpus = visible_gpus()
    count = req.num_gpus if req.num_gpus is not None else len(gpus)
    if not count:
        return None
    cards = gpu_cards()
    used = [cards[g] for g in (gpus if len(gpus) >= count else [str(i) for i in range(count)])[:count]
            if g in cards]
    return used, max(1, len(usable_cpus()) // count)


def _fit_gpus(req: RunRequest) -> RunRequest:
    """On GPUs, on either backend: workers per GPU and the batch size that fit each card's free
    memory (what was asked, refused where it does not fit; the defaults of a GPU node for the
    rest), each worker's share of its card, said at start and recorded (jobs/schedule/devices.py)."""
    fam = family(_estimator_of(req))
    if req.device == "cpu" or not fam.on_gpu(req.device, True):  # a family on the CPU: no cards
        return req
    found = _cards_for(req)
    if found is None:
        return req
    used, cpus = found
    if not used:
        messages.warn("the GPUs' memory could not be read (nvidia-smi): workers and batch size "
                      "are not checked against it")
        return req
    settings = _settings(RunDir(req.out), req)
    if fam.gpu_memory_need(settings, 1) is None:  # a family that does not say: nothing fitted
        return req
    try:
        plan = gpu_plan(used, cpus, req.workers_per_gpu, req.batch_size,
                        lambda batch: int(fam.gpu_memory_need(settings, batch) or 0))
    except DoesNotFit as e:
        raise RunError(f"GPU memory: {e}") from None
    for line in plan.lines:
        messages.say(line)
    return replace(req, workers_per_gpu=plan.workers_per_gpu, batch_size=plan.batch_size,
                   gpu_memory=plan.share, chosen=plan.lines[0])


def run(req: RunRequest) -> int:
    """The `run` command: plan, extract, merge on this node (or Ray); one shard only with shards."""
    req = _made_under(req)
    sharded = resolve_shard(req.num_shards, req.shard_index)
    if req.pkl is not None and sharded:
        raise RunError("--output_path exports after the merge, which a shard does not do: once the "
                       f"merge job is done, run `phoenix-keypoints export --out {req.out} --format "
                       f"legacy-pkl --to {req.pkl}`.")
    if sharded:
        _refuse_unavailable(req)
        return run_shard(_fit_gpus(req), *sharded)
    written = req.pkl.stat().st_mtime_ns if req.pkl is not None and req.pkl.exists() else None
    code = run_whole(req)
    if req.pkl is not None and code != 0 and (not req.pkl.exists() or
                                               req.pkl.stat().st_mtime_ns == written):
        messages.say(f"pkl not written ({req.pkl}): the run did not finish; {messages.RESUME}.")
    return code


def merge_command(rd: RunDir, allow_partial: bool) -> int:
    """`merge`: finish a run whose chunks are committed (the SLURM merge job runs this)."""
    info = rd.load()  # not a run folder: say so before taking a lock in it
    if Done.merged(rd, info):
        messages.result(f"complete: {rd.keypoints_path} ({info.merge.rows} frames) and "
                        f"{rd.tensors_dir}/ are up to date; nothing to do.")
        return 0
    with locked(rd):
        record = finish(rd, allow_partial=allow_partial)
    summary.merged(rd, record)
    return 0

