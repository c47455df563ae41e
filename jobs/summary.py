"""What the end (and the start) of a run tells the user: outputs, problems, failures, what to do."""

from __future__ import annotations

from jobs import messages
from jobs.rundir import RunDir
from jobs.runinfo import MergeInfo, RunInfo


def dataset_problems(info: RunInfo) -> None:
    """Listed videos that cannot be processed, and folders no corpus file lists."""
    problems = info.dataset.problems
    if problems:
        shown = [f"{v} ({p})" for v, p in problems.items()]
        messages.warn(f"{len(problems)} listed video(s) cannot be processed: "
                      f"{messages.listing(shown, 5)}")
    unlisted = info.dataset.unlisted_folders
    if unlisted:
        messages.note(f"{len(unlisted)} folder(s) on disk are in no corpus file and are skipped: "
                      f"{messages.listing(unlisted, 5)}")


def failed_videos(failed: dict[str, str]) -> str:
    """What to tell the user about videos that kept killing their worker, and what to do."""
    shown = [f"{v} ({why})" for v, why in sorted(failed.items())]
    return (
        f"{len(failed)} video(s) failed and have no rows: {messages.listing(shown)}. Check their "
        "frames (the worker logs in logs/ show MediaPipe's last words), fix or remove the bad "
        "frames, then run the same command with --retry-failed; or add --allow-partial to merge "
        "without them (run.json's merge section then lists them)."
    )


def merged(rd: RunDir, record: MergeInfo) -> None:
    """The outputs of a finished merge."""
    info = rd.load()
    per_split = ", ".join(f"{s} {n}" for s, n in sorted(record.frames_per_split.items()))
    messages.result(f"keypoints: {rd.keypoints_path} ({record.rows} frames: {per_split})")
    messages.result(f"tensors:   {rd.tensors_dir}/")
    messages.result(f"report:    phoenix-keypoints report --out {rd.path}  (quality page + "
                    "per-video figures)")
    if info.dataset.problems:
        messages.result(f"videos not on disk or without frames: {len(info.dataset.problems)} "
                        "(listed in run.json under dataset.problems)")
    if record.failed_videos:
        messages.say(f"FAILED videos (no rows): {', '.join(sorted(record.failed_videos))}")
    if record.partial:
        messages.say("partial merge: run.json's merge section lists what is missing")
