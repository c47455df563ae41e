"""--det-every K against rtmlib 0.0.16's PoseTracker(det_frequency=K) (issue 39 item 4).

Videos built here from signer_demo.mp4: three signers side by side (the end-to-end tiny detector
finds several boxes and keeps finding them), the signer alone, and a mix of dark, grey and signer
frames (the raw tiny detector finds many boxes on dark frames and none on the others). The pose
model is tests/tiny_onnx.py's pose_steady, whose points stay in place within the crop, so
rtmlib's tracking follows persons from frame to frame; its quirks (a count that stops, a reset
where it raises) are reached and checked to be reached. Each row of a run is compared with rtmlib
fed the same decoded frames: max |dx|, |dy| <= 0.01 px, scores 1e-4, the same box count.

The last part runs a chunk's videos in lockstep (a worker advances up to --batch-size videos
together, frame t of each in one pose-model call): five frame folders of different lengths, in
folders and in archives, equal to PoseTracker per video and to --batch-size 1 byte for byte, and
a frame that kills its worker beside other videos fails its own video alone.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import VIDEOS, assert_no_traceback, assert_same_output, killed_and_resumed, run_cli
from tiny_onnx import pose_steady, rtmlib_tracked, tiny_models

PX, SCORE = 0.01, 1e-4
FRAMES = 30


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    out = dict(tiny_models(folder, dynamic=True))  # batches in one call: the batched detector
    out["pose"] = pose_steady(folder / "tiny-rtmpose-steady.onnx", batch="batch")
    return out


def _write(path: Path, rgbs: list[np.ndarray]) -> None:
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        s = out.add_stream("mpeg4", rate=25)
        s.height, s.width = rgbs[0].shape[:2]
        s.pix_fmt = "yuv420p"
        for rgb in rgbs:
            for packet in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb),
                                                              format="rgb24")):
                out.mux(packet)
        for packet in s.encode(None):
            out.mux(packet)


def scenes(frames: int = FRAMES) -> dict[str, list[np.ndarray]]:
    """RGB frames of three scenes: several signers, one signer, dark/grey/signer frames."""
    import av

    with av.open(str(VIDEOS / "signer_demo.mp4")) as src:
        f = [fr.to_ndarray(format="rgb24")[::2, ::2] for fr in src.decode(video=0)]
    n = len(f)
    return {"crowd": [np.concatenate([f[i], f[(i + 20) % n][:, ::-1], f[(i + 40) % n]], axis=1)
                      for i in range(frames)],
            "alone": f[:frames],
            "mixed": [np.full_like(f[0], (0, 32, 96, 0)[(i // 4) % 4]) if i % 3 else f[i]
                      for i in range(frames)]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of three videos: several signers, one signer, dark/grey/signer frames."""
    root = tmp_path_factory.mktemp("tracked") / "clips"
    made = scenes()
    _write(root / "train" / "crowd.mp4", made["crowd"])
    _write(root / "train" / "alone.mp4", made["alone"])
    _write(root / "test" / "mixed.mp4", made["mixed"])
    return root


def decoded(path: Path) -> list[np.ndarray]:
    """A video's frames as rtmlib's users feed them (BGR), decoded without the tool."""
    import av

    with av.open(str(path)) as c:
        return [cv2.cvtColor(fr.to_ndarray(format="rgb24"), cv2.COLOR_RGB2BGR)
                for fr in c.decode(video=0)]


def wholebody(models: dict[str, Path], detector: str, every: int | None) -> list:
    return ["--estimator", "wholebody", "--detector", models[detector], "--pose-model",
            models["pose"], *(["--det-every", str(every)] if every else [])]


