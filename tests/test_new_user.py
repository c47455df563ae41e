"""What a new user trips on in the first hour, round three (issue 53): progress in a log, the
rate of a video in report and show, the hints of refusals, names not found."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import cv2
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import assert_no_traceback, popen_cli, run_cli
from kinds import clip

NTSC = Fraction(30000, 1001)

LINE = re.compile(r"frames: (\d+)/(\d+) committed \([\d.]+ %\), (\d+) in flight; "
                  r"[\d.]+ frames/s, (about .+ left|time left not known yet|all frames extracted)")


def committed_rows(run: Path) -> int:
    """Rows in the parts committed now (a part is committed once under its final name)."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in (run / "parts").glob("chunk-*.parquet"))


def test_progress_in_a_log_says_committed_and_in_flight(sample_root: Path, tmp_path: Path) -> None:
    """stderr a pipe: lines (no bar) saying what is committed and what is in flight, the
    committed count never above the rows of the parts on disk when the line is read."""
    run = tmp_path / "run"
    proc = popen_cli(["run", "--dataset", sample_root, "--out", run, "--chunk-frames", "20",
                      "--workers", "1"])
    seen: list[tuple[int, int, int]] = []
    lines = []
    assert proc.stderr is not None
    for raw in proc.stderr:
        lines.append(raw)
        m = LINE.search(raw)
        if m:
            on_disk = committed_rows(run) if (run / "parts").is_dir() else 0
            committed, total, flight = int(m[1]), int(m[2]), int(m[3])
            assert committed <= on_disk, (raw, on_disk)
            seen.append((committed, total, flight))
    assert proc.wait(timeout=300) == 0, "".join(lines)
    text = "".join(lines)
    assert "\r" not in text and "it/s" not in text, text  # no bar redrawn into the log
    assert len(seen) >= 3, text
    assert seen[-1] == (82, 82, 0), text
    assert any(flight > 0 for _, _, flight in seen), text  # in flight is told apart
    assert [c for c, _, _ in seen] == sorted(c for c, _, _ in seen)


# --- the rate of a video in report and show (and show's --to folder) ------------------------------

