"""What the end (and the start) of a run tells the user: outputs, problems, failures, what to do."""

from __future__ import annotations

import json
import os
import shutil

from phoenix_keypoints.extract.keypoints.estimator import (
    DEFAULT_FAMILY,
    Declaration,
    declaration,
    family,
)
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.runinfo import DatasetInfo, MergeInfo, RunInfo
from phoenix_keypoints.jobs.schedule.scheduler import Outcome


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in counts.items())


def not_ok_frames(statuses: dict[str, int], worst: dict[str, int]) -> str | None:
    """"N of M frame(s) not ok: STATUS n, ...; most in VIDEO (n), ...", or None when all are ok."""
    bad = {k: n for k, n in statuses.items() if k != "ok"}
    if not bad:
        return None
    shown = [f"{v} ({n})" for v, n in worst.items()]
    return (f"{sum(bad.values())} of {sum(statuses.values())} frame(s) not ok: {_counts(bad)}; "
            f"most in {messages.listing(shown, 5)}")


def ignored_files(dataset: DatasetInfo) -> str | None:
    """The entries of frame folders skipped as no frames, with the first few named; None if none."""
    if not dataset.ignored_files:
        return None
    return (f"{dataset.ignored_files} file(s) in frame folders are no frames and were skipped "
            f"({_counts(dataset.ignored_reasons)}): {messages.listing(dataset.ignored_examples, 3)}"
            " (all of them: plan.parquet's `ignored` column)")


def dataset_problems(info: RunInfo) -> None:
    """Listed videos that cannot be processed, and folders no corpus file lists."""
    problems = info.dataset.problems
    if problems:
        shown = [f"{v} ({p})" for v, p in problems.items()]
        messages.warn(f"{info.dataset.problem_count} listed video(s) cannot be processed: "
                      f"{messages.listing(shown, 5, info.dataset.problem_count)}")
    unlisted = info.dataset.unlisted_folders
    if unlisted:
        messages.note(f"{len(unlisted)} folder(s) or video(s) on disk are in no corpus file and are "
                      f"skipped: {messages.listing(unlisted, 5)}")
    notes = info.dataset.notes
    if notes:
        messages.note(f"{len(notes)} video(s) with a note: "
                      f"{messages.listing([f'{v} ({n})' for v, n in notes.items()], 5)}")
    ignored = ignored_files(info.dataset)
    if ignored:
        messages.note(ignored)
    for line in input_anomalies(info):
        _warn_once(line)


_WARNED: set[str] = set()  # anomaly lines this process said already (at the start of its run)


def _warn_once(line: str) -> None:
    """An input anomaly, said at the start of a run and at the end of a merge, but once by one
    process: a merge alone (the SLURM merge job, `merge`) still says it, a whole run not twice."""
    if line not in _WARNED:
        _WARNED.add(line)
        messages.warn(line)


def input_anomalies(info: RunInfo) -> list[str]:
    """What the input holds that a careful user should know: archive anomalies, links leaving it."""
    d = info.dataset
    out = list(d.anomalies)
    if d.links_outside:
        how = ("followed (--no-follow-links leaves their videos out)" if info.options.follow_links
               else "not followed: their videos are left out (--no-follow-links)")
        out.append(f"{d.links_outside} link(s) lead outside the dataset, {how}: "
                   f"{messages.listing(d.links_outside_examples, 3)} (run.json "
                   "dataset.links_outside_examples; plan.parquet links)")
    return out


def idle_cores(workers: int, cpus: int, typed: str = "", estimator: str = DEFAULT_FAMILY,
               on_gpu: bool = False) -> str | None:
    """The warning for fewer workers than usable cores (None when every core has a worker); it
    names the flags the user typed (`typed`), not others, and what runs where (`estimator`, and
    `on_gpu`: its workers run it on their GPUs, as the family decides)."""
    if workers >= cpus:
        return None
    per_gpu = next((f for f in ("--num_workers_per_gpu", "--workers-per-gpu") if f in typed), "")
    fix = f"{per_gpu} {-(-cpus // max(1, workers))}" if per_gpu else f"--workers {cpus}"
    asked = f"{typed} asks for {workers}" if typed else f"{workers} worker slot(s) here"
    what = family(estimator).ENGINE
    where = (f"{what} runs on the workers' GPUs here, but each worker reads and decodes its frames "
             "on one CPU core: more workers may keep the GPUs busy, where their memory holds them"
             if on_gpu else f"{what} runs on the CPU here (GPUs only pin workers), one worker per core")
    return (f"{workers} worker(s) for {cpus} usable CPU core(s): {cpus - workers} core(s) will idle "
            f"({asked}). {where}: ask for {fix}" + (f", or leave out {typed}" if typed else ""))


