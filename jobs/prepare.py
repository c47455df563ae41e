"""Load the run a folder holds, or plan a new one there; --fresh; refuse a folder of another run.

A run folder belongs to one dataset and one set of options (its fingerprint). Asking for anything
else in the same folder is refused unless --fresh says to start over, so a resume can never mix
parts of two different runs. run.json is written last: its presence means the plan is complete.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pyarrow as pa

from extract.corpora import discover, input_key, no_frames_message
from extract.corpora.base import Dataset, DatasetError
from extract.corpora.phoenix import FRAMES_DIR
from extract.holistic import HolisticOptions, check_model
from extract.sources import links
from jobs import messages
from jobs.identity import given_path, input_arg
from jobs.locks import locked
from jobs.options import RunOptions
from jobs.plan import cuts_digest, make_plan
from jobs.rundir import RunDir, RunError, versions
from jobs.runinfo import DatasetInfo, PlanInfo, PlanOptions, RunInfo

_OUR_FILES = ("run.json", "plan.parquet", "progress.json", "keypoints.parquet")
_OUR_DIRS = ("parts", "tensors", "claims", "archive")
IGNORED_EXAMPLES = 10  # skipped entries named in run.json (all are in the plan's `ignored` column)


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
        problems={v.name: v.problem for v in ds.videos if v.problem},
        unlisted_folders=list(ds.unlisted), ignored_files=len(ignored), ignored_reasons=reasons,
        ignored_examples=[f"{path} ({reason})" for path, reason in ignored[:IGNORED_EXAMPLES]],
        manifest=ds.manifest, decoder=_decoder(ds),
        notes={v.name: v.note for v in ds.videos if v.note},
        anomalies=list(getattr(getattr(ds.root, "index", None), "notes", [])),
        links_inside=ds.links_inside, links_outside=len(ds.links_outside),
        links_outside_examples=ds.links_outside[:links.SHOWN],
        given=given or str(ds.root / ds.manifest if ds.manifest else ds.root),
        key=key or input_key(Path(str(ds.root)) / ds.manifest),
    )


def _decoder(ds: Dataset) -> str:
    """The decoder and its version, when any video file is decoded (it decides the pixels)."""
    if not any(v.source == "video" for v in ds.videos):
        return ""
    from extract.sources.video import decoder_version

    return decoder_version()


def new_run(ds: Dataset, options: PlanOptions, workers: int, num_shards: int = 1,
            seconds: float = 0.0, given: str = "") -> tuple[RunInfo, pa.Table]:
    """(run.json record, plan table) for a dataset: the one place both are made."""
    plan = make_plan(ds, workers, options.chunk_frames)
    chunks = {c for c in plan["chunk"].to_pylist() if c >= 0}
    info = PlanInfo(chunks=len(chunks), videos=len(ds.videos), frames=ds.num_frames,
                    seconds=round(seconds, 3), workers=workers, cuts=cuts_digest(plan))
    return RunInfo.new(dataset_info(ds, given), options, info, versions(), num_shards), plan


def _resume(rd: RunDir, opts: RunOptions, num_shards: int | None) -> RunInfo:
    info = rd.load()
    diffs = opts.conflicts(info, num_shards)
    if diffs:
        raise RunError(f"{rd.path} holds a run with other {', '.join(diffs)}. Use another --out, or "
                       "start afresh with the options you want: "
                       f"{messages.fresh(rd.path, input_arg(info, opts.dataset))}.")
    o = info.options
    ds = discover(given_path(info), o.splits, o.videos, o.limit_videos, o.max_samples_per_split,
                  o.follow_links)
    if ds.fingerprint() != info.dataset.fingerprint:
        raise RunError(f"the dataset at {ds.root} changed since {rd.path} was planned (its corpus "
                       "files, or which frame files there are). Start again on the data as it is now: "
                       f"{messages.fresh(rd.path, input_arg(info, opts.dataset))}.")
    return info


def _archive_problem(ds: Dataset) -> None:
    """A damaged archive (truncated, ...) is used as far as it can be read: say where it ends."""
    problem = getattr(getattr(ds.root, "index", None), "problem", "")
    if problem:
        messages.warn(f"{ds.root}: {problem}. Videos whose frames lie beyond have no folder "
                      "(listed at the start); download the archive again to get them.")


def load_or_plan(rd: RunDir, opts: RunOptions, workers: int, fresh: bool = False,
                 num_shards: int | None = None) -> RunInfo:
    """The run in rd (checked against what was asked), or a new one planned for `workers`."""
    if fresh:
        clear_run(rd)
    rd.use_archive_index()
    if rd.exists():
        return _resume(rd, opts, num_shards)
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
                  options.max_samples_per_split, options.follow_links)
    if ds.num_frames == 0:  # nothing to do is not success: say where we looked
        raise DatasetError(no_frames_message(ds))
    _archive_problem(ds)
    check_model(HolisticOptions.from_dict(options.holistic))
    info, plan = new_run(ds, options, workers, num_shards or 1, time.monotonic() - t0,
                         str(opts.dataset))
    rd.save_plan(plan)
    rd.save(info)  # last: its presence means the plan is complete
    return info


def plan_shared(rd: RunDir, opts: RunOptions, num_shards: int, workers: int) -> RunInfo:
    """Load the run, or plan it once for num_shards shards when --dataset says what to plan.

    The `slurm` command plans before it submits, so array tasks normally only load. A task started
    by hand with --dataset before any plan exists plans under a blocking lock; should the shared
    filesystem not honour the lock, two planners write the same deterministic plan and run.json
    (same fingerprint), so either one's parts are trusted by the other.
    """
    if rd.exists():
        return load_or_plan(rd, opts, workers, num_shards=num_shards)
    if opts.dataset is None:
        raise RunError(
            f"{rd.path} holds no plan yet. Make it before the shards start: `phoenix-keypoints "
            f"slurm {messages.ANY_INPUT} --out {messages.quote(rd.path)} --num-shards {num_shards}` "
            "(plans, then writes or submits the array), or pass --dataset to this shard."
        )
    with locked(rd, "plan", wait=True):
        return load_or_plan(rd, opts, workers, num_shards=num_shards)
