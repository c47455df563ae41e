"""A corpus that changes under a run: only what changed is extracted, nothing passes in silence.

Each case changes a real copy of the embedded sample on disk after a finished run (a video or frame
added or removed, a video moved to another split, a corpus text corrected), runs the same command
again and compares the result with a fresh run on the corpus as it is now: keypoints.parquet byte
for byte, every tensors/ file, the legacy exports and the report. The chunks the second run extracts
are counted from the part files it wrote. --chunk-frames 30 cuts the sample's five videos into
three chunks, two of them holding two videos each (one across the dev/test boundary), so that a
change inside a chunk, and new chunks among the old ones, are what is tested.

What is tested is the job (the plan, the parts, the merge), not the keypoints: the runs use
`--estimator wholebody` on the tiny ONNX models of tests/tiny_onnx.py (real onnxruntime on real
frames, a few milliseconds a frame where Holistic takes 31-68 ms). One case (a video moved to
another split) runs on Holistic too, so that the legacy exports, made from Holistic's points only,
are compared with a fresh run's as well.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import (
    assert_no_traceback,
    assert_same_output,
    busy_workers,
    copy_dataset,
    popen_cli,
    run_cli,
    sha256,
    wait_for,
)

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.jobs.run.changes import diff_plans
from phoenix_keypoints.jobs.run.plan import extend_plan, make_plan
from phoenix_keypoints.jobs.schedule.chunks import merge_order

ARGS = ["--chunk-frames", "30", "--workers-per-gpu", "2"]
FRAMES = "features/fullFrame-210x260px"
CSV = "annotations/manual/PHOENIX-2014-T.{}.corpus.csv"
# The sample's plan at --chunk-frames 30: chunk 0 = dev/cameraman-1 (16 frames) + test/coffee-1
# (12), chunk 1 = test/hopper-2 (16) + train/astronaut-1 (18), chunk 2 = train/hopper-1 (20).
PLAN = [(0, "dev", "cameraman-1"), (0, "test", "coffee-1"), (1, "test", "hopper-2"),
        (1, "train", "astronaut-1"), (2, "train", "hopper-1")]


def _csv(root: Path, split: str) -> Path:
    return root / CSV.format(split)


def _move_line(root: Path, video: str, src: str, dest: str | None, text: str = "") -> None:
    """Take a video's line out of split src's corpus file; into dest's (maybe with other text)."""
    lines = _csv(root, src).read_text().splitlines(keepends=True)
    [line] = [x for x in lines if x.startswith(f"{video}|")]
    _csv(root, src).write_text("".join(x for x in lines if x is not line))
    if dest is not None:
        with _csv(root, dest).open("a") as f:
            f.write(text or line)


def add_video(root: Path) -> tuple[int, str]:
    """dev/dog-1, a copy of train/hopper-1's 20 frames: sorts between the two videos of chunk 0."""
    shutil.copytree(root / FRAMES / "train/hopper-1", root / FRAMES / "dev/dog-1")
    with _csv(root, "dev").open("a") as f:
        f.write("dog-1|dog-1/1/*.png|-1|-1|Signer05|HUND|ein hund\n")
    return 20, "1 video(s) added (dev/dog-1)"


def add_frame(root: Path) -> tuple[int, str]:
    """A 13th frame for test/coffee-1 (chunk 0, with dev/cameraman-1)."""
    folder = root / FRAMES / "test/coffee-1"
    shutil.copyfile(folder / "images0001.png", folder / "images0013.png")
    return 13, "1 video(s) with other frames (+1/-0 frames: test/coffee-1 (+1 frame(s)))"


def remove_frame(root: Path) -> tuple[int, str]:
    """train/astronaut-1 (chunk 1, with test/hopper-2) loses its last frame."""
    (root / FRAMES / "train/astronaut-1/images0018.png").unlink()
    return 17, "1 video(s) with other frames (+0/-1 frames: train/astronaut-1 (-1 frame(s)))"


def remove_video(root: Path) -> tuple[int, str]:
    """test/hopper-2 leaves chunk 1 (its part is kept: the merge leaves its rows out)."""
    _move_line(root, "hopper-2", "test", None)
    shutil.rmtree(root / FRAMES / "test/hopper-2")
    return 0, "1 video(s) removed (test/hopper-2)"


def remove_chunk(root: Path) -> tuple[int, str]:
    """train/hopper-1 is chunk 2 alone: the chunk is retired, its part moved aside."""
    _move_line(root, "hopper-1", "train", None)
    shutil.rmtree(root / FRAMES / "train/hopper-1")
    return 0, "1 video(s) removed (train/hopper-1)"


