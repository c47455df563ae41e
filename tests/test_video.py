"""Video files as input, end to end with the real CLI on the shared sample's signer_demo.mp4 and
.webm: keypoints equal to MediaPipe Holistic run directly on PyAV's RGB24 frames of the same file,
1 == 2 workers, SIGKILL of the whole job then resume, a frame range giving exactly its frames, and
a changed video redone on resume and named by verify."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import textwrap
from pathlib import Path

import av
import mediapipe as mp
import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import (
    SHARED_DATA,
    assert_no_traceback,
    busy_workers,
    popen_cli,
    read_keypoints,
    run_cli,
    sha256,
    video_rows,
    wait_for,
)

from phoenix_keypoints.extract.families.holistic.points import PARTS
from phoenix_keypoints.extract.families.holistic.runner import landmarks_to_arrays

VIDEOS = SHARED_DATA / "video-sample"
CLIPS = {"mp4demo": ("train", "signer_demo.mp4"), "webmdemo": ("test", "signer_demo.webm")}


def pyav_frames(path: Path) -> list[tuple[np.ndarray, float]]:
    """Every frame of the file as PyAV decodes it to RGB24, with its time."""
    with av.open(str(path)) as c:
        return [(f.to_ndarray(format="rgb24"), f.time) for f in c.decode(video=0)]


def direct_holistic(frames: list[np.ndarray]) -> list[dict]:
    """The reference: a fresh default Holistic straight over the frames."""
    with mp.solutions.holistic.Holistic(static_image_mode=False, model_complexity=1) as h:
        return [landmarks_to_arrays(h.process(rgb)) for rgb in frames]


def assert_equal_to(rows, ref: list[dict]) -> int:
    """The rows' keypoints equal the reference's, max abs diff 0; how many parts were compared."""
    checked = 0
    for part in PARTS:
        got = rows[part].to_pylist()
        assert len(got) == len(ref)
        for i, (g, r) in enumerate(zip(got, ref, strict=True)):
            assert (g is None) == (r[part] is None), (part, i)
            if g is not None:
                assert np.array_equal(np.asarray(g, np.float32), r[part]), (part, i)
                checked += 1
    return checked


@pytest.fixture(scope="module")
def video_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not VIDEOS.is_dir():
        pytest.skip(f"shared video sample not found at {VIDEOS}")
    root = tmp_path_factory.mktemp("videos") / "corpus"
    for name, (split, src) in CLIPS.items():
        (root / split).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(VIDEOS / src, root / split / f"{name}{Path(src).suffix}")
    return root


@pytest.fixture(scope="module")
def video_run(video_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("videorun") / "run"
    proc = run_cli(["run", "--dataset", video_tree, "--out", out, "--workers-per-gpu", "2"])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    return out


@pytest.mark.slow
def test_video_keypoints_equal_direct_holistic_on_pyav_frames(video_run: Path, video_tree: Path):
    table = read_keypoints(video_run)
    meta = json.loads((video_run / "run.json").read_text())
    assert meta["dataset"]["layout"] == "videos"
    assert meta["dataset"]["decoder"].startswith(f"av {av.__version__}")
    for name, (split, src) in CLIPS.items():
        path = video_tree / split / f"{name}{Path(src).suffix}"
        frames = pyav_frames(path)
        rows = video_rows(table, name)
        assert rows.num_rows == len(frames) == 58
        assert set(rows["split"].to_pylist()) == {split}
        assert set(rows["status"].to_pylist()) == {"ok"}
        rel = f"{split}/{path.name}"
        assert rows["image"].to_pylist() == [f"{rel}#frame={i}" for i in range(len(frames))]
        assert set(rows["file_sha256"].to_pylist()) == {sha256(path)}
        assert set(rows["file_size"].to_pylist()) == {path.stat().st_size}
        h, w = frames[0][0].shape[:2]
        assert set(rows["width"].to_pylist()) == {w} and set(rows["height"].to_pylist()) == {h}
        assert assert_equal_to(rows, direct_holistic([f for f, _ in frames])) > 0
        times = rows["time_s"].to_pylist()
        if name == "mp4demo":  # real timestamps, increasing
            assert times == [t for _, t in frames] and times == sorted(times) and times[-1] > 1.8
        else:  # this WebM stamps every frame 0: only the first has a usable time
            assert times[0] == 0.0 and set(times[1:]) == {None}


@pytest.mark.slow
def test_video_one_worker_equals_two(video_run: Path, video_tree: Path, tmp_path: Path):
    out = tmp_path / "one"
    proc = run_cli(["run", "--dataset", video_tree, "--out", out, "--workers-per-gpu", "1"])
    assert proc.returncode == 0, proc.stderr
    assert read_keypoints(out).equals(read_keypoints(video_run))


@pytest.mark.slow
def test_video_sigkill_then_resume_exact(video_run: Path, video_tree: Path, tmp_path: Path):
    """The whole job SIGKILLed mid-video (no clean-up at all), then resumed: the same file."""
    out = tmp_path / "run"
    args = ["run", "--dataset", video_tree, "--out", out, "--workers-per-gpu", "2"]
    proc = popen_cli(args, env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.1"})
    wait_for(lambda: busy_workers(out), 120, "a worker inside a video", proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not (out / "keypoints.parquet").exists()
    again = run_cli(args)
    assert again.returncode == 0, again.stderr
    assert_no_traceback(again)
    assert read_keypoints(out).equals(read_keypoints(video_run))


@pytest.mark.slow
def test_frame_range_gives_exactly_those_frames(video_tree: Path, tmp_path: Path):
    """Frames 11-20 (1-based, inclusive) and the frames in [0.5 s, 0.7 s) of the mp4, through a
    manifest: exactly those rows, numbered from 0, their keypoints those of a fresh graph over
    exactly those frames."""
    frames = pyav_frames(video_tree / "train" / "mp4demo.mp4")
    manifest = video_tree / "ranges.csv"
    manifest.write_text("name,split,path,start,end,start_s,end_s\n"
                        "cut,train,train/mp4demo.mp4,11,20,,\n"
                        "secs,dev,train/mp4demo.mp4,,,0.5,0.7\n")
    out = tmp_path / "run"
    proc = run_cli(["run", "--manifest", manifest, "--out", out, "--workers-per-gpu", "2"])
    assert proc.returncode == 0, proc.stderr
    table = read_keypoints(out)
    in_secs = [i for i, (_, t) in enumerate(frames) if 0.5 <= t < 0.7]
    for name, picked in (("cut", list(range(10, 20))), ("secs", in_secs)):
        rows = video_rows(table, name)
        assert rows["frame"].to_pylist() == list(range(len(picked)))
        assert rows["image"].to_pylist() == [f"train/mp4demo.mp4#frame={i}" for i in picked]
        assert rows["time_s"].to_pylist() == [frames[i][1] for i in picked]
        assert assert_equal_to(rows, direct_holistic([frames[i][0] for i in picked])) > 0
    meta = json.loads((out / "run.json").read_text())["dataset"]
    assert meta["layout"] == "manifest" and meta["manifest"] == "ranges.csv"
    resumed = run_cli(["run", "--manifest", manifest, "--out", out])  # a resume finds its manifest
    assert resumed.returncode == 0, resumed.stderr
    assert_no_traceback(resumed)
    assert read_keypoints(out).equals(table)


@pytest.mark.slow
def test_changed_video_is_named_by_verify_and_redone(video_run: Path, video_tree: Path,
                                                     tmp_path: Path):
    tree = tmp_path / "tree"
    shutil.copytree(video_tree, tree)
    out = tmp_path / "run"
    args = ["run", "--dataset", tree, "--out", out, "--videos", "webmdemo"]
    assert run_cli(args).returncode == 0
    before = pq.read_table(out / "keypoints.parquet")
    webm = tree / "test" / "webmdemo.webm"
    data = webm.read_bytes()
    webm.write_bytes(data)  # same bytes, new mtime
    os.utime(webm, ns=(webm.stat().st_atime_ns, webm.stat().st_mtime_ns + 10**9))
    verify = run_cli(["verify", "--out", out])
    assert verify.returncode != 0
    assert "webmdemo" in verify.stdout + verify.stderr and "video modified" in verify.stdout
    again = run_cli(args)
    assert again.returncode == 0, again.stderr
    after = pq.read_table(out / "keypoints.parquet")
    assert after["file_mtime_ns"].to_pylist()[0] == webm.stat().st_mtime_ns
    assert after.select(list(PARTS)).equals(before.select(list(PARTS)))


def rotated_copy(dest: Path) -> Path:
    """signer_demo.mp4 remuxed (the same packets) into dest with a 90-degree display rotation."""
    with av.open(str(VIDEOS / "signer_demo.mp4")) as i, av.open(str(dest), "w") as o:
        out = o.add_stream_from_template(i.streams.video[0])
        out.set_display_rotation(90)
        for packet in i.demux(i.streams.video[0]):
            if packet.dts is not None:
                packet.stream = out
                o.mux(packet)
    with av.open(str(dest)) as c:
        assert next(c.decode(video=0)).rotation == 90
    return dest


def test_display_rotation_is_applied(tmp_path: Path):
    """signer_demo.mp4 remuxed (same packets) with a 90-degree display rotation: the frames come
    out turned as FFmpeg's autorotate turns them (counterclockwise, np.rot90 k=1), and equal to
    pose-format's own reader where that is installed."""
    from phoenix_keypoints.extract import sources
    from phoenix_keypoints.extract.sources.base import Ref

    src, dest = VIDEOS / "signer_demo.mp4", rotated_copy(tmp_path / "rot90.mp4")
    upright = pyav_frames(src)
    got = list(sources.get("video").frames(tmp_path, Ref("video", dest.name, (), 0, len(upright))))
    assert [f.status for f in got] == ["ok"] * len(upright)
    for f, (rgb, _) in zip(got, upright, strict=True):
        assert f.rgb.shape == (rgb.shape[1], rgb.shape[0], 3)
        assert np.array_equal(f.rgb, np.rot90(rgb, 1))
    svu = pytest.importorskip("simple_video_utils.frames")
    theirs = list(svu.read_frames_exact(str(dest)))
    assert all(np.array_equal(f.rgb, t) for f, t in zip(got, theirs, strict=True))


