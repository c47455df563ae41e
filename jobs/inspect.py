"""Run-folder glue for `report`, `show` and `diff`: where a run keeps what they read.

The only reads of run.json here are the dataset root, the dataset's problems (videos without
frames) and the merge's failed videos; the rest comes from plan.parquet and keypoints.parquet.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pandas as pd
import pyarrow as pa

from phoenix_keypoints.extract.sources.archive_index import split_root
from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError

REPORT_DIR = "report"


def _keypoints(rd: RunDir) -> Path:
    if not rd.keypoints_path.is_file():
        raise RunError(f"{rd.path} has no keypoints.parquet yet: the run has not been merged. "
                       f"Finish it with `phoenix-keypoints run --out {rd.path}` (or `merge`), "
                       "then ask again.")
    return rd.keypoints_path


def _facts(rd: RunDir) -> tuple[Path, dict[str, str], dict[str, str]]:
    """(dataset root, video -> why it has no frames, video -> why its extraction failed)."""
    info = rd.load()
    rd.use_archive_index(write=False)  # frames drawn from an archive are found through the run's index
    failed = info.merge.failed_videos if info.merge is not None else {}
    return Path(info.dataset.root), dict(info.dataset.problems), dict(failed)


def frames_root(root: Path) -> tuple[Path | None, str]:
    """The dataset root when its frames can be read here, else None and what the page says."""
    if root.is_dir() or split_root(root) is not None:
        return root, ""
    return None, (f"The dataset folder {root} is gone or not reachable from here, so there are no "
                  "frame strips; every figure and timeline comes from keypoints.parquet alone.")


def plan_videos(rd: RunDir, problems: dict[str, str]) -> pd.DataFrame:
    """Every planned video: split, video, speaker, problem (why it has no frames, else None)."""
    plan = rd.load_plan().select(["split", "video", "speaker", "problem"]).to_pandas()
    plan["problem"] = [p or problems.get(v) or None
                       for v, p in zip(plan["video"], plan["problem"], strict=True)]
    return plan


def report_input(out: Path):  # -> extract.inspect.report.ReportInput (imported lazily: matplotlib etc.)
    """What `report --out RUN` reads, gathered from the run folder."""
    from phoenix_keypoints.extract.inspect.report import ReportInput

    rd = RunDir(out)
    root, problems, failed = _facts(rd)
    kp = _keypoints(rd)
    frames, note = frames_root(root)
    return ReportInput(kp, str(rd.path), plan_videos(rd, problems), failed, frames, note,
                       rd.tensors_dir if rd.tensors_dir.is_dir() else None)


def report_dir(out: Path) -> Path:
    return RunDir(out).path / REPORT_DIR


def show_input(out: Path, video: str) -> tuple[pa.Table, Path | None, str]:
    """One video's rows, the dataset root (None when gone) and a note when it is gone."""
    from phoenix_keypoints.extract.inspect.rows import video_rows

    rd = RunDir(out)
    root, problems, failed = _facts(rd)
    rows = video_rows(_keypoints(rd), [video])
    if rows.num_rows == 0:
        raise RunError(_no_rows(rd, video, problems, failed))
    frames, _ = frames_root(root)
    note = "" if frames is not None else f"the dataset folder {root} is gone or not reachable from here"
    return rows, frames, note


def show_rate(rows: pa.Table, root: Path | None, asked: float | None) -> tuple[float, str]:
    """(frames a second for show's MP4/GIF, how it is said): --fps when given, else the video's
    own (a video file's stream, else its rows' times), else PHOENIX's 25 (frame folders)."""
    from phoenix_keypoints.extract.outputs.export import PHOENIX_FPS, video_fps

    if asked:
        return asked, f"{asked:g} fps (--fps)"
    rate = video_fps(rows, root, 0.0)
    if rate:
        return rate, f"{rate:.4g} fps, the video's own"
    return float(PHOENIX_FPS), (f"{PHOENIX_FPS} fps: frame folders carry no rate, PHOENIX's is "
                                "assumed (--fps F for another)")


def _no_rows(rd: RunDir, video: str, problems: dict[str, str], failed: dict[str, str]) -> str:
    if video in failed:
        return f"{video} has no keypoints: its extraction failed ({failed[video]})."
    if video in problems:
        return f"{video} has no keypoints: {problems[video]}."
    names = rd.load_plan().column("video").to_pylist()
    close = difflib.get_close_matches(video, names, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"{rd.path} has no video named {video}.{hint}"


def keypoints_of(path: Path) -> Path:
    """diff's argument: a run folder (its keypoints.parquet) or a keypoints .parquet file itself."""
    path = Path(path)
    if path.is_file() and path.suffix == ".parquet":
        return path
    rd = RunDir(path)
    if not path.is_dir():
        raise RunError(f"{path} is neither a run folder nor a keypoints .parquet file.")
    rd.load()  # not a run folder: RunDir says so
    return _keypoints(rd)
