"""Load the run a folder holds, or plan a new one there; --fresh; refuse a folder of another run;
re-plan a run whose corpus changed.

A run folder belongs to one dataset and one set of options (its fingerprint). Asking for anything
else in the same folder is refused unless --fresh says to start over, so a resume can never mix
parts of two different runs. run.json is written last: its presence means the plan is complete.

The corpus itself may change under a run (videos or frames added, removed, moved between splits,
corpus text corrected): every resume lists it again and compares it with the stored plan
(jobs.run.changes). A change is re-planned around the committed parts (jobs.run.plan.extend_plan): only
the videos whose frames are new or other are extracted, removed ones leave the merged output, and
run.json keeps the history (`changes`). --frozen keeps the stored plan and only warns.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pyarrow as pa

from phoenix_keypoints.extract.corpora import discover, input_key, no_frames_message
from phoenix_keypoints.extract.corpora.base import Dataset, DatasetError
from phoenix_keypoints.extract.corpora.phoenix import FRAMES_DIR
from phoenix_keypoints.extract.keypoints.estimator import family
from phoenix_keypoints.extract.keypoints.versions import value_versions
from phoenix_keypoints.extract.sources import links
from phoenix_keypoints.jobs import faults, messages
from phoenix_keypoints.jobs.run.changes import PlanDiff, diff_plans
from phoenix_keypoints.jobs.run.identity import follow_move, given_path, input_arg, manifest_root
from phoenix_keypoints.jobs.run.merge import rewrite_file_record
from phoenix_keypoints.jobs.run.options import RunOptions
from phoenix_keypoints.jobs.run.plan import (
    Extension,
    PlanRecord,
    cuts_digest,
    extend_plan,
    make_plan,
    plan_record,
    with_record,
)
from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError, versions
from phoenix_keypoints.jobs.rundir.locks import locked
from phoenix_keypoints.jobs.rundir.parts import read_part_info, reject
from phoenix_keypoints.jobs.rundir.runinfo import (
    DatasetInfo,
    PlanChange,
    PlanInfo,
    PlanOptions,
    RunInfo,
    fingerprint,
)

_OUR_FILES = ("run.json", "plan.parquet", "progress.json", "keypoints.parquet")
_OUR_DIRS = ("parts", "tensors", "claims", "archive")
IGNORED_EXAMPLES = 10  # skipped entries named in run.json (all are in the plan's `ignored` column)
PROBLEM_EXAMPLES = 100  # listed videos with a problem named in run.json (all: the plan's `problem`)


def clear_run(rd: RunDir) -> None:
    """--fresh: remove this tool's files from the folder (and nothing else the user put there)."""
    for name in _OUR_FILES:
        (rd.path / name).unlink(missing_ok=True)
    for p in rd.path.glob("progress-shard-*.json"):
        p.unlink(missing_ok=True)
    for name in _OUR_DIRS:
        shutil.rmtree(rd.path / name, ignore_errors=True)


def dataset_info(ds: Dataset, given: str = "", key: str = "") -> DatasetInfo:
    """run.json's dataset record; `given` is --dataset (or --manifest) as typed, `key` its
    input_key (given and key default to the dataset's root, for runs made without a command line)."""
    ignored = [(f"{v.folder.removeprefix(FRAMES_DIR + '/')}/{name}", reason)
               for v in ds.videos for name, reason in v.ignored]
    reasons: dict[str, int] = {}
    for _, reason in ignored:
        reasons[reason] = reasons.get(reason, 0) + 1
    return DatasetInfo(
        root=str(ds.root.resolve()), layout=ds.layout, fingerprint=ds.fingerprint(),
        videos=len(ds.videos), frames=ds.num_frames,
        problems=dict(itertools.islice(((v.name, v.problem) for v in ds.videos if v.problem),
                                       PROBLEM_EXAMPLES)),
        problems_total=sum(1 for v in ds.videos if v.problem),
        unlisted_folders=list(ds.unlisted), ignored_files=len(ignored), ignored_reasons=reasons,
        ignored_examples=[f"{path} ({reason})" for path, reason in ignored[:IGNORED_EXAMPLES]],
        manifest=ds.manifest, entry=ds.entry, decoder=_decoder(ds),
        notes={v.name: v.note for v in ds.videos if v.note},
        anomalies=list(getattr(getattr(ds.root, "index", None), "notes", [])),
        links_inside=ds.links_inside, links_outside=len(ds.links_outside),
        links_outside_examples=ds.links_outside[:links.SHOWN],
        given=given or str(ds.root / (ds.manifest or ds.entry)),
        key=key or input_key(Path(str(ds.root)) / (ds.manifest or ds.entry)),
    )


