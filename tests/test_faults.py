"""Crash safety, proven by injecting the faults for real: SIGKILL of workers and of the whole job,
SIGTERM/SIGINT, damaged parts on disk, a write that the kernel refuses, a video that kills its
worker every time. Each run must end equal to an uninterrupted one (or the documented partial
result) and no traceback may reach the user.

Where a test is about the job (processes killed or stopped, a refused write, a video that kills
its worker) its runs use `--estimator wholebody` on the tiny ONNX models of tests/tiny_onnx.py and
compare with `clean_wholebody_run`: real onnxruntime on real frames, milliseconds a frame where
Holistic takes 31-68 ms, paced by the same frame delays. Tests on copies of `clean_run` (damaged
parts, a merge refused by the kernel) and those whose limits follow Holistic's part sizes or run
scripts/soak.py keep Holistic."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import (
    REPO,
    RUN_ARGS,
    WHOLEBODY_COLUMNS,
    alive,
    assert_no_traceback,
    assert_same_output,
    build_2014_layout,
    busy_workers,
    cli_env,
    popen_cli,
    progress,
    read_keypoints,
    run_cli,
    run_with_file_size_limit,
    same_keypoints,
    session_members,
    temps,
    wait_for,
)

from phoenix_keypoints.jobs.run.finish import finish
from phoenix_keypoints.jobs.run.merge import BackgroundMerge, CorruptPart
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.parts import read_part_info

SLOW = {"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.1"}  # chunks last seconds: kills land mid-chunk


def start(sample_root: Path, out: Path, options: list[str], env: dict[str, str] | None = None
          ) -> subprocess.Popen:
    """The reference run's command with the estimator `options`, frames paced (SLOW or env)."""
    return popen_cli(["run", "--dataset", sample_root, "--out", out, *RUN_ARGS, *options],
                     env=env or SLOW)


def resume(out: Path) -> subprocess.CompletedProcess:
    """`run` again, as a user would after the crash (same folder, same options)."""
    proc = run_cli(["run", "--out", out])
    assert_no_traceback(proc)
    return proc


def finished(proc: subprocess.Popen, timeout: float = 180) -> str:
    _, err = proc.communicate(timeout=timeout)
    assert "Traceback" not in err, err
    return err


# --- processes killed ----------------------------------------------------------------------------
def test_worker_sigkill_mid_chunk(clean_wholebody_run: Path, sample_root: Path, tmp_path: Path,
                                  wholebody_options: list[str]):
    """One worker OOM-killed: its chunk goes back, a new worker starts, the run ends by itself."""
    out = tmp_path / "run"
    proc = start(sample_root, out, wholebody_options)
    victim = wait_for(lambda: busy_workers(out), 90, "a worker inside a video", proc)[0]
    os.kill(victim["pid"], signal.SIGKILL)
    err = finished(proc)
    assert proc.returncode == 0, err
    assert f"(pid {victim['pid']}) died (SIGKILL) in chunk" in err
    assert "attempt 1/3" in err
    assert_same_output(out, clean_wholebody_run)