def move_video(root: Path) -> tuple[int, str]:
    """test/coffee-1 (chunk 0) is moved to train: its folder and its corpus line."""
    _move_line(root, "coffee-1", "test", "train")
    (root / FRAMES / "test/coffee-1").rename(root / FRAMES / "train/coffee-1")
    return 12, "1 video(s) moved to another split (coffee-1: test -> train)"


def change_text(root: Path) -> tuple[int, str]:
    """test/hopper-2's translation corrected: no frame is redone, the tensors' index changes."""
    text = "hopper-2|hopper-2/1/*.png|-1|-1|Signer01|TEMPERATUR STEIGEN|die temperatur steigt\n"
    _move_line(root, "hopper-2", "test", "test", text)
    return 0, "1 video(s) with other corpus text (speaker, gloss, translation, ...: test/hopper-2)"


CASES: dict[str, Callable[[Path], tuple[int, str]]] = {
    "video-added": add_video, "frame-added": add_frame, "frame-removed": remove_frame,
    "video-removed": remove_video, "chunk-retired": remove_chunk, "video-moved": move_video,
    "text-changed": change_text}


def _rows(plan: pq.Table) -> list[tuple]:
    return list(zip(*(plan[c].to_pylist() for c in ("chunk", "split", "video")), strict=True))