def test_the_rotation_recipes_of_the_docs_give_what_they_say(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    """docs/wholebody.md's two recipes, run as written on a clip with a display rotation: OpenCV
    asked to turn the frames gives the tool's frames bit for bit (a plain cv2.VideoCapture gives
    them as stored), and the remuxed copy gives the tool the frames as stored."""
    import cv2

    from phoenix_keypoints.extract import sources
    from phoenix_keypoints.extract.sources.base import Ref

    def tool(name: str, n: int) -> list[np.ndarray]:  # BGR, as the whole-body models get them
        got = list(sources.get("video").frames(tmp_path, Ref("video", name, (), 0, n)))
        assert [f.status for f in got] == ["ok"] * n
        return [f.rgb[..., ::-1] for f in got]

    def read(cap, n: int) -> list[np.ndarray]:
        return [cap.read()[1] for _ in range(n)]

    docs = (Path(__file__).resolve().parents[1] / "docs" / "wholebody.md").read_text()
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", docs, re.S)]
    turn = next(b for b in blocks if "CAP_PROP_ORIENTATION_AUTO" in b)
    remux = next(b for b in blocks if "set_display_rotation(0)" in b)
    rotated_copy(tmp_path / "clip.mp4")
    monkeypatch.chdir(tmp_path)
    n = 12
    ours, stored = tool("clip.mp4", n), read(cv2.VideoCapture("clip.mp4"), n)
    assert ours[0].shape == stored[0].shape[1::-1] + (3,)
    names: dict = {"cv2": cv2}
    exec(turn, names)
    assert all(np.array_equal(a, b) for a, b in zip(read(names["cap"], n), ours, strict=True))
    exec(remux, {})
    assert all(np.array_equal(a, b) for a, b in zip(tool("clip-as-stored.mp4", n), stored,
                                                     strict=True))


def test_variable_frame_rate_times_kept(tmp_path: Path):
    """A video encoded here with irregular timestamps (ms): each row's time_s is its frame's own,
    and a range in seconds takes the frames whose times fall in it."""
    from fractions import Fraction

    from phoenix_keypoints.extract import sources
    from phoenix_keypoints.extract.sources.base import Ref

    ms = [0, 40, 80, 200, 240, 400, 433, 1000]
    frames = [rgb for rgb, _ in pyav_frames(VIDEOS / "signer_demo.webm")[:len(ms)]]
    with av.open(str(tmp_path / "vfr.mkv"), "w") as o:
        s = o.add_stream("mpeg4", rate=25)
        s.width, s.height, s.pix_fmt = frames[0].shape[1], frames[0].shape[0], "yuv420p"
        s.time_base = s.codec_context.time_base = Fraction(1, 1000)
        for rgb, t in zip(frames, ms, strict=True):
            vf = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            vf.pts, vf.time_base = t, Fraction(1, 1000)
            for packet in s.encode(vf):
                o.mux(packet)
        for packet in s.encode(None):
            o.mux(packet)
    src = sources.get("video")
    scan = src.scan(tmp_path, "vfr.mkv")
    got = list(src.frames(tmp_path, Ref("video", "vfr.mkv", (), 0, scan.count)))
    assert [f.time_s for f in got] == [t / 1000 for t in ms]
    cut = src.scan(tmp_path, "vfr.mkv", start_s=0.1, end_s=0.45)
    assert (cut.start, cut.count) == (3, 4)
    got = list(src.frames(tmp_path, Ref("video", "vfr.mkv", (), cut.start, cut.count)))
    assert [f.time_s for f in got] == [0.2, 0.24, 0.4, 0.433]


def test_recorded_frames_read_back_for_drawing(video_tree: Path):
    """report and show draw on a row's frame found by its `image`: for a video, that frame of the
    file, in any order asked (a jump back decodes from the start again); past the end, None."""
    from phoenix_keypoints.extract.sources import load_image

    frames = pyav_frames(video_tree / "train" / "mp4demo.mp4")
    for i in (0, 5, 6, 30, 2, 57):
        assert np.array_equal(load_image(video_tree, f"train/mp4demo.mp4#frame={i}"), frames[i][0])
    assert load_image(video_tree, "train/mp4demo.mp4#frame=58") is None
    assert load_image(video_tree, "train/gone.mp4#frame=0") is None