def test_coordinator_sigkill_workers_follow(clean_wholebody_run: Path, sample_root: Path, tmp_path: Path,
                                            wholebody_options: list[str]):
    """The coordinator alone SIGKILLed: PDEATHSIG stops its workers (no orphan keeps working),
    and the next run finishes the job."""
    out = tmp_path / "run"
    # 10 s a frame: a worker only notices a dead coordinator (broken pipe) when it next reports,
    # seconds later; gone within 6 s means PDEATHSIG's SIGTERM stopped it mid-frame (6, not 3:
    # the suite runs in parallel processes, and a loaded 2-core host takes seconds to end one).
    proc = start(sample_root, out, wholebody_options,
                 env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=10"})
    wait_for(lambda: len(busy_workers(out)) == 2, 90, "both workers inside a video", proc)
    workers = [w["pid"] for w in progress(out)["workers"]]
    parts = sorted((out / "parts").glob("chunk-*.parquet"))
    proc.kill()  # SIGKILL to the coordinator's pid only, not its group
    proc.wait(timeout=10)  # (not communicate: the workers' resource tracker holds its stderr)
    assert proc.returncode == -signal.SIGKILL
    wait_for(lambda: not [p for p in workers if alive(p)], 6,
             f"workers {workers} to stop after their coordinator died")
    wait_for(lambda: not session_members(proc.pid), 10, "no process of the run left")
    assert sorted((out / "parts").glob("chunk-*.parquet")) == parts, "an orphan kept working"
    assert not temps(out), "a worker stopped by PDEATHSIG left its temp part"
    proc.communicate(timeout=10)
    assert not (out / "keypoints.parquet").exists()
    again = resume(out)
    assert again.returncode == 0, again.stderr
    assert not temps(out)
    assert_same_output(out, clean_wholebody_run)


def test_whole_job_sigkill_then_resume(clean_wholebody_run: Path, sample_root: Path, tmp_path: Path,
                                       wholebody_options: list[str]):
    """Node reboot: coordinator and workers SIGKILLed at once; `run` again finishes, no frame
    twice, none missing, committed parts kept as they were."""
    out = tmp_path / "run"
    # Parts wait 2 s between temp file and rename, so the kill can land mid-commit.
    proc = start(sample_root, out, wholebody_options,
                 env={"PHOENIX_KEYPOINTS_FAULTS": "write-delay=2"})
    wait_for(lambda: list((out / "parts").glob("chunk-*.parquet")) and temps(out), 120,
             "a committed part and a part being committed", proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    committed = {p.name: p.stat().st_mtime_ns for p in (out / "parts").glob("chunk-*.parquet")}
    assert 1 <= len(committed) < 5
    assert temps(out), "SIGKILL mid-commit leaves a stale temp part behind"
    again = resume(out)
    assert again.returncode == 0, again.stderr
    for name, mtime in committed.items():
        assert (out / "parts" / name).stat().st_mtime_ns == mtime, f"{name} was redone"
    assert not temps(out)
    assert_same_output(out, clean_wholebody_run)


@pytest.mark.parametrize(("sig", "target", "code"), [
    (signal.SIGINT, "coordinator", 130),  # (Ctrl-C to the whole group: test_end_to_end)
    (signal.SIGTERM, "group", 143),  # scancel / a batch system stopping the job
    (signal.SIGTERM, "coordinator", 143),  # `kill PID`
])
def test_stop_signal_clean_exit(sig: int, target: str, code: int, clean_wholebody_run: Path,
                                sample_root: Path, tmp_path: Path, wholebody_options: list[str]):
    """SIGINT/SIGTERM: workers stop at a frame boundary, no temp file, exit 130/143, resumable.
    Frames paced so that the 2-second heartbeat sees both workers inside a video well before the
    run could end (at 0.1 s a frame a loaded machine finished first)."""
    out = tmp_path / "run"
    proc = start(sample_root, out, wholebody_options,
                 env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.4"})
    wait_for(lambda: len(busy_workers(out)) == 2, 90, "both workers inside a video", proc)
    (os.killpg if target == "group" else os.kill)(proc.pid, sig)
    err = finished(proc, timeout=60)
    assert proc.returncode == code, err
    assert "run the same command to resume" in err
    workers = [w["pid"] for w in progress(out)["workers"]]
    assert workers and not [p for p in workers if alive(p)], "the coordinator left a worker"
    # multiprocessing's resource tracker leaves by itself once the coordinator has gone
    wait_for(lambda: not session_members(proc.pid), 10, "no process of the run left")
    assert not temps(out)
    assert not (out / "keypoints.parquet").exists()
    if (sig, target) == (signal.SIGTERM, "coordinator"):
        again = resume(out)
        assert again.returncode == 0, again.stderr
        assert_same_output(out, clean_wholebody_run)


def test_stop_while_committing_a_part(clean_wholebody_run: Path, sample_root: Path, tmp_path: Path,
                                      wholebody_options: list[str]):
    """SIGTERM lands while a worker holds a written temp part not yet renamed: it removes the temp
    and stops; that chunk is not committed; resumable."""
    out = tmp_path / "run"
    proc = start(sample_root, out, wholebody_options,
                 env={"PHOENIX_KEYPOINTS_FAULTS": "write-delay=5"})
    temp = wait_for(lambda: temps(out), 120, "a part being committed", proc)[0]
    chunk = int(temp.name.split(".")[1].removeprefix("chunk-"))
    os.killpg(proc.pid, signal.SIGTERM)
    err = finished(proc, timeout=60)
    assert proc.returncode == 143, err
    assert not temps(out)
    assert not (out / "parts" / f"chunk-{chunk:06d}.parquet").exists()
    again = resume(out)
    assert again.returncode == 0, again.stderr
    assert_same_output(out, clean_wholebody_run)


# --- damaged parts on disk -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def foreign_parts(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """chunk 0 (cameraman-1, 16 frames) as written by a run with other options and by a run over
    another dataset (the same frames in the PHOENIX-2014 layout): same rows, other fingerprint."""
    base = tmp_path_factory.mktemp("foreign")
    other_2014 = build_2014_layout(sample_root, base / "phoenix2014")
    out = {}
    for kind, dataset in (("options", sample_root), ("dataset", other_2014)):
        run_dir = base / kind
        proc = run_cli(["run", "--dataset", dataset, "--out", run_dir, "--videos", "cameraman-1",
                        "--chunk-frames", "20", "--workers-per-gpu", "1"])
        assert proc.returncode == 0, proc.stderr
        out[kind] = run_dir / "parts" / "chunk-000000.parquet"
    return out


def _truncate(parts: Path, foreign: dict[str, Path]) -> str:
    p = parts / "chunk-000002.parquet"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])  # power loss mid-write
    return "footer unreadable"


def _bit_flip(parts: Path, foreign: dict[str, Path]) -> str:
    p = parts / "chunk-000003.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 3] ^= 0x10  # inside a data page: the footer still reads fine
    p.write_bytes(bytes(data))
    return "unreadable while merging"


def _stale_temp(parts: Path, foreign: dict[str, Path]) -> str:
    p = parts / "chunk-000002.parquet"
    (parts / ".chunk-000002.4242.tmp").write_bytes(p.read_bytes()[:5000])  # killed mid-write
    p.unlink()
    (parts / ".chunk-000004.4243.tmp").write_bytes(b"PAR1")
    return ""


def _other_options(parts: Path, foreign: dict[str, Path]) -> str:
    shutil.copyfile(foreign["options"], parts / "chunk-000000.parquet")
    return "written by another run"


def _other_dataset(parts: Path, foreign: dict[str, Path]) -> str:
    shutil.copyfile(foreign["dataset"], parts / "chunk-000000.parquet")
    return "written by another run"


@pytest.mark.parametrize("damage", [_truncate, _bit_flip, _stale_temp, _other_options,
                                    _other_dataset], ids=lambda f: f.__name__.strip("_"))
def test_damaged_part_redone_never_merged(damage, clean_run: Path, foreign_parts: dict[str, Path],
                                          tmp_path: Path):
    out = tmp_path / "run"
    shutil.copytree(clean_run, out)
    (out / "keypoints.parquet").unlink()
    shutil.rmtree(out / "tensors")
    why = damage(out / "parts", foreign_parts)
    refused = None
    if why and why != "unreadable while merging":  # found by the footer check alone
        refused = run_cli(["merge", "--out", out])
        assert refused.returncode == 2, refused.stderr
        assert "1 chunk(s) not done" in refused.stderr and "run --out" in refused.stderr
        assert_no_traceback(refused)
    proc = resume(out)
    assert proc.returncode == 0, proc.stderr
    if why:
        rejected = list((out / "parts" / "rejected").glob("*.why"))
        assert len(rejected) == 1 and why in rejected[0].read_text()
        told = refused.stderr if why != "unreadable while merging" else proc.stderr
        assert why in told or "is corrupt" in told, told
    assert not temps(out)
    assert_same_output(out, clean_run)


def test_corrupt_part_found_beside_the_run_is_redone_not_refused(clean_run: Path,
                                                                 foreign_parts: dict[str, Path],
                                                                 tmp_path: Path):
    """The merge beside the run may reach a corrupt part before the final scan of parts/: what it
    moved aside must come back as "redo that chunk", not as "a chunk is missing"."""
    out = tmp_path / "run"
    shutil.copytree(clean_run, out)
    _bit_flip(out / "parts", foreign_parts)
    rd = RunDir(out)
    plan = rd.load_plan()
    chunks = sorted({c for c in plan["chunk"].to_pylist() if c >= 0})
    merging = BackgroundMerge(rd, plan, chunks, ready=lambda c: True).start()
    wait_for(lambda: merging.error is not None, 30, "the merge beside the run finds chunk 3 corrupt")
    assert not (out / "parts" / "chunk-000003.parquet").exists()
    with pytest.raises(CorruptPart) as raised:
        finish(rd, merging=merging)
    assert raised.value.chunk == 3
    assert not temps(out)


# --- the disk refuses a write --------------------------------------------------------------------
def test_enospc_while_writing_part(clean_wholebody_run: Path, sample_root: Path, tmp_path: Path,
                                   wholebody_options: list[str]):
    """Disk full while a part is written (fault hook): not committed, clear message, resumable."""
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, *RUN_ARGS, *wholebody_options],
                   env={"PHOENIX_KEYPOINTS_FAULTS": "enospc-chunk=2"})
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert "chunk 2: cannot write" in proc.stderr and "No space left on device" in proc.stderr
    assert "run the same command again to resume" in proc.stderr
    assert not (out / "parts" / "chunk-000002.parquet").exists()
    assert not temps(out)
    partial = run_cli(["merge", "--out", out, "--allow-partial"])  # what there is, and what not
    assert partial.returncode == 0, partial.stderr
    merged = json.loads((out / "run.json").read_text())["merge"]
    assert merged["partial"] is True and 2 in merged["missing_chunks"]
    assert "hopper-2" in merged["missing_videos"] and merged["failed_videos"] == {}
    assert "hopper-2" not in set(read_keypoints(out)["video"].to_pylist())
    again = resume(out)
    assert again.returncode == 0, again.stderr
    assert_same_output(out, clean_wholebody_run)


def test_file_too_large_while_writing_parts(clean_run: Path, sample_root: Path, tmp_path: Path):
    """The kernel refuses part writes past 100 kB: only the small part commits, the rest is
    refused with a message; with the limit lifted the run resumes to the same output."""
    out = tmp_path / "run"
    proc = run_with_file_size_limit(["run", "--dataset", sample_root, "--out", out, *RUN_ARGS],
                                    100_000)
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert "cannot write" in proc.stderr and "File too large" in proc.stderr
    assert not temps(out)
    for p in (out / "parts").glob("chunk-*.parquet"):  # whatever committed is whole
        assert p.stat().st_size < 100_000
        read_part_info(p)
    again = resume(out)
    assert again.returncode == 0, again.stderr
    assert_same_output(out, clean_run)


def test_file_too_large_while_merging(clean_run: Path, tmp_path: Path):
    """The merged file cannot be written (parts fit, keypoints.parquet does not): a message, no
    half keypoints.parquet, and `merge` once the space is back gives the same output."""
    out = tmp_path / "run"
    shutil.copytree(clean_run, out)
    (out / "keypoints.parquet").unlink()
    shutil.rmtree(out / "tensors")
    # A limit between the largest part (must still be readable/writable) and the merged file,
    # taken from the reference run so it follows the Parquet encoding's sizes.
    biggest_part = max(p.stat().st_size for p in (clean_run / "parts").glob("chunk-*.parquet"))
    merged = (clean_run / "keypoints.parquet").stat().st_size
    assert biggest_part < merged
    proc = run_with_file_size_limit(["run", "--out", out], (biggest_part + merged) // 2)
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert "cannot write the merged outputs" in proc.stderr and "File too large" in proc.stderr
    assert not (out / "keypoints.parquet").exists()
    assert not list(out.glob(".*.tmp"))
    again = run_cli(["merge", "--out", out])
    assert_no_traceback(again)
    assert again.returncode == 0, again.stderr
    assert_same_output(out, clean_run)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions (CI runs as root): "
                    "the ENOSPC hook and the RLIMIT_FSIZE tests cover a refused write instead")
def test_unwritable_parts_folder(clean_wholebody_run: Path, sample_root: Path, tmp_path: Path,
                                 wholebody_options: list[str]):
    out = tmp_path / "run"
    (out / "parts").mkdir(parents=True)
    (out / "parts").chmod(0o555)
    try:
        proc = run_cli(["run", "--dataset", sample_root, "--out", out, *RUN_ARGS,
                        *wholebody_options])
        assert_no_traceback(proc)
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, proc.stderr
    finally:
        (out / "parts").chmod(0o755)
    again = resume(out)
    assert again.returncode == 0, again.stderr
    assert_same_output(out, clean_wholebody_run)


# --- a video that kills its worker every time ----------------------------------------------------
def test_video_that_always_crashes(clean_wholebody_run: Path, sample_root: Path, tmp_path: Path,
                                   wholebody_options: list[str]):
    """kill-video: the worker SIGKILLs itself on hopper-2 every time (as a frame crashing
    MediaPipe would). Retried 3 times, then only hopper-2 is failed; its chunk-mate astronaut-1
    and the other chunks finish; run exits 1 naming it; merge refuses unless --allow-partial;
    --retry-failed after the "fix" gives the clean output."""
    out = tmp_path / "run"
    args = ["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "40",
            "--workers-per-gpu", "2", *wholebody_options]
    proc = run_cli(args, env={"PHOENIX_KEYPOINTS_FAULTS": "kill-video=hopper-2"})
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert "video hopper-2; attempt 3/3" in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 video(s) failed") and "hopper-2" in last
    assert "--retry-failed" in last and "--allow-partial" in last
    plan = pq.read_table(out / "plan.parquet").to_pylist()
    chunk = next(r["chunk"] for r in plan if r["video"] == "hopper-2")
    mates = [r["video"] for r in plan if r["chunk"] == chunk and r["video"] != "hopper-2"]
    assert mates, "the test needs hopper-2 to share its chunk"
    info, _ = read_part_info(out / "parts" / f"chunk-{chunk:06d}.parquet")
    assert list(info.failed) == ["hopper-2"]

    refused = run_cli(["merge", "--out", out])
    assert_no_traceback(refused)
    assert refused.returncode == 2 and "1 video(s) failed (hopper-2)" in refused.stderr
    assert "--retry-failed" in refused.stderr and "--allow-partial" in refused.stderr
    assert not (out / "keypoints.parquet").exists()

    partial = run_cli(["merge", "--out", out, "--allow-partial"])
    assert_no_traceback(partial)
    assert partial.returncode == 0, partial.stderr
    merged = json.loads((out / "run.json").read_text())["merge"]
    assert merged["partial"] is True and list(merged["failed_videos"]) == ["hopper-2"]
    assert merged["missing_chunks"] == [] and merged["missing_videos"] == []
    got, ref = read_keypoints(out), read_keypoints(clean_wholebody_run)
    assert "hopper-2" not in set(got["video"].to_pylist())
    assert got.num_rows == ref.num_rows - 16
    for video in set(ref["video"].to_pylist()) - {"hopper-2"}:
        assert same_keypoints(got, ref, video, WHOLEBODY_COLUMNS), video

    again = run_cli(["run", "--out", out])  # without --retry-failed the failure stands
    assert again.returncode == 1 and "hopper-2" in again.stderr

    retried = run_cli(["run", "--out", out, "--retry-failed"])
    assert_no_traceback(retried)
    assert retried.returncode == 0, retried.stderr
    assert read_keypoints(out).equals(read_keypoints(clean_wholebody_run))
    assert json.loads((out / "run.json").read_text())["merge"]["partial"] is False


def test_soak_small(clean_run: Path, tmp_path: Path):
    """A tiny scripts/soak.py: random SIGKILLs of workers and of the whole job, resumed each time;
    the result equals the undisturbed run (the README reports the 1,000+ frame run).
    The frame delay keeps each resumed run longer than the random wait before a kill (up to 3 s):
    at 0.05 s the run could finish first on a quiet machine, and the test saw one kill, not two."""
    proc = subprocess.run(
        [sys.executable, REPO / "scripts" / "soak.py", "--reference", clean_run, "--kills", "2",
         "--seed", "3", "--max-wait", "3", "--frame-delay", "0.1", "--out", tmp_path],
        env=cli_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "soak.json").read_text())
    assert result["kills"] == 2 and result["frames"] == 82
    assert result["frames_lost"] == result["frames_duplicated"] == result["rows_differing"] == 0
    assert result["byte_identical"] and result["temp_files_left"] == 0
