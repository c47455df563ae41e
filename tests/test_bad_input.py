"""Bad input, written to disk for real: damaged frames, videos without frames, folders no csv lists,
broken corpus files, a --dataset that is not PHOENIX, an --out that holds another run. Each gets a
clear message or a per-frame status, and never costs the other videos anything."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import (
    RUN_ARGS,
    assert_no_traceback,
    copy_dataset,
    read_keypoints,
    run_cli,
    same_keypoints,
    video_rows,
)

FRAMES = "features/fullFrame-210x260px"
MANUAL = "annotations/manual"


# --- damaged frames, missing and unlisted videos: one run over a damaged copy of the sample ------
def _frame(root: Path, split: str, video: str, n: int) -> Path:
    return root / FRAMES / split / video / f"images{n:04d}.png"


@pytest.fixture(scope="module")
def bad_dataset(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_dataset(sample_root, tmp_path_factory.mktemp("bad") / "PHOENIX-2014-T")
    # hopper-1: lossless variants of its own frames (16-bit = x257, RGBA with opaque alpha).
    f = _frame(root, "train", "hopper-1", 4)
    cv2.imwrite(str(f), cv2.imread(str(f)).astype(np.uint16) * 257)
    f = _frame(root, "train", "hopper-1", 8)
    cv2.imwrite(str(f), cv2.cvtColor(cv2.imread(str(f)), cv2.COLOR_BGR2BGRA))
    # astronaut-1: frames that cannot be read, and lossy ones that can.
    _frame(root, "train", "astronaut-1", 3).write_bytes(b"")
    _frame(root, "train", "astronaut-1", 5).write_text("this is not an image\n")
    f = _frame(root, "train", "astronaut-1", 7)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # truncated
    f = _frame(root, "train", "astronaut-1", 9)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte flipped inside the image data
    f.write_bytes(bytes(data))
    f = _frame(root, "train", "astronaut-1", 11)
    cv2.imwrite(str(f), cv2.imread(str(f), cv2.IMREAD_GRAYSCALE))
    f = _frame(root, "train", "astronaut-1", 13)
    cv2.imwrite(str(f), cv2.resize(cv2.imread(str(f)), (180, 220)))
    # dev: a listed video with no folder, one whose folder has no PNG, a folder no csv lists.
    with (root / MANUAL / "PHOENIX-2014-T.dev.corpus.csv").open("a") as csv:
        csv.write("ghost-1|ghost-1/1/*.png|-1|-1|Signer05|NICHTS|nichts\n")
        csv.write("empty-1|empty-1/1/*.png|-1|-1|Signer05|LEER|leer\n")
    (root / FRAMES / "dev" / "empty-1").mkdir()
    (root / FRAMES / "dev" / "empty-1" / "stray.lprof").write_text("x")
    shutil.copytree(root / FRAMES / "dev" / "cameraman-1", root / FRAMES / "dev" / "stray-1")
    return root


@pytest.fixture(scope="module")
def bad_run(bad_dataset: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("badrun") / "run"
    proc = run_cli(["run", "--dataset", bad_dataset, "--out", out, *RUN_ARGS])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    return out, proc


def _rows(out: Path, video: str) -> list[dict]:
    return video_rows(read_keypoints(out), video).select(
        ["frame", "width", "height", "status", "note", "pose", "face"]).to_pylist()


def test_lossless_conversions_are_processed(bad_run, clean_run: Path):
    """16-bit and RGBA frames are converted (and noted): the keypoints equal the clean run's."""
    out, _ = bad_run
    rows = _rows(out, "hopper-1")
    assert rows[3]["status"] == "ok" and rows[3]["note"] == "16-bit to 8-bit"
    assert rows[7]["status"] == "ok" and rows[7]["note"] == "alpha dropped"
    assert all(r["note"] is None for i, r in enumerate(rows) if i not in (3, 7))
    assert same_keypoints(read_keypoints(out), read_keypoints(clean_run), "hopper-1")