def ok(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert_no_traceback(proc)
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def against_rtmlib(rows: dict[str, list[dict]], corpus: Path, models: dict[str, Path],
                   detector: str, every: int) -> dict[str, int]:
    """Each video's rows against rtmlib's PoseTracker on its frames; what the tracker did."""
    seen: dict[str, int] = {"several": 0, "none": 0}
    for video, got in rows.items():
        ref, happened = rtmlib_tracked(models, detector, every,
                                       decoded(next(corpus.rglob(f"{video}.mp4"))))
        assert len(got) == len(ref) == FRAMES, (video, len(got), len(ref))
        for i, (row, (want, persons)) in enumerate(zip(got, ref, strict=True)):
            assert row["status"] == "ok", (video, i, row)
            assert row["persons"] == persons, (video, i, row["persons"], persons)
            xyz = np.asarray(row["wholebody"], np.float64).reshape(-1, 3)
            assert np.abs(xyz[:, :2] - want[:, :2]).max() <= PX, (video, i)
            assert np.abs(xyz[:, 2] - want[:, 2]).max() <= SCORE, (video, i)
            seen["several"] += persons >= 2
            seen["none"] += persons == 0
        for k, v in happened.items():
            seen[k] = seen.get(k, 0) + v
    return seen


def run_rows(out: Path) -> dict[str, list[dict]]:
    t = pq.read_table(out / "keypoints.parquet", columns=["video", "frame", "status", "wholebody",
                                                          "persons"])
    rows: dict[str, list[dict]] = {}
    for r in sorted(t.to_pylist(), key=lambda r: (r["video"], r["frame"])):
        rows.setdefault(r["video"], []).append(r)
    return rows


@pytest.mark.parametrize("detector", ["detector", "detector_raw"])
@pytest.mark.parametrize("every", [1, 5, 10])
def test_run_equals_rtmlib_posetracker(models, corpus, detector, every, tmp_path):
    """`run --det-every K` on videos with several people and with none, two workers, batches of
    8 (not a multiple of K): every row equals rtmlib's PoseTracker(det_frequency=K) fed the
    video frame by frame."""
    out = tmp_path / "run"
    ok(run_cli(["run", "--dataset", corpus, "--out", out, *wholebody(models, detector, every),
                "--workers", "2", "--chunk-frames", str(FRAMES), "--batch-size", "8"]), "run")
    seen = against_rtmlib(run_rows(out), corpus, models, detector, every)
    assert seen["several"] and (seen["none"] or detector == "detector"), seen
    if every > 1:  # the rule was exercised: frames on kept boxes, and detections again
        assert seen["kept_boxes"] and seen["detected"] > 3, seen


def test_rtmlib_quirks_are_reached_across_the_cases(models, corpus):
    """The cases reach both sides of PoseTracker's rule: a signer followed with its count
    advancing (a detection every K frames exactly), several persons followed on kept boxes, and
    its quirks: persons dropped, a count that stops, a tracker that raises (then reset)."""
    alone = rtmlib_tracked(models, "detector_raw", 5, decoded(corpus / "train" / "alone.mp4"))[1]
    crowd = rtmlib_tracked(models, "detector", 5, decoded(corpus / "train" / "crowd.mp4"))[1]
    mixed = rtmlib_tracked(models, "detector_raw", 5, decoded(corpus / "test" / "mixed.mp4"))[1]
    assert alone["detected"] == FRAMES // 5 and alone["stalled"] == 0, alone
    assert crowd["detected"] >= 2 and crowd["kept_boxes"], crowd
    assert mixed["dropped"] and mixed["stalled"] and mixed["raised"], mixed


def test_det_every_1_is_the_output_without_it(models, corpus, tmp_path):
    args = ["--dataset", corpus, "--workers", "1"]
    ok(run_cli(["run", "--out", tmp_path / "a", *args, *wholebody(models, "detector", None)]), "a")
    ok(run_cli(["run", "--out", tmp_path / "b", *args, *wholebody(models, "detector", 1)]), "b")
    assert_same_output(tmp_path / "b", tmp_path / "a")


@pytest.mark.slow
def test_resume_after_sigkill_equals_the_uninterrupted_run(models, corpus, tmp_path):
    """Chunks are whole videos, and the tracker restarts with each video: a run killed after a
    chunk and resumed writes what the uninterrupted run wrote."""
    b = killed_and_resumed(["--dataset", corpus, *wholebody(models, "detector_raw", 10),
                            "--workers", "1", "--chunk-frames", "1"], tmp_path)
    against_rtmlib(run_rows(b), corpus, models, "detector_raw", 10)


def test_recorded_shown_and_another_k_refused(models, corpus, tmp_path):
    out = tmp_path / "run"
    args = ["--dataset", corpus, "--videos", "alone", "--workers", "1"]
    ok(run_cli(["run", "--out", out, *args, *wholebody(models, "detector", 5)]), "run")
    from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata

    assert json.loads((out / "run.json").read_text())["options"]["wholebody"]["det_every"] == 5
    assert read_file_metadata(out / "keypoints.parquet")["wholebody"]["det_every"] == 5
    part = next((out / "parts").glob("chunk-*.parquet"))
    footer = json.loads(pq.read_schema(part).metadata[b"phoenix_keypoints"])
    assert footer["wholebody"]["det_every"] == 5, footer  # the settings its rows were made with
    assert "--det-every 5" in ok(run_cli(["status", "--out", out]), "status").stdout
    ok(run_cli(["run", "--out", out, *args, "--det-every", "5"]), "the same K again")
    for asked in (["--det-every", "10"], ["--det-every", "1"]):
        proc = run_cli(["run", "--out", out, *args, *asked])
        assert_no_traceback(proc)
        assert proc.returncode != 0 and f"--det-every (5 when planned, {asked[1]} asked)" in \
            proc.stderr, proc.stderr
    plain = tmp_path / "plain"
    ok(run_cli(["run", "--out", plain, *args, *wholebody(models, "detector", None)]), "plain")
    proc = run_cli(["run", "--out", plain, *args, "--det-every", "5"])
    assert proc.returncode != 0 and "--det-every (1 when planned, 5 asked)" in proc.stderr
    proc = run_cli(["run", "--out", tmp_path / "h", *args, "--estimator", "holistic",
                    "--det-every", "5"])
    assert_no_traceback(proc)
    assert proc.returncode != 0 and "--det-every is for --estimator wholebody" in proc.stderr


def test_extract_keypoints_takes_det_every(models, corpus):
    from phoenix_keypoints import extract_keypoints

    video = corpus / "test" / "mixed.mp4"
    for every in (1, 10):
        kp = extract_keypoints(video, "wholebody", detector=models["detector_raw"],
                               pose_model=models["pose"], det_every=every, progress=False)
        ref, _ = rtmlib_tracked(models, "detector_raw", every, decoded(video))
        got = np.asarray(kp["wholebody"], np.float64)
        want = np.stack([r for r, _ in ref])
        assert got.shape == want.shape, (got.shape, want.shape)
        assert np.abs(got[..., :2] - want[..., :2]).max() <= PX
        assert np.abs(got[..., 2] - want[..., 2]).max() <= SCORE
    with pytest.raises(ValueError, match="det_every=0"):
        extract_keypoints(video, "wholebody", detector=models["detector"],
                          pose_model=models["pose"], det_every=0)


def test_frames_the_detector_fails_on_leave_the_tracker_as_rtmlib_leaves_it(models, corpus,
                                                                            tmp_path):
    """A detector answering NaN boxes on the brighter frames of a video: a frame it detects on
    gets `bad_detector_output` and leaves the tracker as PoseTracker leaves itself when its
    detector fails (no state change, so the next frame detects); every other row equals rtmlib's,
    in batches of 8 as one frame at a time."""
    from tiny_onnx import poisoned

    bad = poisoned(models["detector"], tmp_path / "nan-boxes.onnx", "dets",
                   np.array([np.nan] * 4 + [0], np.float32), above=100)
    runs = {}
    for batch in ("8", "1"):
        runs[batch] = tmp_path / f"b{batch}"
        ok(run_cli(["run", "--dataset", corpus, "--videos", "mixed", "--out", runs[batch],
                    "--estimator", "wholebody", "--detector", bad, "--pose-model", models["pose"],
                    "--det-every", "5", "--batch-size", batch, "--workers", "1"]), batch)
    assert_same_output(runs["1"], runs["8"])
    rows = run_rows(runs["8"])["mixed"]
    ref, seen = rtmlib_tracked({**models, "bad": bad}, "bad", 5,
                               decoded(corpus / "test" / "mixed.mp4"))
    assert seen["failed"] and seen["kept_boxes"] and seen["detected"] > seen["failed"], seen
    for i, (row, want) in enumerate(zip(rows, ref, strict=True)):
        if want is None:
            assert row["status"] == "bad_detector_output" and row["wholebody"] is None, (i, row)
            continue
        assert row["status"] == "ok" and row["persons"] == want[1], (i, row["status"], want[1])
        xyz = np.asarray(row["wholebody"], np.float64).reshape(-1, 3)
        assert np.abs(xyz[:, :2] - want[0][:, :2]).max() <= PX, i
        assert np.abs(xyz[:, 2] - want[0][:, 2]).max() <= SCORE, i


# --- several videos in lockstep (extract_videos: the estimator's lanes) ---------------------------
# (name, scene, first frame, frames): more videos than 3 lanes, ending at different times
LANE_VIDEOS = (("crowd", "crowd", 0, 30), ("crowd-short", "crowd", 5, 7), ("alone", "alone", 0, 12),
               ("broken", "alone", 3, 23), ("mixed", "mixed", 0, 30))
BROKEN = 5  # the frame of `broken` that is no image: a lane's frame without pixels


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of frame folders (PNG: the tool and rtmlib read the same pixels), one chunk's
    worth: five videos of 7 to 30 frames, one frame of one not an image."""
    made = scenes()
    root = tmp_path_factory.mktemp("lanes") / "frames"
    for name, scene, first, n in LANE_VIDEOS:
        (root / name).mkdir(parents=True)
        for i, rgb in enumerate(made[scene][first:first + n]):
            cv2.imwrite(str(root / name / f"images{i + 1:04d}.png"), rgb[..., ::-1])
    (root / "broken" / f"images{BROKEN + 1:04d}.png").write_bytes(b"no image")
    return root


def folder_against_rtmlib(rows: dict[str, list[dict]], root: Path, models: dict[str, Path],
                          detector: str, every: int) -> dict[str, int]:
    """Each frame folder's rows against PoseTracker fed its readable frames in order (the frame
    that is no image gets no keypoints, and the tracker carries on without it)."""
    seen: dict[str, int] = {"several": 0, "none": 0}
    for name, _, _, n in LANE_VIDEOS:
        got = rows[name]
        assert len(got) == n, (name, len(got))
        readable = [r for r in got if r["status"] == "ok"]
        assert len(readable) == n - (name == "broken"), (name, [r["status"] for r in got])
        ref, happened = rtmlib_tracked(models, detector, every,
                                       [cv2.imread(str(root / name / f"images{r['frame'] + 1:04d}"
                                                       ".png")) for r in readable])
        for row, (want, persons) in zip(readable, ref, strict=True):
            assert row["persons"] == persons, (name, row["frame"], row["persons"], persons)
            xyz = np.asarray(row["wholebody"], np.float64).reshape(-1, 3)
            assert np.abs(xyz[:, :2] - want[:, :2]).max() <= PX, (name, row["frame"])
            assert np.abs(xyz[:, 2] - want[:, 2]).max() <= SCORE, (name, row["frame"])
            seen["several"] += persons >= 2
            seen["none"] += persons == 0
        for k, v in happened.items():
            seen[k] = seen.get(k, 0) + v
    return seen


@pytest.mark.parametrize(("detector", "every"), [("detector", 5), ("detector_raw", 10),
                                                 ("detector_raw", 3)])
def test_videos_in_lockstep_equal_rtmlib_and_frame_by_frame(models, folders, detector, every,
                                                            tmp_path):
    """One chunk of five videos under --det-every K, one worker: with --batch-size 3 (three lanes,
    refilled as videos end) and 8 (more lanes than videos) every row equals rtmlib's PoseTracker
    fed that video alone, and the files equal those of --batch-size 1 (frame after frame)."""
    runs = {}
    for batch in ("1", "3", "8"):
        runs[batch] = tmp_path / f"b{batch}"
        ok(run_cli(["run", "--dataset", folders, "--out", runs[batch],
                    *wholebody(models, detector, every), "--workers", "1", "--chunk-frames", "1000",
                    "--batch-size", batch]), batch)
    assert len(list((runs["3"] / "parts").glob("chunk-*.parquet"))) == 1  # one chunk: lockstep
    for batch in ("3", "8"):
        assert_same_output(runs[batch], runs["1"])
    seen = folder_against_rtmlib(run_rows(runs["3"]), folders, models, detector, every)
    assert seen["kept_boxes"] and seen["detected"] > 5, seen
    assert seen["several" if detector == "detector" else "none"], seen  # the tiny detectors' way
    assert run_rows(runs["3"])["broken"][BROKEN]["status"] != "ok"


def _recording(run: Callable, calls: list[tuple[str, int]]) -> Callable:
    """onnxruntime's InferenceSession.run, recording each call's model file and batch size."""
    def recorded(session: Any, names: Any, feed: dict, *more: Any) -> Any:
        calls.append((Path(session._model_path).name, len(next(iter(feed.values())))))
        return run(session, names, feed, *more)
    return recorded


def test_the_pose_model_takes_frame_t_of_every_lane_in_one_call(models, folders, monkeypatch):
    """extract_videos with a tracked estimator of four lanes over four 30-frame videos: about one
    pose-model call per step for all four (not one a frame), the detector's frames of several
    videos in one call, and the blocks equal those of the videos one by one, frame by frame."""
    import onnxruntime as ort  # after the tool's modules: they turn its telemetry off first

    from phoenix_keypoints.extract.families.wholebody import clip_settings
    from phoenix_keypoints.extract.keypoints.estimator import RUNTIME, open_estimator, runtime
    from phoenix_keypoints.extract.keypoints.frames import Frame
    from phoenix_keypoints.extract.keypoints.video_rows import (
        Block,
        Video,
        extract_video,
        extract_videos,
    )

    made = scenes()
    videos = [(name, made[scene][:FRAMES]) for name, scene in
              (("crowd", "crowd"), ("alone", "alone"), ("mixed", "mixed"), ("again", "alone"))]

    def frames(rgbs: list[np.ndarray]) -> list[Frame]:
        return [Frame(rgb, "ok", "", f"{i}.png") for i, rgb in enumerate(rgbs)]

    settings = clip_settings({"detector": models["detector"], "pose_model": models["pose"],
                              "det_every": 5})
    blocks, seen = {}, []
    monkeypatch.setattr(ort.InferenceSession, "run", _recording(ort.InferenceSession.run, seen))
    for size in (4, 1):
        est = open_estimator(settings | {RUNTIME: runtime(size)})
        assert est.lanes == size
        blocks[size], seen[:] = Block(declaration=est.declaration), []
        if size > 1:
            extract_videos(est, [Video("train", name, FRAMES, name, lambda r=rgbs: frames(r))
                                 for name, rgbs in videos], blocks[size])
            calls = list(seen)
        else:
            for name, rgbs in videos:
                extract_video(est, "train", name, frames(rgbs), FRAMES, blocks[size])
        est.close()
    pose = [n for model, n in calls if model == models["pose"].name]
    det = [n for model, n in calls if model == models["detector"].name]
    # 120 frames, 4 at a time: a call a step, and the worker's first calls ramping up (each takes
    # at most twice the widest before it, PoseModel.crops_a_call: 1, 2, 4, 8 crops, issue 52
    # item 3), a few calls more than steps until a call holds a whole step
    ramp = int(np.ceil(np.log2(max(pose))))
    assert len(pose) <= FRAMES + 2 + ramp and max(pose) >= 4, pose
    assert max(det) == 4 and len(det) < sum(det) / 2, det  # frames of several videos a call
    got, want = (blocks[k].to_table().sort_by([("video", "ascending"), ("frame", "ascending")])
                 for k in (4, 1))
    assert got.equals(want), "lockstep gave other rows than frame by frame"


@pytest.mark.slow
def test_lockstep_resumed_after_sigkill_equals_the_uninterrupted_run(models, folders, tmp_path):
    """Chunks of two or three videos advanced in lockstep, SIGKILLed after one is committed and
    resumed: what the uninterrupted run wrote, and rtmlib's PoseTracker per video."""
    b = killed_and_resumed(["--dataset", folders, *wholebody(models, "detector_raw", 10),
                            "--workers", "1", "--chunk-frames", "40", "--batch-size", "3"],
                           tmp_path)
    parts = [pq.read_table(p, columns=["video"]) for p in (b / "parts").glob("chunk-*.parquet")]
    assert max(len(set(t["video"].to_pylist())) for t in parts) >= 2  # lanes were used
    folder_against_rtmlib(run_rows(b), folders, models, "detector_raw", 10)