def _parts(out: Path) -> dict[str, tuple[int, int]]:
    """Committed part -> (inode, mtime): a part rewritten or replaced shows."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted((out / "parts").glob("chunk-*.parquet"))}


def _run(root: Path | None, out: Path, *extra: str, chosen: list[str] | None = None):
    """`run` planning a new folder on root with the estimator options `chosen`, or (root None) the
    same command again on out (which keeps the run folder's estimator)."""
    new = ["--dataset", root, *ARGS, *(chosen or [])] if root else []
    proc = run_cli(["run", "--out", out, *extra, *new])
    assert_no_traceback(proc)
    return proc


def assert_equal_to_fresh(out: Path, ref: Path, holistic: bool) -> None:
    """keypoints.parquet byte-identical, every tensors/ file identical, the exports (Holistic's
    legacy npz, a whole-body run's .pose files) and report equal: the outputs of the extended run
    are those of a fresh run on the corpus as it is now."""
    assert_same_output(out, ref)
    names = sorted(p.name for p in (ref / "tensors").iterdir())
    assert sorted(p.name for p in (out / "tensors").iterdir()) == names
    for name in names:
        assert sha256(out / "tensors" / name) == sha256(ref / "tensors" / name), name
    export = "legacy-npz" if holistic else "pose"
    for run in (out, ref):
        for args in (["export", "--format", export, "--to", run / "exported"], ["report"]):
            proc = run_cli([args[0], "--out", run, *args[1:]])
            assert proc.returncode == 0, proc.stderr
    poses = sorted(p.relative_to(ref / "exported") for p in (ref / "exported").rglob("*.pose"))
    assert poses or holistic
    assert poses == sorted(p.relative_to(out / "exported") for p in (out / "exported").rglob("*.pose"))
    for pose in poses:
        assert sha256(out / "exported" / pose) == sha256(ref / "exported" / pose), pose
    for npz in sorted((ref / "exported").glob("*.npz")):
        a, b = np.load(out / "exported" / npz.name), np.load(npz)
        assert sorted(a.files) == sorted(b.files)
        for k in b.files:
            np.testing.assert_array_equal(a[k], b[k])
    assert pq.read_table(out / "report" / "videos.parquet").equals(
        pq.read_table(ref / "report" / "videos.parquet"))


CELLS = [(case, "wholebody") for case in CASES] + [("video-moved", "holistic")]


@pytest.mark.slow
@pytest.mark.parametrize("case,estimator", CELLS, ids=[f"{e}-{c}" for c, e in CELLS])
def test_a_changed_corpus_extracts_only_what_changed(case: str, estimator: str, sample_root: Path,
                                                     tmp_path: Path, request: pytest.FixtureRequest):
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T", writable=True)
    out = tmp_path / "run"
    chosen = request.getfixturevalue("wholebody_options") if estimator == "wholebody" else []
    assert _run(root, out, chosen=chosen).returncode == 0
    assert _rows(pq.read_table(out / "plan.parquet")) == PLAN
    before = _parts(out)
    frames, summary = CASES[case](root)

    status = run_cli(["status", "--out", out])  # named before the run, without touching anything
    assert status.returncode == 0 and f"corpus:   changed since planned: {summary}" in status.stdout
    checked = run_cli(["verify", "--out", out])
    assert_no_traceback(checked)
    assert checked.returncode == 1 and summary in checked.stderr, checked.stderr
    assert checked.stdout, "verify names what changed, one line each"

    again = _run(None, out)
    assert again.returncode == 0, again.stderr
    assert f"the corpus changed since {out} was planned: {summary}" in again.stderr
    redo = (f"re-planned: 1 video(s) ({frames} frame(s)) to extract in 1 new chunk(s)" if frames
            else "re-planned: no frame to extract")
    assert redo in again.stderr, again.stderr
    after = _parts(out)
    new = sorted(set(after) - set(before))
    assert len(new) == (1 if frames else 0), new  # only what changed was extracted
    if frames:
        assert new == ["chunk-000003.parquet"]  # numbered after the old chunks
        assert pq.read_metadata(out / "parts" / new[0]).num_rows == frames
        assert json.loads((out / "run.json").read_text())["extraction"]["chunks"] == 1
    retired = case == "chunk-retired"
    assert {k: v for k, v in before.items() if k != "chunk-000002.parquet" or not retired} == \
        {k: after[k] for k in before if k != "chunk-000002.parquet" or not retired}, \
        "a committed part was rewritten"
    if retired:
        assert (out / "parts/rejected/chunk-000002.parquet.why").read_text().startswith(
            "its chunk was retired")
    record = json.loads((out / "run.json").read_text())["changes"]
    assert [c["summary"] for c in record] == [summary] and record[0]["redo_frames"] == frames

    ref = tmp_path / "fresh"
    assert _run(root, ref, chosen=chosen).returncode == 0
    assert_equal_to_fresh(out, ref, holistic=estimator == "holistic")
    final = run_cli(["verify", "--out", out])
    assert final.returncode == 0 and final.stdout == "", final.stdout + final.stderr
    assert "corpus:   as planned" in run_cli(["status", "--out", out]).stdout
    done = _run(None, out)
    assert done.returncode == 0 and done.stdout.startswith("complete:"), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("where", ["mid-extension", "between plan and run.json"])
def test_sigkill_while_following_a_change(where: str, sample_root: Path, tmp_path: Path,
                                          wholebody_options: list[str]):
    """A real SIGKILL of the whole run while it extends (inside the new video, frames slowed), or
    between the new plan and run.json (fault hook): the next run completes it, equal to fresh."""
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T", writable=True)
    out = tmp_path / "run"
    assert _run(root, out, chosen=wholebody_options).returncode == 0
    before = _parts(out)
    add_frame(root)
    add_video(root)
    fault = "frame-delay=0.5" if where == "mid-extension" else "kill-after-plan"
    proc = popen_cli(["run", "--out", out], env={"PHOENIX_KEYPOINTS_FAULTS": fault})
    try:
        if where == "mid-extension":
            wait_for(lambda: busy_workers(out), 120, "a worker inside a new video", proc)
            os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert not list((out / "parts").glob("chunk-00000[34].parquet")), "killed too late"
    again = _run(None, out)
    assert again.returncode == 0, again.stderr
    told = again.stderr.count("the corpus changed since")
    assert told == (0 if where == "mid-extension" else 1), again.stderr  # planned once, not twice
    assert {k: before[k] for k in before} == {k: _parts(out)[k] for k in before}
    record = json.loads((out / "run.json").read_text())["changes"]
    assert len(record) == 1 and record[0]["changes"]["added"] == 1
    ref = tmp_path / "fresh"
    assert _run(root, ref, chosen=wholebody_options).returncode == 0
    assert_same_output(out, ref)


@pytest.mark.slow
def test_frozen_keeps_the_plan_and_warns(sample_root: Path, tmp_path: Path,
                                         wholebody_options: list[str]):
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T", writable=True)
    out = tmp_path / "run"
    assert _run(root, out, chosen=wholebody_options).returncode == 0
    kept = sha256(out / "keypoints.parquet"), sha256(out / "run.json"), sha256(out / "plan.parquet")
    _, summary = add_video(root)
    frozen = _run(None, out, "--frozen")
    assert frozen.returncode == 0 and frozen.stdout.startswith("complete:"), frozen.stderr
    assert f"the corpus changed since {out} was planned: {summary}. --frozen" in frozen.stderr
    assert (sha256(out / "keypoints.parquet"), sha256(out / "run.json"),
            sha256(out / "plan.parquet")) == kept
    assert _run(None, out).returncode == 0
    assert "dog-1" in set(pq.read_table(out / "keypoints.parquet")["video"].to_pylist())


# --- the diff and the re-plan, on plans made from real listings --------------------------------------
def test_diff_names_each_kind_of_change(sample_root: Path, tmp_path: Path):
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T", writable=True)
    old = make_plan(discover(root), 2, 30)
    assert not diff_plans(old, make_plan(discover(root), 2, 30))
    for change in (add_video, add_frame, remove_frame, move_video, change_text):
        change(root)
    _move_line(root, "hopper-1", "train", None)  # listed no more, its frames stay on disk
    diff = diff_plans(old, make_plan(discover(root), 2, 30))
    assert diff.added == [("dev", "dog-1")] and diff.removed == [("train", "hopper-1")]
    assert diff.moved == [("coffee-1", "test", "train")]
    assert [(r.video, r.added, r.removed) for r in diff.reframed] == [
        ("astronaut-1", (), ("images0018.png",))]
    assert diff.details == [("test", "hopper-2")]
    assert diff.redo == {("dev", "dog-1"), ("train", "coffee-1"), ("train", "astronaut-1")}
    assert diff.gone == {("train", "hopper-1"), ("test", "coffee-1"), ("train", "astronaut-1")}


def test_replan_keeps_numbers_and_puts_the_rest_in_new_contiguous_chunks(sample_root: Path,
                                                                        tmp_path: Path):
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T", writable=True)
    old = make_plan(discover(root), 2, 30)
    for change in (add_video, add_frame, remove_frame):
        change(root)
    now = make_plan(discover(root), 2, 30)
    parts = {0: "fp-old", 1: "fp-old"}  # chunk 2 has no part yet
    # --chunk-frames 1000: one chunk for all that is new, were it not cut where old chunks lie
    plan, ext = extend_plan(old, now, diff_plans(old, now).redo, parts, "fp-old", 2, 1000)
    assert _rows(plan) == [(0, "dev", "cameraman-1"), (3, "dev", "dog-1"), (3, "test", "coffee-1"),
                   (1, "test", "hopper-2"), (4, "train", "astronaut-1"), (2, "train", "hopper-1")]
    assert ext.new_chunks == [3, 4] and ext.retired == []
    assert ext.kept[0].dropped == (("test", "coffee-1", 12),)
    assert ext.kept[1].dropped == (("train", "astronaut-1", 18),)
    assert 2 not in ext.kept  # no part: a part made now carries the new fingerprint
    assert merge_order(plan) == [(0, (("dev", "cameraman-1"),)),
                                 (3, (("dev", "dog-1"), ("test", "coffee-1"))),
                                 (1, (("test", "hopper-2"),)), (4, (("train", "astronaut-1"),)),
                                 (2, (("train", "hopper-1"),))]
    assert plan.drop_columns(["chunk"]).equals(now.drop_columns(["chunk"]))


# --- every kind of corpus and frame source ---------------------------------------------------------
def _mp4(dest: Path, frames: list[Path]) -> Path:
    """A small MPEG-4 video of these PNG frames, encoded here with PyAV."""
    import av
    import cv2

    dest.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(dest), "w") as o:
        s = o.add_stream("mpeg4", rate=25)
        s.width, s.height, s.pix_fmt = 210, 260, "yuv420p"
        for png in frames:
            rgb = cv2.cvtColor(cv2.imread(str(png)), cv2.COLOR_BGR2RGB)
            for packet in s.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                o.mux(packet)
        for packet in s.encode(None):
            o.mux(packet)
    return dest