def _decoder(ds: Dataset) -> str:
    """The decoder and its version, when any video file is decoded (it decides the pixels)."""
    if not any(v.source == "video" for v in ds.videos):
        return ""
    from phoenix_keypoints.extract.sources.video import decoder_version

    return decoder_version()


def new_run(ds: Dataset, options: PlanOptions, workers: int, num_shards: int = 1,
            seconds: float = 0.0, given: str = "") -> tuple[RunInfo, pa.Table]:
    """(run.json record, plan table) for a dataset: the one place both are made."""
    plan = make_plan(ds, workers, options.chunk_frames)
    chunks = {c for c in plan["chunk"].to_pylist() if c >= 0}
    info = PlanInfo(chunks=len(chunks), videos=len(ds.videos), frames=ds.num_frames,
                    seconds=round(seconds, 3), workers=workers, cuts=cuts_digest(plan))
    dataset = dataset_info(ds, given)
    run = RunInfo.new(dataset, options, info,
                      versions() | value_versions(options.estimator, dataset.decoder), num_shards)
    return run, with_record(plan, PlanRecord(run.fingerprint))


def _resume(rd: RunDir, opts: RunOptions, num_shards: int | None, workers: int = 0,
            frozen: str = "") -> RunInfo:
    info = follow_move(rd, rd.load(), opts.dataset)
    diffs = opts.conflicts(info, num_shards)
    if diffs:
        raise RunError(f"{rd.path} holds a run with other {', '.join(diffs)}. Use another --out, or "
                       "start afresh with the options you want: "
                       f"{messages.fresh(rd.path, input_arg(info, opts.dataset), opts.typed)}.")
    # e.g. model files still the ones the run recorded
    family(info.options.estimator).check_recorded(opts.settings(info))
    info = follow_moves(rd, info, opts.asked.get(info.options.estimator))
    return follow_corpus(rd, info, check_corpus(info, rd.load_plan()), workers, frozen)


def follow_moves(rd: RunDir, info: RunInfo, asked: dict | None, merged: bool = False) -> RunInfo:
    """The run with the files its family recorded where its options name them now, when they
    moved (the same bytes: a resume refuses other ones; the family's `moved_files` says which,
    by default each recorded model file: contract.moved_model_files): run.json follows them, as
    it follows a moved corpus, and keeps each move (`model_moves`). `merged`: a finished run,
    asked again, which holds no lock (taken here for a move), whose keypoints.parquet names
    them too, written again first (a crash in between: the next `run` finds the move again)."""
    if not asked:
        return info
    recorded, lines = family(info.options.estimator).moved_files(asked, info.options.recorded)
    if not lines:
        return info
    new = replace(info, options=replace(info.options, recorded=recorded),
                  model_moves=[*info.model_moves, *lines])
    with locked(rd) if merged else contextlib.nullcontext():
        if merged:
            rewrite_file_record(rd, new)
        rd.save(new)
    messages.note(f"the model file(s) moved: {'; '.join(lines)} (the bytes the run recorded); "
                  f"run.json{' and keypoints.parquet' if merged else ''} follow them")
    return new


# --- the corpus as it is now against the stored plan ----------------------------------------------
@dataclass
class CorpusCheck:
    """The corpus listed again (no frame read) and compared with the stored plan."""

    ds: Dataset
    plan: pa.Table  # the stored plan
    now: pa.Table  # the plan the corpus as it is now makes (its cuts unused)
    diff: PlanDiff
    behind: bool  # run.json predates the stored plan: a re-plan stopped between the two writes

    def current(self, info: RunInfo) -> bool:
        """Whether the stored plan still describes the corpus (nothing to re-plan)."""
        return not (self.diff or self.behind or self.ds.fingerprint() != info.dataset.fingerprint)


def check_corpus(info: RunInfo, plan: pa.Table) -> CorpusCheck:
    """List the run's corpus as it is now and compare it with the stored plan."""
    o = info.options
    ds = discover(given_path(info), o.splits, o.videos, o.limit_videos, o.max_samples_per_split,
                  o.follow_links, manifest_root(info))
    now = make_plan(ds, info.plan.workers, o.chunk_frames)
    own = plan_record(plan).fingerprint
    return CorpusCheck(ds, plan, now, diff_plans(plan, now), bool(own) and own != info.fingerprint)