def test_lanes_keep_each_frames_bad_output_to_its_own_video(models, folders, tmp_path):
    """A detector answering NaN boxes, and a pose model answering NaN, on some frames only (bright
    ones): in lockstep (--batch-size 3) those frames get their status and the tracker of their own
    video is left as PoseTracker leaves itself; the files equal frame by frame's."""
    from tiny_onnx import poisoned

    # the levels split the signer's frames (letterboxed means ~124-126) and crops (~0.15-0.2)
    bad_det = poisoned(models["detector"], tmp_path / "nan-boxes.onnx", "dets",
                       np.array([np.nan] * 4 + [0], np.float32), above=124.8)
    bad_pose = poisoned(models["pose"], tmp_path / "nan-pose.onnx", "simcc_x",
                        np.array(np.nan, np.float32), above=0.185)
    for name, det, pose in (("det", bad_det, models["pose"]), ("pose", models["detector"], bad_pose)):
        runs = {}
        for batch in ("1", "3"):
            runs[batch] = tmp_path / f"{name}{batch}"
            ok(run_cli(["run", "--dataset", folders, "--out", runs[batch], "--estimator",
                        "wholebody", "--detector", det, "--pose-model", pose, "--det-every", "5",
                        "--batch-size", batch, "--workers", "1", "--chunk-frames", "1000"]), name)
        assert_same_output(runs["3"], runs["1"])
        status = [r["status"] for rows in run_rows(runs["3"]).values() for r in rows]
        bad = {"det": "bad_detector_output", "pose": "bad_pose_output"}[name]
        assert status.count("ok") > 60 and status.count(bad) >= 10, (name, status)


