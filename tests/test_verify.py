"""A frame whose content changed is never merged as if current: a resume redoes exactly its chunk,
and `verify` names it. Frames are changed on disk for real (another frame copied over one, another
frame padded to the same size, bytes rewritten with the old mtime put back) in copies of the shared
sample, and the run is interrupted by a real SIGKILL."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import (
    KEYPOINT_COLUMNS,
    assert_no_traceback,
    copy_dataset,
    pad_png,
    popen_cli,
    read_keypoints,
    run_cli,
    same_keypoints,
    video_rows,
    wait_for,
)

FRAMES = "features/fullFrame-210x260px"
# Three one-frame videos; --chunk-frames 1 gives each its own chunk, in plan order (name order).
VIDEOS = ["full_body-1", "portrait-1", "two_hands-1"]
ARGS = ["--videos", ",".join(VIDEOS), "--chunk-frames", "1", "--workers-per-gpu", "1"]
SOURCE, TARGET, LAST = VIDEOS  # chunk 1 (TARGET) gets chunk 0's picture
DEV = "25October_2010_Monday_tagesschau-17"  # not run here; its first frame is smaller than LAST's
DEV_FIRST = f"{FRAMES}/dev/{DEV}/images0001.png"


def _image(video: str) -> str:
    return f"{FRAMES}/test/{video}/images0001.png"


def _parts(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted((out / "parts").glob("chunk-*.parquet"))}


def _interrupted_run(root: Path, out: Path) -> dict[str, int]:
    """A run over VIDEOS SIGKILLed (coordinator and worker at once) with chunks 0 and 1 committed
    and chunk 2 not: each frame takes 3 s more, so the kill lands while chunk 2 is extracted."""
    proc = popen_cli(["run", "--dataset", root, "--out", out, *ARGS],
                     env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=3"})
    try:
        wait_for(lambda: (out / "parts" / "chunk-000001.parquet").exists(), 240,
                 "chunks 0 and 1 committed", proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert pq.read_table(out / "plan.parquet")["chunk"].to_pylist() == [0, 1, 2]
    parts = _parts(out)
    assert list(parts) == ["chunk-000000.parquet", "chunk-000001.parquet"], "killed too late"
    assert not (out / "keypoints.parquet").exists()
    return parts


def _change(root: Path, how: str) -> str:
    """Put SOURCE's picture in TARGET's frame; the reason a stat gives for the change."""
    target, source = root / _image(TARGET), (root / _image(SOURCE)).read_bytes()
    size = target.stat().st_size
    if how == "other-frame":  # another frame copied over it: another size
        shutil.copyfile(root / _image(SOURCE), target)
        return f"size {size} -> {len(source)}"
    target.write_bytes(pad_png(source, size))  # another frame's picture in exactly this size
    assert target.stat().st_size == size
    return "modified"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["other-frame", "same-size"])
def test_changed_frame_redoes_exactly_its_chunk(how: str, shared_sample: Path, shared_run: Path,
                                                tmp_path: Path):
    root = copy_dataset(shared_sample, tmp_path / "PHOENIX-2014-T", writable=True)
    out = tmp_path / "run"
    before = _interrupted_run(root, out)
    why = _change(root, how)
    line = f"{TARGET}\t0\t{_image(TARGET)}\t{why}"

    checked = run_cli(["verify", "--out", out])  # the parts of the unfinished run
    assert_no_traceback(checked)
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.splitlines() == [line]
    assert "is not merged yet: checking its 2 committed part(s)" in checked.stderr
    assert f"verify: 1 of 2 frame(s) no longer match the dataset at {root}" in checked.stderr
    content = run_cli(["verify", "--out", out, "--content"])
    assert content.returncode == 1 and content.stdout.splitlines() == [line], content.stderr

    again = run_cli(["run", "--out", out])
    assert_no_traceback(again)
    assert again.returncode == 0, again.stderr
    reason = f"frames changed on disk: {_image(TARGET)} ({why})"
    assert f"part of chunk 1 not trusted ({reason}): moved to parts/rejected/, redoing it" \
        in again.stderr
    assert "chunk 0" not in again.stderr
    assert (out / "parts" / "rejected" / "chunk-000001.parquet.why").read_text() == reason + "\n"
    after = _parts(out)
    assert after["chunk-000000.parquet"] == before["chunk-000000.parquet"], "chunk 0 was redone"
    assert after["chunk-000001.parquet"] != before["chunk-000001.parquet"]
    assert list(after) == [f"chunk-00000{i}.parquet" for i in range(3)]

    got, ref = read_keypoints(out), read_keypoints(shared_run)
    for video in (SOURCE, LAST):
        assert same_keypoints(got, ref, video), video
    new = video_rows(got, TARGET)
    assert new.select(KEYPOINT_COLUMNS).equals(video_rows(ref, SOURCE).select(KEYPOINT_COLUMNS)), \
        "the changed frame's keypoints are those of the picture it holds now"
    assert not same_keypoints(got, ref, TARGET)
    data = (root / _image(TARGET)).read_bytes()
    assert new["file_sha256"].to_pylist() == [hashlib.sha256(data).hexdigest()]
    assert new["file_size"].to_pylist() == [len(data)]
    final = run_cli(["verify", "--out", out, "--content"])
    assert final.returncode == 0, final.stderr
    assert final.stdout == ""
    assert "verify: all 3 frame(s)" in final.stderr and "size, mtime and sha256" in final.stderr


# --- verify on a finished run ---------------------------------------------------------------
@pytest.fixture(scope="module")
def finished(shared_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("verify")
    root = copy_dataset(shared_sample, tmp / "PHOENIX-2014-T", writable=True)
    out = tmp / "run"
    proc = run_cli(["run", "--dataset", root, "--out", out, *ARGS])
    assert proc.returncode == 0, proc.stderr
    return root, out


@pytest.mark.slow
def test_verify_names_changed_frames_and_run_redoes_them(finished, shared_run: Path):
    root, out = finished
    ok = run_cli(["verify", "--out", out])
    assert ok.returncode == 0 and ok.stdout == "", ok.stderr
    assert f"verify: all 3 frame(s) of {out} match the dataset at {root} (size and mtime" in ok.stderr
    # LAST: rewritten with DEV's first picture in the same size, its old mtime put back.
    last = root / _image(LAST)
    st = last.stat()
    last.write_bytes(pad_png((root / DEV_FIRST).read_bytes(), st.st_size))
    os.utime(last, ns=(st.st_atime_ns, st.st_mtime_ns))
    # TARGET: cut short.
    short = root / _image(TARGET)
    size = short.stat().st_size
    short.write_bytes(short.read_bytes()[:1000])
    cut = f"{TARGET}\t0\t{_image(TARGET)}\tsize {size} -> 1000"
    stat_only = run_cli(["verify", "--out", out])
    assert_no_traceback(stat_only)
    assert stat_only.returncode == 1, stat_only.stderr
    assert stat_only.stdout.splitlines() == [cut]
    assert f"1 of 3 frame(s) no longer match the dataset at {root}" in stat_only.stderr
    assert f"`phoenix-keypoints run --out {out}` redoes" in stat_only.stderr
    content = run_cli(["verify", "--out", out, "--content"])
    assert content.returncode == 1, content.stderr
    assert content.stdout.splitlines() == [cut, f"{LAST}\t0\t{_image(LAST)}\tcontent differs"]
    assert "found by --content only: `touch` them" in content.stderr

    redo = run_cli(["run", "--out", out])  # redoes TARGET's chunk only: its stat changed
    assert redo.returncode == 0, redo.stderr
    assert "part of chunk 1 not trusted" in redo.stderr and "chunk 2" not in redo.stderr
    got, ref = read_keypoints(out), read_keypoints(shared_run)
    assert video_rows(got, TARGET)["status"].to_pylist() == ["corrupt_png"]
    assert same_keypoints(got, ref, LAST), "content-only change: not seen by a resume"
    assert run_cli(["verify", "--out", out]).returncode == 0
    assert run_cli(["verify", "--out", out, "--content"]).returncode == 1
    last.touch()  # as verify advises: now a resume sees it
    assert run_cli(["run", "--out", out]).returncode == 0
    got = read_keypoints(out)
    assert video_rows(got, LAST).select(KEYPOINT_COLUMNS).equals(
        video_rows(ref, DEV).select(KEYPOINT_COLUMNS).slice(0, 1))
    assert same_keypoints(got, ref, SOURCE)
    final = run_cli(["verify", "--out", out, "--content"])
    assert final.returncode == 0 and final.stdout == "", final.stderr


def test_verify_refuses_what_is_not_a_run(tmp_path: Path):
    proc = run_cli(["verify", "--out", tmp_path / "nothing"])
    assert_no_traceback(proc)
    assert proc.returncode == 2
    assert "holds no run (no run.json)" in proc.stderr
    assert not (tmp_path / "nothing").exists()