def follow_corpus(rd: RunDir, info: RunInfo, check: CorpusCheck, workers: int,
                  frozen: str = "") -> RunInfo:
    """The run to go on with: as stored when the corpus is as planned (or `frozen`, which names why
    the plan is kept: then only a warning), else re-planned around what is committed."""
    if check.current(info):
        return info
    if frozen and check.behind:
        raise RunError(f"a re-plan of {rd.path} was interrupted before run.json was written; "
                       f"{frozen} cannot go on from it. Run `phoenix-keypoints run --out {rd.path}` "
                       "to complete it.")
    if frozen:
        messages.warn(f"the corpus changed since {rd.path} was planned: {check.diff.summary()}. "
                      f"{frozen}")
        return info
    if check.ds.num_frames == 0:
        raise DatasetError(no_frames_message(check.ds))
    return _replan(rd, info, check, workers or info.plan.workers)


def _part_fingerprints(rd: RunDir, plan: pa.Table) -> dict[int, str]:
    """chunk -> the run fingerprint its committed part carries (footers only)."""
    out = {}
    for c in sorted({c for c in plan["chunk"].to_pylist() if c >= 0}):
        path = rd.part_path(c)
        if path.exists():
            try:
                out[c] = read_part_info(path)[1]
            except ValueError:
                continue  # not trusted anyway: the resume's scan moves it aside
    return out


def _replan(rd: RunDir, info: RunInfo, check: CorpusCheck, workers: int) -> RunInfo:
    """Cut the changed corpus around the committed parts; save plan then run.json; say what.

    A re-plan stopped between the two writes (check.behind) is completed from the stored plan,
    which holds its history entry; what changed since is one more entry."""
    record = plan_record(check.plan)
    plan, ext = extend_plan(check.plan, check.now, check.diff.redo,
                            _part_fingerprints(rd, check.plan), record.fingerprint or info.fingerprint,
                            workers, info.options.chunk_frames)
    dataset = replace(dataset_info(check.ds, info.dataset.given, info.dataset.key),
                      root=info.dataset.root, moves=info.dataset.moves)
    chunks = {c for c in plan["chunk"].to_pylist() if c >= 0}
    plan_info = replace(info.plan, chunks=len(chunks), videos=len(check.ds.videos),
                        frames=check.ds.num_frames, cuts=cuts_digest(plan))
    new = replace(info, dataset=dataset, plan=plan_info, merge=None, merge_interrupted=False,
                  fingerprint=fingerprint(dataset.fingerprint, info.options, plan_info.cuts))
    kept = {c: k for c, k in ext.kept.items() if k.dropped or k.fingerprint != new.fingerprint}
    change = _change(info, new, plan, check.diff, ext, len(chunks))
    pending = [PlanChange(**record.change)] if check.behind and record.change else []
    new.changes = [*info.changes, *pending, *([change] if check.diff or not pending else [])]
    rd.save_plan(with_record(plan, PlanRecord(new.fingerprint, kept, asdict(new.changes[-1]))))
    faults.after_plan()
    rd.save(new)  # last: until it is written, the next resume completes this re-plan
    for c in ext.retired:
        if rd.part_path(c).exists():
            reject(rd, rd.part_path(c), "its chunk was retired: none of its videos is in the corpus "
                   "as it was when the part was made (re-planned after the corpus changed)")
    _say_change(rd, new.changes[-1], ext)
    return new


def _change(info: RunInfo, new: RunInfo, plan: pa.Table, diff: PlanDiff, ext: Extension,
            chunks: int) -> PlanChange:
    fresh = set(ext.new_chunks)
    frames = [n for c, n in zip(plan["chunk"].to_pylist(), plan["num_frames"].to_pylist(),
                                strict=True) if c in fresh]
    return PlanChange(time=time.time(), before=info.fingerprint, after=new.fingerprint,
                      changes=diff.counts(), summary=diff.summary(), redo_videos=len(frames),
                      redo_frames=sum(frames), new_chunks=ext.new_chunks,
                      retired_chunks=ext.retired, kept_chunks=chunks - len(fresh))