@pytest.mark.parametrize(("index", "status"), [(2, "empty_file"), (4, "not_png"),
                                               (6, "corrupt_png"), (8, "corrupt_png")],
                         ids=["empty", "not-png", "truncated", "bit-flipped"])
def test_unreadable_frame_is_flagged(bad_run, index: int, status: str):
    """A frame that cannot be decoded keeps its row: status says why, keypoints are null."""
    out, _ = bad_run
    row = _rows(out, "astronaut-1")[index]
    assert row["status"] == status
    assert row["pose"] is None and row["face"] is None
    assert row["width"] is None and row["height"] is None


def test_grayscale_and_other_size_are_processed_with_a_note(bad_run):
    out, _ = bad_run
    rows = _rows(out, "astronaut-1")
    assert rows[10]["status"] == "ok" and rows[10]["note"] == "grayscale to RGB"
    assert rows[12]["status"] == "ok" and (rows[12]["width"], rows[12]["height"]) == (180, 220)
    assert rows[12]["note"] == "size 180x220, video's first frame 210x260"
    assert rows[10]["pose"] is not None and rows[12]["pose"] is not None
    assert len(rows) == 18 and [r["frame"] for r in rows] == list(range(18))


def test_other_videos_unharmed(bad_run, clean_run: Path):
    out, _ = bad_run
    got, ref = read_keypoints(out), read_keypoints(clean_run)
    for video in ("cameraman-1", "hopper-2", "coffee-1", "hopper-1"):
        assert same_keypoints(got, ref, video), video
    assert set(got["video"].to_pylist()) == set(ref["video"].to_pylist())


def test_missing_empty_and_unlisted_videos_reported(bad_run):
    out, proc = bad_run
    assert "warning: 2 listed video(s) cannot be processed: empty-1 (no frames), ghost-1 " \
           "(no folder)" in proc.stderr
    assert "note: 1 folder(s) or video(s) on disk are in no corpus file and are skipped: dev/stray-1" \
        in proc.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["dataset"]["problems"] == {"empty-1": "no frames", "ghost-1": "no folder"}
    assert meta["dataset"]["unlisted_folders"] == ["dev/stray-1"]
    assert "missing:  2 listed video(s)" in run_cli(["status", "--out", out]).stdout
    index = pq.read_table(out / "tensors" / "dev.index.parquet")
    assert index["video"].to_pylist() == ["cameraman-1"]


def test_frames_not_ok_and_skipped_files_are_counted(bad_run):
    """The summary, status and run.json say how many frames were not ok (by status), name the worst
    videos, and report the files that are no frames; the counts are those of keypoints.parquet."""
    out, proc = bad_run
    statuses = read_keypoints(out)["status"].to_pylist()
    bad = {s: statuses.count(s) for s in set(statuses) if s != "ok"}
    assert bad == {"corrupt_png": 2, "empty_file": 1, "not_png": 1}
    said = (f"4 of {len(statuses)} frame(s) not ok: corrupt_png 2, empty_file 1, not_png 1; most "
            "in astronaut-1 (4)")
    assert f"warning: {said} (their rows in keypoints.parquet say why: status, note)" in proc.stderr
    skipped = ("1 file(s) in frame folders are no frames and were skipped (not a frame name 1): "
               "dev/empty-1/stray.lprof (not a frame name)")
    assert f"note: {skipped}" in proc.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["merge"]["statuses"] == {"ok": len(statuses) - 4, **bad}
    assert meta["merge"]["worst_videos"] == {"astronaut-1": 4}
    assert (meta["dataset"]["ignored_files"], meta["dataset"]["ignored_reasons"],
            meta["dataset"]["ignored_examples"]) == (
        1, {"not a frame name": 1}, ["dev/empty-1/stray.lprof (not a frame name)"])
    status = run_cli(["status", "--out", out]).stdout
    assert f"statuses: {said} (committed parts)" in status
    assert f"skipped:  {skipped}" in status


# --- broken corpus files: refused with file and line, before any work ---------------------------
def _corpus_copy(sample_root: Path, dest: Path) -> Path:
    """Just the annotations (a corpus error is found before any frame is looked at)."""
    shutil.copytree(sample_root / "annotations", dest / "annotations")
    (dest / FRAMES).mkdir(parents=True)
    return dest