def no_gpu_here() -> str:
    """Why no GPU is seen: what CUDA_VISIBLE_DEVICES says, else whether nvidia-smi is there."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return f"CUDA_VISIBLE_DEVICES={env!r} shows none"
    return "nvidia-smi lists none" if shutil.which("nvidia-smi") else "no nvidia-smi here"


def absent_gpus(pinned: list[str], visible: list[str] | None, typed: str = "") -> str | None:
    """The warning for workers pinned to GPUs this machine lacks (the older script's --num_gpus 4
    on a CPU node), None when every one is here (`visible` None: not known)."""
    missing = [g for g in pinned if visible is not None and g not in visible]
    if not missing:
        return None
    seen = f"visible: GPU(s) {','.join(visible)}" if visible else no_gpu_here()
    asked = f"{typed} pins" if typed else "the workers are pinned"
    return (f"{asked} workers to GPU(s) {','.join(missing)}, which this machine does not have "
            f"({seen}); those workers run on the CPU")


def shared_cores(workers: int, cpus: int, typed: str = "", on_gpu: bool = False) -> str | None:
    """The warning for more workers than usable cores where they run on the CPU: they take turns,
    so a run is no faster than one worker per core (None otherwise)."""
    if workers <= cpus or on_gpu:
        return None
    asked = f"{typed} asks for {workers}" if typed else f"{workers} worker slot(s) here"
    return (f"{workers} worker(s) share {cpus} usable CPU core(s) ({asked}): they take turns on "
            f"the cores, no faster than {cpus} and each using memory; ask for --workers {cpus}"
            + (f", or leave out {typed}" if typed else ""))


def starting(info: RunInfo, split_frames: dict[str, int], slots: list, cpus: int,
             writes: str, typed: str = "", unusable: int = 0, runs_on: str = "",
             on_gpu: bool = False, visible: list[str] | None = None) -> None:
    """What the run will do, before it does it: dataset, plan, workers, where it writes. The frames
    are those of the planned chunks: a video that cannot be processed (say a truncated archive
    ends inside it) counts among the videos, said so, but not among the frames. `typed`: the
    worker flags as the user typed them, for the idle-core warning; `visible`: the GPUs here."""
    d = info.dataset
    per_split = ", ".join(f"{s} {n}" for s, n in split_frames.items())
    left = f" ({unusable} cannot be processed)" if unusable else ""
    messages.say(f"dataset: {d.layout} at {d.given or d.root}: {info.plan.videos} video(s){left}, "
                 f"{sum(split_frames.values())} frame(s) ({per_split}); plan: {info.plan.chunks} "
                 "chunk(s)")
    gpus = sorted({s.gpu for s in slots if s.gpu})
    absent = absent_gpus(gpus, visible, typed)
    pinned = f"GPU(s) {','.join(gpus)}" if gpus else "no GPU"
    here = ("; no GPU on this machine" if not visible else "; some not on this machine") \
        if absent else ""
    messages.say(f"workers: {len(slots)} ({pinned}; 1 CPU each, of {cpus} usable{here}); writing "
                 f"{writes}")
    line = family(info.options.estimator).run_line(info.options.recorded) \
        if info.options.recorded else ""
    if line:  # e.g. the model files it runs
        messages.say(f"estimator: {info.options.estimator}: {line}{runs_on}")
    for warning in (absent, idle_cores(len(slots), cpus, typed, info.options.estimator, on_gpu),
                    shared_cores(min(len(slots), info.plan.chunks), cpus, typed, on_gpu)):
        if warning:
            messages.warn(warning)


def failed_videos(failed: dict[str, str]) -> str:
    """What to tell the user about videos that kept killing their worker, and what to do."""
    shown = [f"{v} ({why})" for v, why in sorted(failed.items())]
    return (
        f"{len(failed)} video(s) failed and have no rows: {messages.listing(shown)}. Check their "
        "frames (the worker logs in logs/ show the estimator's last words), fix or remove the bad "
        "frames, then run the same command with --retry-failed; or add --allow-partial to merge "
        "without them (run.json's merge section then lists them)."
    )


def tensors_person(rd: RunDir, decl: Declaration) -> str:
    """Which person the run's tensors hold, as their points.json says (with the most persons a
    frame holds), else in the declaration's words alone."""
    from phoenix_keypoints.extract.outputs.tensors import POINTS_JSON

    try:
        return str(json.loads((rd.tensors_dir / POINTS_JSON).read_text())["person"])
    except (OSError, ValueError, KeyError, TypeError):
        return decl.person_note()


def merged(rd: RunDir, record: MergeInfo) -> None:
    """The outputs of a finished merge."""
    info = rd.load()
    per_split = ", ".join(f"{s} {n}" for s, n in sorted(record.frames_per_split.items()))
    messages.result(f"keypoints: {rd.keypoints_path} ({record.rows} frames: {per_split})")
    messages.result(f"tensors:   {rd.tensors_dir}/")
    decl = declaration(info.options.settings())
    if decl.people:  # a multi-person family's: whose points they hold (points.json says it too)
        messages.result(f"person:    {tensors_person(rd, decl)}")
    page = "quality page" if decl.quality else "page"
    messages.result(f"report:    phoenix-keypoints report --out {rd.path}  ({page} + per-video "
                    "figures)")
    if info.dataset.problems:
        messages.result(f"videos not on disk or without frames: {info.dataset.problem_count} "
                        "(the first in run.json under dataset.problems, all in plan.parquet)")
    not_ok = not_ok_frames(record.statuses, record.worst_videos)
    if not_ok:
        messages.warn(f"{not_ok} (their rows in keypoints.parquet say why: status, note)")
    if record.failed_videos:
        messages.say(f"FAILED videos (no rows): {', '.join(sorted(record.failed_videos))}")
    if record.partial:
        messages.say("partial merge: run.json's merge section lists what is missing")
    lines = input_anomalies(info)
    said = [line for line in lines if line in _WARNED]
    for line in lines:
        _warn_once(line)
    if said:  # at the start of this run: pointed at, not said again
        messages.note(f"{len(said)} warning(s) about the input above, at the start (run.json: "
                      "dataset.anomalies, dataset.links_outside_examples)")


def ended(outcome: Outcome, what: str) -> int:
    """The exit status for a stopped or failed extraction, with what to tell the user."""
    if outcome.signal:
        messages.say(f"{what}stopped; run the same command to resume ({len(outcome.done)} chunk(s) "
                     "committed this time).")
        return 128 + outcome.signal
    if outcome.error:
        messages.error(outcome.error)
        return 2 if outcome.refused else 1
    return 0