def _say_change(rd: RunDir, change: PlanChange, ext: Extension) -> None:
    messages.say(f"the corpus changed since {rd.path} was planned: {change.summary}")
    c = change.changes
    gone = c["removed"] + c["moved"] + c["reframed"]
    redo = (f"{change.redo_videos} video(s) ({change.redo_frames} frame(s)) to extract in "
            f"{len(change.new_chunks)} new chunk(s)" if change.new_chunks else "no frame to extract")
    left = f"; the old rows of {gone} video(s) leave the merged output" if gone else ""
    retired = f" ({len(ext.retired)} retired)" if ext.retired else ""
    messages.say(f"re-planned: {redo}{left}; {change.kept_chunks} chunk(s) kept as they were"
                 f"{retired}; outputs merged again (history: run.json `changes`)")


def _archive_problem(ds: Dataset) -> None:
    """A damaged archive (truncated, ...) is used as far as it can be read: say where it ends."""
    problem = getattr(getattr(ds.root, "index", None), "problem", "")
    if problem:
        messages.warn(f"{ds.root}: {problem}. Videos whose frames lie beyond have no folder "
                      "(listed at the start); download the archive again to get them.")


def load_or_plan(rd: RunDir, opts: RunOptions, workers: int, fresh: bool = False,
                 num_shards: int | None = None, frozen: str = "") -> RunInfo:
    """The run in rd (checked against what was asked and against its corpus as it is now:
    re-planned when it changed, unless `frozen` says why not), or a new one planned for `workers`."""
    if fresh:
        clear_run(rd)
    rd.use_archive_index()
    if rd.exists():
        return _resume(rd, opts, num_shards, workers, frozen)
    if opts.dataset is None:
        raise RunError(f"{rd.path} holds no run yet: pass {messages.ANY_INPUT} to start one "
                       "(a corpus folder, a folder of videos or an archive of one; or --manifest "
                       "FILE).")
    if any(rd.parts_dir.glob("*.parquet")):
        raise RunError(f"{rd.path} has parts but no run.json. Use another --out, or start afresh: "
                       f"{messages.fresh(rd.path)}.")
    t0 = time.monotonic()
    options = opts.resolved()
    ds = discover(opts.dataset, options.splits, options.videos, options.limit_videos,
                  options.max_samples_per_split, options.follow_links, opts.manifest_root)
    if ds.num_frames == 0:  # nothing to do is not success: say where we looked
        raise DatasetError(no_frames_message(ds))
    _archive_problem(ds)
    check_estimator(options)
    info, plan = new_run(ds, options, workers, num_shards or 1, time.monotonic() - t0,
                         str(opts.dataset))
    rd.save_plan(plan)
    rd.save(info)  # last: its presence means the plan is complete
    return info


def check_estimator(options: PlanOptions) -> None:
    """Refuse, before planning, an estimator that cannot run here as asked."""
    family(options.estimator).check_settings(options.settings())


FROZEN = ("--frozen: the stored plan is kept, so the outputs describe the corpus as it was planned "
          "(`phoenix-keypoints verify` names the differences); run without --frozen to extract them.")
SHARD_FROZEN = ("The shards of an array share the plan `slurm` made, so this one keeps it: run "
                "`phoenix-keypoints slurm` with the same --out and --num-shards again once the array "
                "is done, to extract the changes.")


def plan_shared(rd: RunDir, opts: RunOptions, num_shards: int, workers: int) -> RunInfo:
    """Load the run, or plan it once for num_shards shards when --dataset says what to plan.

    The `slurm` command plans before it submits, so array tasks normally only load. A task started
    by hand with --dataset before any plan exists plans under a blocking lock; should the shared
    filesystem not honour the lock, two planners write the same deterministic plan and run.json
    (same fingerprint), so either one's parts are trusted by the other; the versions of the run.json
    written last bind every shard that checks after it is written (jobs.run.todo.shard_versions
    reads it from the folder), which a filesystem without working locks cannot make airtight.
    """
    if rd.exists():
        return load_or_plan(rd, opts, workers, num_shards=num_shards, frozen=SHARD_FROZEN)
    if opts.dataset is None:
        raise RunError(
            f"{rd.path} holds no plan yet. Make it before the shards start: `phoenix-keypoints "
            f"slurm {messages.ANY_INPUT} --out {messages.quote(rd.path)} --num-shards {num_shards}` "
            "(plans, then writes or submits the array), or pass --dataset to this shard."
        )
    with locked(rd, "plan", wait=True):
        return load_or_plan(rd, opts, workers, num_shards=num_shards, frozen=SHARD_FROZEN)