def phoenix_tree(folders: Path, dest: Path) -> Path:
    """The frame folders as a PHOENIX-2014-T tree (all in train), the layout read in archives."""
    import shutil

    root = dest / "PHOENIX-2014-T"
    manual = root / "annotations" / "manual"
    manual.mkdir(parents=True)
    head = "name|video|start|end|speaker|orth|translation"
    rows = [f"{name}|{name}/1/*.png|-1|-1|Signer01|X|y" for name, *_ in LANE_VIDEOS]
    for split in ("train", "dev", "test"):
        (manual / f"PHOENIX-2014-T.{split}.corpus.csv").write_text(
            "\n".join([head, *(rows if split == "train" else [])]) + "\n")
    for name, *_ in LANE_VIDEOS:
        shutil.copytree(folders / name, root / "features" / "fullFrame-210x260px" / "train" / name)
    return root


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz", ".zip"])
def test_lockstep_reads_an_archive_as_the_folder(models, folders, suffix, tmp_path):
    """The frame folders packed in one archive, five lanes: a worker keeps one open reader of an
    archive, which the lanes' readers share; every row (values, statuses, the bytes' sha256)
    equals the unpacked tree's run."""
    from kinds import pack

    tree = phoenix_tree(folders, tmp_path / "tree")
    archive = pack(tree, tmp_path / f"phoenix{suffix}", tree.name)
    runs = {}
    for name, dataset in (("folder", tree), ("archive", archive)):
        runs[name] = tmp_path / name
        ok(run_cli(["run", "--dataset", dataset, "--out", runs[name],
                    *wholebody(models, "detector", 5), "--workers", "1", "--chunk-frames", "1000",
                    "--batch-size", "5"]), name)
    cols = ["video", "frame", "status", "wholebody", "persons", "file_size", "file_sha256"]
    got, want = (pq.read_table(runs[k] / "keypoints.parquet", columns=cols)
                 .sort_by([("video", "ascending"), ("frame", "ascending")])
                 for k in ("archive", "folder"))
    assert got.num_rows == sum(n for *_, n in LANE_VIDEOS)
    assert got["status"].to_pylist().count("ok") == got.num_rows - 1  # broken's frame
    assert got.equals(want)