def _frames(sample: Path, split: str, video: str, n: int = 6) -> list[Path]:
    return sorted((sample / FRAMES / split / video).glob("images*.png"))[:n]


def _videos(sample: Path, base: Path) -> tuple[Path, Callable[[], None]]:
    """A folder of video files (split from the first folder level); a third video comes later."""
    root = base / "clips"
    _mp4(root / "train/hopper-1.mp4", _frames(sample, "train", "hopper-1"))
    _mp4(root / "dev/cameraman-1.mp4", _frames(sample, "dev", "cameraman-1"))
    return root, lambda: _mp4(root / "train/astronaut-1.mp4", _frames(sample, "train", "astronaut-1"))


def _manifest(sample: Path, base: Path) -> tuple[Path, Callable[[], None]]:
    """A manifest of a video file, a range of it and a frame folder; a second range comes later."""
    root = base / "listed"
    _mp4(root / "media/clip.mp4", _frames(sample, "train", "hopper-1", 12))
    shutil.copytree(sample / FRAMES / "test/coffee-1", root / "media/frames")
    rows = ["name,split,path,start,end,text", "clip,train,media/clip.mp4,,,a clip",
            "head,dev,media/clip.mp4,0,3,its head", "folder,test,media/frames,,,frames"]
    (root / "list.csv").write_text("\n".join(rows) + "\n")

    def change() -> None:
        with (root / "list.csv").open("a") as f:
            f.write("tail,dev,media/clip.mp4,8,11,its tail\n")
    return root / "list.csv", change