@pytest.fixture(scope="module")
def ntsc_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of one 8-frame mp4 at 30000/1001 fps (a rate no constant would give)."""
    folder = tmp_path_factory.mktemp("ntsc")
    video = clip(folder / "signer.mp4", 0, 8, NTSC)
    out = folder / "run"
    proc = run_cli(["run", "--dataset", video, "--out", out])
    assert proc.returncode == 0, proc.stderr
    return out


def test_show_writes_the_videos_rate_into_a_folder_not_there_yet(ntsc_run: Path,
                                                                 tmp_path: Path) -> None:
    dest = tmp_path / "new" / "folder" / "clip.mp4"
    proc = run_cli(["show", "--out", ntsc_run, "--video", "signer", "--to", dest])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "29.97 fps" in proc.stdout, proc.stdout
    cap = cv2.VideoCapture(str(dest))
    try:
        assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(float(NTSC), abs=0.01)
        assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 8
    finally:
        cap.release()
    assert "deprecated pixel format" not in proc.stderr, proc.stderr
    asked = run_cli(["show", "--out", ntsc_run, "--video", "signer", "--to", tmp_path / "a.gif",
                     "--fps", "10"])
    assert asked.returncode == 0 and "10 fps (--fps)" in asked.stdout, asked.stdout


def test_report_speaks_of_time_at_the_videos_rate(ntsc_run: Path) -> None:
    proc = run_cli(["report", "--out", ntsc_run, "--min-pose-rate", "1.5"])  # flagged: a card
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    page = (ntsc_run / "report" / "index.html").read_text()
    assert "here 1.7 s at 29.97 fps" in page
    assert "PHOENIX's 25 fps" not in page and "here 2.0 s" not in page


def test_timeline_and_show_rates_say_where_they_come_from() -> None:
    from phoenix_keypoints.extract.inspect.rows import rate_said
    from phoenix_keypoints.jobs.inspect import show_rate

    assert rate_said(29.97002997) == (29.97002997, "29.97 fps")
    fps, said = rate_said(None)
    assert fps == 25 and "frame folders carry no rate" in said
    rows = pa.table({"image": ["train/a/images0001.png", "train/a/images0002.png"],
                     "time_s": pa.array([None, None], pa.float64())})
    fps, said = show_rate(rows, None, None)
    assert fps == 25 and "PHOENIX's" in said and "--fps" in said


# --- the --fresh hint is the whole command asked ---------------------------------------------------

def test_fresh_hint_repeats_every_option_asked(ntsc_run: Path) -> None:
    video = ntsc_run.parent / "signer.mp4"
    for typed, said in ((["--limit-videos", "1"], "limit_videos (none when planned, 1 asked)"),
                        (["--model-complexity", "2"], "model_complexity (1 when planned, 2 asked)")):
        proc = run_cli(["run", "--out", ntsc_run, *typed, "--dataset", video])
        assert_no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert said in proc.stderr, proc.stderr
        hint = f"`phoenix-keypoints run --out {ntsc_run} {' '.join(typed)} --fresh --dataset {video}`"
        assert hint in proc.stderr, proc.stderr
    proc = run_cli(["run", "--output_path", ntsc_run.parent / "x.pkl", "--out", ntsc_run,
                    "--num_gpus", "0", "--limit-videos", "1"])  # no input typed: the run's own
    assert (f"`phoenix-keypoints run --output_path {ntsc_run.parent / 'x.pkl'} --out {ntsc_run} "
            f"--num_gpus 0 --limit-videos 1 --fresh --dataset {video}`") in proc.stderr, proc.stderr


# --- the older script's --num_gpus on a machine without them ----------------------------------------

def test_num_gpus_without_gpus_says_none_is_here(ntsc_run: Path, tmp_path: Path) -> None:
    video = ntsc_run.parent / "signer.mp4"
    proc = run_cli(["run", "--dataset", video, "--out", tmp_path / "r", "--num_gpus", "4"],
                   env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr
    assert "workers: 4 (GPU(s) 0,1,2,3; 1 CPU each, of " in proc.stderr, proc.stderr
    assert " usable; no GPU on this machine); writing" in proc.stderr, proc.stderr
    assert ("warning: --num_gpus 4 pins workers to GPU(s) 0,1,2,3, which this machine does not "
            "have (CUDA_VISIBLE_DEVICES='' shows none)") in proc.stderr, proc.stderr


def test_more_workers_than_cores_is_said() -> None:
    from phoenix_keypoints.jobs.run.summary import shared_cores

    said = shared_cores(4, 2, "--num_gpus 4")
    assert said is not None and "4 worker(s) share 2 usable CPU core(s)" in said
    assert "--workers 2" in said and "leave out --num_gpus 4" in said
    assert shared_cores(2, 2) is None and shared_cores(4, 2, on_gpu=True) is None


# --- a user's own manifest of absolute paths ----------------------------------------------------------

def test_a_manifest_of_absolute_paths_gets_in_with_its_root(ntsc_run: Path, tmp_path: Path) -> None:
    import shutil

    data = tmp_path / "data"
    (data / "clips").mkdir(parents=True)
    shutil.copyfile(ntsc_run.parent / "signer.mp4", data / "clips" / "a.mp4")
    shutil.copyfile(ntsc_run.parent / "signer.mp4", tmp_path / "elsewhere.mp4")
    lists = tmp_path / "lists"
    lists.mkdir()
    manifest = lists / "mine.csv"
    manifest.write_text(f"name,split,path\na,train,{data / 'clips' / 'a.mp4'}\n"
                        f"b,train,{data / 'clips' / '..' / '..' / 'elsewhere.mp4'}\n")
    refused = run_cli(["run", "--manifest", manifest, "--out", tmp_path / "r"])
    assert_no_traceback(refused)
    assert refused.returncode == 2, refused.stderr
    assert "--manifest-root DIR" in refused.stderr, refused.stderr
    proc = run_cli(["run", "--manifest", manifest, "--out", tmp_path / "r", "--manifest-root", data])
    assert proc.returncode == 0, proc.stderr
    assert "outside --manifest-root" in proc.stderr, proc.stderr  # b's `..` leaves the root
    got = pq.read_table(tmp_path / "r" / "keypoints.parquet", columns=["video"])
    assert set(got["video"].to_pylist()) == {"a"} and got.num_rows == 8
    again = run_cli(["run", "--out", tmp_path / "r"])  # a resume reads the manifest from its root
    assert again.returncode == 0 and "complete:" in again.stdout, again.stderr


# --- --videos naming what is not there ----------------------------------------------------------

def test_videos_not_found_offers_the_closest_names_and_where_all_are() -> None:
    from phoenix_keypoints.extract.corpora.base import DatasetError, select
    from phoenix_keypoints.extract.corpora.phoenix import CorpusRow

    names = ["01April_2010_Thursday_heute-6694", "01April_2010_Thursday_heute-6695",
             "cameraman-1", "coffee-1", "portrait-1"]
    rows = [CorpusRow("train", n, f"train/{n}", "", "", "", f"ann/train.corpus.csv:{i + 2}")
            for i, n in enumerate(names)]  # PHOENIX's rows, as its reader hands them to select()
    with pytest.raises(DatasetError) as e:
        select(rows, set(names), ("train",), ["01April_2010_Thursday_heute", "cofee-1"], None)
    said = str(e.value)
    assert "for 01April_2010_Thursday_heute: 01April_2010_Thursday_heute-6694, " \
           "01April_2010_Thursday_heute-6695" in said, said
    assert "for cofee-1: coffee-1" in said, said
    assert "Every name is listed in ann/train.corpus.csv" in said, said


# --- small ones ----------------------------------------------------------------------------------

def test_a_full_range_video_frame_is_drawn_without_ffmpegs_words(
        caplog: pytest.LogCaptureFixture) -> None:
    """signer_demo.mp4 is yuvj420p: its conversion to RGB made swscale say `deprecated pixel
    format used` (PyAV hands FFmpeg's log to Python's logging: printed on stderr by a command)
    through show's and report's lines."""
    from helpers import VIDEOS

    from phoenix_keypoints.extract.inspect.draw import load_frame

    with caplog.at_level("WARNING"):
        rgb = load_frame(VIDEOS, "signer_demo.mp4#frame=3")
    assert rgb is not None and rgb.ndim == 3 and rgb.std() > 10
    assert not [r for r in caplog.records if "deprecated pixel format" in r.getMessage()]


def test_a_run_says_each_thing_once(sample_root: Path, tmp_path: Path) -> None:
    """A link leaving the dataset was warned at the start and again at the end of the same run;
    a finished run with --output_path said the pkl was up to date, then that it was not written."""
    import shutil

    root = tmp_path / "PHOENIX-2014-T"
    shutil.copytree(sample_root, root, symlinks=True)
    folder = root / "features" / "fullFrame-210x260px" / "dev" / "cameraman-1"
    shutil.move(folder, tmp_path / "outside")
    folder.symlink_to(tmp_path / "outside")
    args = ["run", "--dataset", root, "--out", tmp_path / "r", "--videos", "cameraman-1",
            "--output_path", tmp_path / "k.pkl"]
    proc = run_cli(args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("link(s) lead outside the dataset") == 1, proc.stderr
    again = run_cli(args)
    assert again.returncode == 0, again.stderr
    assert "is up to date" in again.stdout + again.stderr
    assert "not written" not in again.stdout + again.stderr, again.stderr


def test_help_texts_name_each_doc_once_and_close_what_they_open() -> None:
    import argparse

    from phoenix_keypoints.jobs.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command, parser in sub.choices.items():
        for action in parser._actions:
            text = action.help or ""
            docs = re.findall(r"docs/[\w./-]+\.md", text)
            assert len(docs) == len(set(docs)), (command, action.option_strings, text)
            plain = re.sub(r"\([\d.]+, [\d.]+\]", "", text)  # an interval, (0, 1]
            assert plain.count("(") == plain.count(")"), (command, action.option_strings, text)
