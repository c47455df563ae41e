"""`report`, `show` and `diff` on a real extraction of the shared sample, through the real command
line; the report page is rendered by a real headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import REPO, assert_no_traceback, run_cli

from phoenix_keypoints.extract.families.holistic.declaration import declaration
from phoenix_keypoints.extract.families.holistic.points import PARTS

parquet_write_options = declaration().write_options  # how the default family's files are written

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def shared_run(shared_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run over the shared sample (143 frames, 6 videos), merged, with its tensors."""
    out = tmp_path_factory.mktemp("shared") / "run"
    proc = run_cli(["run", "--dataset", shared_sample, "--out", out, "--chunk-frames", "60"])
    assert proc.returncode == 0, proc.stderr
    return out


def copy_run(src: Path, dest: Path, tensors: bool = True) -> Path:
    """run.json, plan and keypoints (and tensors) of src in a new run folder."""
    dest.mkdir(parents=True)
    for name in ("run.json", "plan.parquet", "keypoints.parquet"):
        shutil.copy2(src / name, dest / name)
    if tensors:
        shutil.copytree(src / "tensors", dest / "tensors")
    return dest


@pytest.fixture(scope="module")
def reported(shared_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = copy_run(shared_run, tmp_path_factory.mktemp("reported") / "run")
    proc = run_cli(["report", "--out", run])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    assert "6 videos, 143 frames" in proc.stdout
    return run


def chromium_screenshot(html: Path, png: Path, profile: Path, size: str = "1280,2400") -> None:
    """Render html in Debian's headless Chromium; skip (with the reason) where it cannot be had."""
    deps = subprocess.run(["bash", str(REPO / "scripts" / "system-deps.sh"), "chromium"],
                          capture_output=True, text=True, timeout=900)
    if deps.returncode == 3:
        pytest.skip(deps.stderr.strip())
    assert deps.returncode == 0, deps.stderr
    profile.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["chromium", *FLAGS, f"--user-data-dir={profile}",
                           f"--window-size={size}", f"--screenshot={png}",
                           html.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert png.is_file(), proc.stderr


def rates_from_keypoints(keypoints: Path) -> dict[str, dict[str, float]]:
    """video -> frames and, per part, the share of its rows where the part is not null."""
    t = pq.read_table(keypoints, columns=["video", *PARTS])
    vids = np.asarray(t["video"].to_pylist())
    out = {}
    for v in dict.fromkeys(vids):
        rows = vids == v
        out[v] = {"frames": int(rows.sum())}
        for part in PARTS:
            found = ~np.asarray(t[part].is_null().to_pylist())
            out[v][f"{part}_rate"] = found[rows].sum() / rows.sum()
    return out


# --- report ------------------------------------------------------------------------------------

def test_report_page_renders_in_chromium(reported: Path, tmp_path: Path) -> None:
    page = reported / "report" / "index.html"
    html = page.read_text()
    # one self-contained file: nothing fetched from anywhere
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "url(http" not in html and "<script src" not in html
    assert html.count("data:image/png;base64,") >= 3  # rates, coverage, timelines
    assert html.count("data:image/jpeg;base64,") >= 1  # frame strips (the dataset is there)
    png = tmp_path / "shot.png"
    chromium_screenshot(page, png, tmp_path / "profile")
    img = cv2.imread(str(png))
    assert img is not None and img.shape[:2] == (2400, 1280)
    assert img.std() > 20, "the screenshot is blank"
    ink = (img.min(axis=2) < 200).mean()
    assert ink > 0.02, f"only {ink:.1%} of the screenshot is not white"
    colours = np.unique(img.reshape(-1, 3)[::7], axis=0)
    assert len(colours) > 200, "no plot or frame was drawn"


def test_videos_parquet_rates_equal_own_counts(reported: Path) -> None:
    videos = pq.read_table(reported / "report" / "videos.parquet").to_pandas()
    want = rates_from_keypoints(reported / "keypoints.parquet")
    assert sorted(videos["video"]) == sorted(want)
    plan = pq.read_table(reported / "plan.parquet").to_pandas().set_index("video")
    for row in videos.itertuples():
        assert row.frames == want[row.video]["frames"]
        for part in PARTS:
            assert getattr(row, f"{part}_rate") == pytest.approx(want[row.video][f"{part}_rate"],
                                                                 abs=1e-12), (row.video, part)
        assert row.speaker == plan.loc[row.video, "speaker"]
        assert row.split == plan.loc[row.video, "split"]
        assert (len(row.flags) > 0) == (len(row.reasons) > 0)


def test_face_column_path_gives_the_same_figures(shared_run: Path, reported: Path,
                                                 tmp_path: Path) -> None:
    """Without tensors/ the report decodes the face column: same figures as from the mask."""
    run = copy_run(shared_run, tmp_path / "run", tensors=False)
    proc = run_cli(["report", "--out", run])
    assert proc.returncode == 0, proc.stderr
    a = pq.read_table(reported / "report" / "videos.parquet")
    b = pq.read_table(run / "report" / "videos.parquet")
    assert a.equals(b)
    assert "face column" in (run / "report" / "index.html").read_text()
    assert "tensor mask" in (reported / "report" / "index.html").read_text()


def test_video_without_a_face_is_flagged_for_it(shared_run: Path, tmp_path: Path) -> None:
    """A video whose face is never found is flagged for it; one whose face is always found is not.

    Constructed, not found: in a copy of the run, the face is removed from every frame of
    fingerspelling_hand-1 and a real face from the run placed in every frame of signer_demo-1, so
    the verdict does not depend on which frames MediaPipe detects a face in on this CPU."""
    run = copy_run(shared_run, tmp_path / "run", tensors=False)
    t = pq.read_table(run / "keypoints.parquet")
    vids = t["video"].to_pylist()
    face = t["face"].to_pylist()
    real = next(f for f in face if f is not None)
    face = [None if v == "fingerspelling_hand-1" else real if v == "signer_demo-1" else f
            for v, f in zip(vids, face, strict=True)]
    t = t.set_column(t.schema.get_field_index("face"), "face", pa.array(face, pa.list_(pa.float32())))
    pq.write_table(t, run / "keypoints.parquet", **parquet_write_options())
    proc = run_cli(["report", "--out", run])
    assert proc.returncode == 0, proc.stderr
    videos = pq.read_table(run / "report" / "videos.parquet").to_pandas().set_index("video")
    row = videos.loc["fingerspelling_hand-1"]
    assert row["face_rate"] == 0.0
    assert "face" in list(row["flags"])
    assert any(r.startswith("face found in 0%") for r in row["reasons"])
    page = (run / "report" / "index.html").read_text()
    assert "fingerspelling_hand-1" in page and "face found in 0% of frames" in page
    assert videos.loc["signer_demo-1", "face_rate"] == 1.0
    assert "face" not in list(videos.loc["signer_demo-1", "flags"])


def test_thresholds_are_overridable(shared_run: Path, tmp_path: Path) -> None:
    run = copy_run(shared_run, tmp_path / "run")
    # every flag's threshold set where nothing can pass it, so the verdict does not depend on
    # what MediaPipe found on this CPU (swaps, jitter, points outside the frame included)
    proc = run_cli(["report", "--out", run, "--min-face-rate", "0", "--min-pose-rate", "0",
                    "--min-hand-rate", "0", "--max-hand-gap", "1000", "--max-swaps", "1000",
                    "--max-jitter", "1e9", "--max-outside", "1", "--max-not-ok", "1000"])
    assert proc.returncode == 0, proc.stderr
    videos = pq.read_table(run / "report" / "videos.parquet").to_pandas()
    assert all(len(f) == 0 for f in videos["flags"]), videos[["video", "flags"]]
    assert "0 flagged" in proc.stdout
    assert "--min-face-rate" in (run / "report" / "index.html").read_text()


def test_report_without_the_dataset_folder(shared_run: Path, tmp_path: Path) -> None:
    run = copy_run(shared_run, tmp_path / "run")
    meta = json.loads((run / "run.json").read_text())
    meta["dataset"]["root"] = str(tmp_path / "gone" / "PHOENIX-2014-T")
    (run / "run.json").write_text(json.dumps(meta))
    proc = run_cli(["report", "--out", run])
    assert proc.returncode == 0, proc.stderr
    html = (run / "report" / "index.html").read_text()
    assert "is gone or not reachable" in html and "no frame strips" in html
    assert "data:image/jpeg" not in html  # no strips, but the timelines are there
    assert 'alt="per-frame timeline of fingerspelling_hand-1"' in html


def test_failed_and_missing_videos_are_listed(shared_run: Path, tmp_path: Path) -> None:
    """A video the plan lists but keypoints.parquet lacks gets a row with why, and is counted."""
    run = copy_run(shared_run, tmp_path / "run", tensors=False)
    t = pq.read_table(run / "keypoints.parquet")
    t = t.filter(pc.not_equal(t["video"], "portrait-1"))
    pq.write_table(t, run / "keypoints.parquet", **parquet_write_options())
    meta = json.loads((run / "run.json").read_text())
    meta["merge"]["failed_videos"] = {"portrait-1": "frame 1: worker crashed"}
    (run / "run.json").write_text(json.dumps(meta))
    proc = run_cli(["report", "--out", run])
    assert proc.returncode == 0, proc.stderr
    videos = pq.read_table(run / "report" / "videos.parquet").to_pandas().set_index("video")
    assert videos.loc["portrait-1", "frames"] == 0
    assert "worker crashed" in videos.loc["portrait-1", "problem"]
    assert list(videos.loc["portrait-1", "flags"]) == ["no_rows"]
    html = (run / "report" / "index.html").read_text()
    assert "Failed and missing videos (1)" in html


def test_relabelled_hand_is_a_suspected_swap(shared_run: Path, reported: Path,
                                             tmp_path: Path) -> None:
    """A hand labelled right in one frame and left in the next, at the same place (as MediaPipe
    sometimes relabels), is reported as a swap at that frame, and nowhere else.

    The case is constructed, not found: a real hand from the run is placed in signer_demo-1 as its
    right hand at frame K-1 and as its left hand at frame K (the other label empty in each), so the
    verdict does not depend on which frames MediaPipe detects on this CPU."""
    run = copy_run(shared_run, tmp_path / "run", tensors=False)
    t = pq.read_table(run / "keypoints.parquet")
    vids = np.asarray(t["video"].to_pylist())
    left, right = t["left_hand"].to_pylist(), t["right_hand"].to_pylist()
    hand = next(h for h in left + right if h is not None)
    rows = np.flatnonzero(vids == "signer_demo-1")
    k = int(rows[len(rows) // 2])
    right[k - 1], left[k - 1] = hand, None
    left[k], right[k] = hand, None
    for part, col in (("left_hand", left), ("right_hand", right)):
        t = t.set_column(t.schema.get_field_index(part), part, pa.array(col, pa.list_(pa.float32())))
    pq.write_table(t, run / "keypoints.parquet", **parquet_write_options())
    proc = run_cli(["report", "--out", run])
    assert proc.returncode == 0, proc.stderr
    before = pq.read_table(reported / "report" / "videos.parquet").to_pandas().set_index("video")
    after = pq.read_table(run / "report" / "videos.parquet").to_pandas().set_index("video")
    assert after.loc["signer_demo-1", "swaps"] >= before.loc["signer_demo-1", "swaps"] + 1
    assert "swaps" in list(after.loc["signer_demo-1", "flags"])
    others = after.index != "signer_demo-1"
    assert (after.loc[others, "swaps"] == before.loc[others, "swaps"]).all()


def test_report_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    proc = run_cli(["report", "--out", tmp_path / "nothing"])
    assert proc.returncode == 2
    assert "no run" in proc.stderr
    assert_no_traceback(proc)


# --- diff --------------------------------------------------------------------------------------

def test_diff_of_a_run_with_itself_agrees(shared_run: Path) -> None:
    proc = run_cli(["diff", shared_run, shared_run])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines() == [
        "agree: 6 videos, 143 frames (tolerance 0: identical values; max |diff| 0)"]


def test_diff_lists_only_the_changed_video(shared_run: Path, tmp_path: Path) -> None:
    run = copy_run(shared_run, tmp_path / "run", tensors=False)
    t = pq.read_table(run / "keypoints.parquet")
    vids = np.asarray(t["video"].to_pylist())
    i = int(np.flatnonzero(vids == "signer_demo-1")[10])
    pose = t["pose"].to_pylist()
    pose[i] = [v + 0.01 for v in pose[i]]
    t = t.set_column(t.schema.get_field_index("pose"), "pose", pa.array(pose, pa.list_(pa.float32())))
    pq.write_table(t, run / "keypoints.parquet", **parquet_write_options())
    proc = run_cli(["diff", shared_run, run])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("train/signer_demo-1: pose: max |diff| 0.01")
    assert "above the tolerance in 1 of 58 frame(s)" in lines[0]
    assert lines[1].startswith("differ: 1 of 6 videos")
    ok = run_cli(["diff", shared_run, run, "--tolerance", "0.02"])
    assert ok.returncode == 0, ok.stdout
    assert ok.stdout.startswith("agree: 6 videos")


def test_diff_refuses_bad_input(shared_run: Path, tmp_path: Path) -> None:
    proc = run_cli(["diff", shared_run, tmp_path / "nothing"])
    assert proc.returncode == 2
    assert "neither a run folder nor a keypoints .parquet file" in proc.stderr
    assert_no_traceback(proc)


def test_diff_of_runs_holding_different_videos_says_they_differ(shared_run: Path,
                                                               tmp_path: Path) -> None:
    """Different video sets are a difference (exit 1, was 2 as if bad input): the videos in one
    run only are named, and the shared ones still compared."""
    other = copy_run(shared_run, tmp_path / "fewer", tensors=False)
    t = pq.read_table(other / "keypoints.parquet")
    pq.write_table(t.filter(pc.not_equal(t["video"], "two_hands-1")), other / "keypoints.parquet",
                   **parquet_write_options())
    proc = run_cli(["diff", shared_run, other])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert_no_traceback(proc)
    assert proc.stdout.strip().splitlines() == [
        "videos in one run only: 1 only in A: test/two_hands-1; 0 only in B",
        "differ: the runs hold different videos (1 only in A: test/two_hands-1; 0 only in B); of "
        "the 5 both hold, 0 differ (tolerance 0: identical values; max |diff| 0)"]
    back = run_cli(["diff", other, shared_run])
    assert back.returncode == 1 and "0 only in A; 1 only in B: test/two_hands-1" in back.stdout


# --- show --------------------------------------------------------------------------------------

def count_frames(path: Path) -> int:
    cap = cv2.VideoCapture(str(path))
    n = 0
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        assert frame.std() > 5
        n += 1
    cap.release()
    return n


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_show_writes_one_frame_per_video_frame(shared_run: Path, tmp_path: Path,
                                               suffix: str) -> None:
    dest = tmp_path / f"fingerspelling{suffix}"
    proc = run_cli(["show", "--out", shared_run, "--video", "fingerspelling_hand-1",
                    "--to", dest])
    assert proc.returncode == 0, proc.stderr
    assert count_frames(dest) == 80  # the video's 80 frames, read back by OpenCV
    assert not list(tmp_path.glob(".*tmp*"))


def test_show_contact_sheet(shared_run: Path, tmp_path: Path) -> None:
    dest = tmp_path / "sheet.png"
    proc = run_cli(["show", "--out", shared_run, "--video", "signer_demo-1", "--to", dest])
    assert proc.returncode == 0, proc.stderr
    sheet = cv2.imread(str(dest))
    # 58 tiles of 210 x (260 + 16 legend) in rows of 10, 2-pixel gaps
    assert sheet.shape == (6 * 276 + 5 * 2, 10 * 210 + 9 * 2, 3)


def test_show_draws_on_grey_without_the_dataset(shared_run: Path, tmp_path: Path) -> None:
    run = copy_run(shared_run, tmp_path / "run", tensors=False)
    meta = json.loads((run / "run.json").read_text())
    meta["dataset"]["root"] = str(tmp_path / "gone")
    (run / "run.json").write_text(json.dumps(meta))
    dest = tmp_path / "demo.mp4"
    proc = run_cli(["show", "--out", run, "--video", "signer_demo-1", "--to", dest])
    assert proc.returncode == 0, proc.stderr
    assert "grey canvas" in proc.stderr
    assert count_frames(dest) == 58


def test_show_refuses_unknown_video_and_suffix(shared_run: Path, tmp_path: Path) -> None:
    proc = run_cli(["show", "--out", shared_run, "--video", "signer_demo", "--to",
                    tmp_path / "x.mp4"])
    assert proc.returncode == 2
    assert "Did you mean signer_demo-1?" in proc.stderr
    proc = run_cli(["show", "--out", shared_run, "--video", "signer_demo-1", "--to",
                    tmp_path / "x.avi"])
    assert proc.returncode == 2
    assert ".mp4, .gif, .png" in proc.stderr
    assert_no_traceback(proc)