def _archive(sample: Path, base: Path) -> tuple[Path, Callable[[], None]]:
    """The sample packed as a .tar.gz; later replaced by one that also holds dev/dog-1."""
    import tarfile

    tree = copy_dataset(sample, base / "tree" / "PHOENIX-2014-T", writable=True)
    dest = base / "PHOENIX-2014-T.tar.gz"

    def pack() -> None:
        tmp = dest.with_name("new.tar.gz")
        with tarfile.open(tmp, "w:gz") as tf:
            tf.add(tree, arcname="PHOENIX-2014-T")
        os.replace(tmp, dest)  # as a finished download replaces the old file
    pack()
    return dest, lambda: (add_video(tree), pack())


SOURCES = {"video-files": _videos, "manifest": _manifest, "archive": _archive}


@pytest.mark.slow
@pytest.mark.parametrize("kind", SOURCES)
def test_every_corpus_kind_is_extended(kind: str, sample_root: Path, tmp_path: Path,
                                       wholebody_options: list[str]):
    """A video added to a folder of videos, a row (a range of a video file) added to a manifest, an
    archive replaced by one with one more video: one chunk extracted, equal to a fresh run."""
    dataset, change = SOURCES[kind](sample_root, tmp_path)
    out = tmp_path / "run"
    assert _run(dataset, out, chosen=wholebody_options).returncode == 0
    before = _parts(out)
    change()
    again = _run(None, out)
    assert again.returncode == 0, again.stderr
    assert "the corpus changed since" in again.stderr and "1 video(s) added" in again.stderr
    assert "to extract in 1 new chunk(s)" in again.stderr, again.stderr
    after = _parts(out)
    assert {k: after[k] for k in before} == before and len(after) == len(before) + 1
    ref = tmp_path / "fresh"
    assert _run(dataset, ref, chosen=wholebody_options).returncode == 0
    assert_same_output(out, ref)


@pytest.mark.slow
def test_slurm_replans_a_corpus_changed_between_submissions(sample_root: Path, tmp_path: Path,
                                                            wholebody_options: list[str]):
    """An array planned by `slurm` and run (its two tasks started as the array starts them), the
    corpus grows: a task started now keeps the shared plan and says so; `slurm` again re-plans
    and submits one task, which extracts only the new video; equal to a fresh run."""
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T", writable=True)
    out = tmp_path / "run"
    shard = ["run", "--out", out, "--num-shards", "2", "--shard-index"]
    slurm = ["slurm", "--out", out, "--num-shards", "2", "--cpus-per-task", "1"]
    planned = run_cli([*slurm, "--dataset", root, "--chunk-frames", "30", *wholebody_options])
    assert planned.returncode == 0, planned.stderr
    for i in ("0", "1"):
        assert run_cli([*shard, i]).returncode == 0
    assert (out / "keypoints.parquet").is_file()
    before, plan = _parts(out), sha256(out / "plan.parquet")
    _, summary = add_video(root)
    late = run_cli([*shard, "1"])
    assert late.returncode == 0 and f"was planned: {summary}. The shards of an array share the " \
        "plan `slurm` made, so this one keeps it" in late.stderr, late.stderr
    assert sha256(out / "plan.parquet") == plan and _parts(out) == before
    again = run_cli(slurm)
    assert_no_traceback(again)
    assert again.returncode == 0, again.stderr
    assert "re-planned: 1 video(s) (20 frame(s)) to extract in 1 new chunk(s)" in again.stderr
    assert "to submit: 1 (--array=0)" in again.stderr, again.stderr
    assert run_cli([*shard, "0"]).returncode == 0  # the resubmitted task
    after = _parts(out)
    assert {k: after[k] for k in before} == before and sorted(set(after) - set(before)) == [
        "chunk-000003.parquet"]
    ref = tmp_path / "fresh"
    assert _run(root, ref, chosen=wholebody_options).returncode == 0
    assert_same_output(out, ref)