def test_a_frame_killing_its_worker_in_lockstep_fails_its_own_video_alone(models, folders,
                                                                          tmp_path):
    """kill-frame: the worker dies reading frame 9 of `alone` while two later videos of its chunk
    are under way beside it (three lanes), so the last video it started is not the culprit. After
    the retries only `alone` is failed; every other video's rows equal an uninterrupted run's."""
    from phoenix_keypoints.jobs.rundir.parts import read_part_info

    args = ["--dataset", folders, *wholebody(models, "detector_raw", 5), "--workers", "1",
            "--chunk-frames", "1000", "--batch-size", "3"]
    ok(run_cli(["run", "--out", tmp_path / "clean", *args]), "clean")
    out = tmp_path / "run"
    proc = run_cli(["run", "--out", out, *args], env={"PHOENIX_KEYPOINTS_FAULTS": "kill-frame=alone:9"})
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 video(s) failed") and "alone" in last, proc.stderr
    info, _ = read_part_info(next((out / "parts").glob("chunk-*.parquet")))
    assert list(info.failed) == ["alone"], proc.stderr
    ok(run_cli(["merge", "--out", out, "--allow-partial"]), "merge")
    got, want = run_rows(out), run_rows(tmp_path / "clean")
    assert set(got) == set(want) - {"alone"}
    for video, rows in got.items():
        assert rows == want[video], video