def _edit(root: Path, split: str, edit) -> Path:
    path = root / MANUAL / f"PHOENIX-2014-T.{split}.corpus.csv"
    path.write_text(edit(path.read_text()))
    return path


BAD_CSV = {
    "missing-column": ("train", lambda t: "\n".join(
        "|".join(f for i, f in enumerate(line.split("|")) if i != 4) for line in t.splitlines()
    ) + "\n", ":1: header lacks column(s) speaker"),
    "comma-separated": ("train", lambda t: t.replace("|", ","),
                        ":1: corpus files are '|'-separated, but it looks ','-separated"),
    "duplicate-name": ("dev", lambda t: t + t.splitlines()[1].replace("cameraman-1|",
                                                                      "hopper-1|", 1) + "\n",
                       ":3: video 'hopper-1' is listed twice (first at "),
    "name-dotdot": ("dev", lambda t: t.replace("cameraman-1|", "..|", 1),
                    ":2: name '..' is not a plain folder name"),
    "name-escapes": ("dev", lambda t: t.replace("cameraman-1|", "../../etc|", 1),
                     ":2: name '../../etc' is not a plain folder name"),
    "video-dotdot": ("test", lambda t: t.replace("coffee-1/1/*.png", "../../../x/1/*.png"),
                     "points outside the dataset root"),
    "video-absolute": ("test", lambda t: t.replace("coffee-1/1/*.png", "/etc/x/1/*.png"),
                       "points outside the dataset root"),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_bad_corpus_refused_with_file_and_line(case: str, sample_root: Path, tmp_path: Path):
    split, edit, expected = BAD_CSV[case]
    root = _corpus_copy(sample_root, tmp_path / "PHOENIX-2014-T")
    path = _edit(root, split, edit)
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", root, "--out", out])
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {path}:"), proc.stderr
    assert expected in proc.stderr
    if case == "video-dotdot" or case == "video-absolute":
        assert f"{path}:3:" in proc.stderr  # header, hopper-2, then coffee-1
    assert not (out / "run.json").exists()


# --- wrong --dataset / --out ---------------------------------------------------------------------
def test_dataset_that_is_not_phoenix(sample_root: Path, tmp_path: Path):
    (tmp_path / "empty").mkdir()
    for dataset, expected in [
        (tmp_path / "empty", "is not a corpus this tool reads"),
        (tmp_path / "nowhere", "does not exist"),
        (sample_root.parent, f"It has PHOENIX-2014-T/ inside: pass --dataset {sample_root}"),
    ]:
        proc = run_cli(["run", "--dataset", dataset, "--out", tmp_path / "run"])
        assert_no_traceback(proc)
        assert proc.returncode == 2 and expected in proc.stderr, proc.stderr
    assert not (tmp_path / "run" / "run.json").exists()


def test_out_holding_another_run_is_refused_unless_fresh(clean_run: Path, sample_root: Path,
                                                         tmp_path: Path):
    out = tmp_path / "run"
    shutil.copytree(clean_run, out)
    before = (out / "keypoints.parquet").read_bytes()
    other = copy_dataset(sample_root, tmp_path / "other" / "PHOENIX-2014-T")
    for args, what in [(["--chunk-frames", "30"], "other chunk_frames"),
                       (["--dataset", other], "other dataset"),
                       (["--videos", "coffee-1"], "other videos")]:
        proc = run_cli(["run", "--out", out, *args])
        assert_no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert what in proc.stderr and "--fresh" in proc.stderr, proc.stderr
    assert (out / "keypoints.parquet").read_bytes() == before
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--videos", "coffee-1",
                    "--chunk-frames", "20", "--workers-per-gpu", "1", "--fresh"])
    assert proc.returncode == 0, proc.stderr
    got = read_keypoints(out)
    assert set(got["video"].to_pylist()) == {"coffee-1"}
    assert same_keypoints(got, read_keypoints(clean_run), "coffee-1")
    assert not (out / "parts" / "chunk-000004.parquet").exists()
