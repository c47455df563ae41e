"""SLURM arrays on one machine: a fake sbatch runs the array tasks as local processes.

The end-to-end test submits 4 shards, SIGKILLs shard 2's task (its whole process group) mid-chunk,
checks that `status` names `--array=2`, that `slurm --submit` again submits only index 2, and that
the merged output equals the single-node reference run.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
from conftest import assert_no_traceback, read_keypoints, run_cli

from jobs.rundir import RunError
from jobs.shards import array_expr, resolve_shard, shard_chunks, shard_state
from jobs.slurm import SlurmOptions, render_array, sbatch, worker_args

FAKE_SBATCH = Path(__file__).with_name("fake_sbatch.py")


# --- pure pieces ------------------------------------------------------------------------------
def test_array_expr_compresses_runs() -> None:
    assert array_expr([2]) == "2"
    assert array_expr([3, 0, 1, 2, 7]) == "0-3,7"
    assert array_expr([0, 2, 4, 5, 6, 9, 10]) == "0,2,4-6,9-10"
    assert array_expr(range(8), max_parallel=3) == "0-7%3"
    with pytest.raises(ValueError):
        array_expr([])


def test_shards_split_every_chunk_once() -> None:
    chunks = list(range(11))
    parts = [shard_chunks(chunks, 4, i) for i in range(4)]
    assert sorted(c for p in parts for c in p) == chunks
    assert parts[2] == [2, 6, 10]
    st = shard_state(chunks, [c for c in chunks if c not in (6, 3)], 4)
    assert st.complete == [0, 1] and st.missing == {2: [6], 3: [3]}
    assert shard_state([0, 1], [0, 1], 4).complete == [0, 1, 2, 3]  # shards owning nothing


def test_shard_index_from_slurm_env_and_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    assert resolve_shard(None, None) is None
    assert resolve_shard(4, 1) == (4, 1)
    with pytest.raises(RunError, match="--shard-index"):
        resolve_shard(4, None)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert resolve_shard(4, None) == (4, 3)
    monkeypatch.setenv("SLURM_ARRAY_COUNT", "1")  # never consulted: S comes from the plan
    with pytest.raises(RunError, match="outside 0..3"):
        resolve_shard(4, 4)
    with pytest.raises(RunError, match="needs --num-shards"):
        resolve_shard(None, 1)


def test_script_uses_the_allocation(tmp_path: Path) -> None:
    from jobs.rundir import RunDir

    so = SlurmOptions(max_parallel=2, time="02:00:00", cpus_per_task=8, gpus_per_task=2,
                      partition="gpu", account="lab", sbatch_args=["--qos=long"])
    text = render_array(RunDir(tmp_path / "run"), 16, [1, 2, 3, 9], so)
    for line in ("#SBATCH --array=1-3,9%2", "#SBATCH --cpus-per-task=8", "#SBATCH --gpus-per-task=2",
                 "#SBATCH --time=02:00:00", "#SBATCH --partition=gpu", "#SBATCH --account=lab",
                 "#SBATCH --qos=long"):
        assert line in text.splitlines()
    assert "--num-shards 16 --shard-index \"$SLURM_ARRAY_TASK_ID\"" in text
    assert worker_args(so) == ["--num-gpus", "2", "--workers-per-gpu", "4"]
    assert worker_args(SlurmOptions(cpus_per_task=8)) == []  # CPU-only: affinity gives 8 workers


def test_submit_without_sbatch_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RunError, match="sbatch is not on PATH"):
        sbatch(tmp_path / "x.sbatch")


# --- the command line -------------------------------------------------------------------------
@pytest.fixture
def fake_slurm(tmp_path: Path) -> dict[str, str]:
    """Env with the fake sbatch first on PATH and its state folder."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "sbatch"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_SBATCH} \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    state = tmp_path / "sbatch-state"
    state.mkdir()
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "FAKE_SBATCH_DIR": str(state)}


def _submissions(env: dict[str, str]) -> list[dict]:
    path = Path(env["FAKE_SBATCH_DIR"]) / "submissions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _job_end(env: dict[str, str], job: int, timeout: float = 240) -> dict:
    done = Path(env["FAKE_SBATCH_DIR"]) / "jobs" / f"{job}.done"
    _wait_for(done.exists, timeout, f"job {job}")
    return json.loads(done.read_text())


def _shard_in_chunk(out: Path, shard: int) -> bool:
    try:
        beat = json.loads((out / f"progress-shard-{shard}.json").read_text())
    except (OSError, ValueError):
        return False
    return any(w["chunk"] is not None and w["pid"] for w in beat["workers"])


def test_four_shards_one_killed_resubmitted_alone(sample_root: Path, clean_run: Path,
                                                  fake_slurm: dict[str, str],
                                                  tmp_path: Path) -> None:
    out = tmp_path / "run"
    slow = dict(fake_slurm, PHOENIX_KEYPOINTS_FAULTS="frame-delay=0.4")
    proc = run_cli(["slurm", "--dataset", sample_root, "--out", out, "--num-shards", "4",
                    "--chunk-frames", "20", "--cpus-per-task", "1", "--time", "0:10:00",
                    "--submit"], env=slow)
    assert proc.returncode == 0, proc.stderr
    first = _submissions(fake_slurm)
    assert [s["array"] for s in first] == ["0-3", None]
    array_job, merge_job = first[0]["job"], first[1]["job"]
    assert first[1]["dependency"] == f"afterok:{array_job}"
    assert json.loads((out / "run.json").read_text())["num_shards"] == 4  # planned before submitting

    # shard 2 dies mid-chunk, like a node lost: SIGKILL to its task's whole process group
    pid_file = Path(fake_slurm["FAKE_SBATCH_DIR"]) / "tasks" / f"{array_job}_2.pid"
    _wait_for(lambda: pid_file.exists() and _shard_in_chunk(out, 2), 120, "shard 2 in a chunk")
    os.killpg(int(pid_file.read_text()), signal.SIGKILL)
    end = _job_end(fake_slurm, array_job)
    assert end["rcs"] == {"0": 0, "1": 0, "2": -signal.SIGKILL, "3": 0}
    assert _job_end(fake_slurm, merge_job)["state"] == "DependencyNeverSatisfied"
    assert not (out / "keypoints.parquet").exists()

    status = run_cli(["status", "--out", out])
    assert status.returncode == 0, status.stderr
    assert "shards:   3/4 complete; missing 1: 2" in status.stdout
    assert "--array=2 " in status.stdout

    refused = run_cli(["merge", "--out", out])
    assert refused.returncode == 2
    assert "1 of 4 shard(s) not complete: 2" in refused.stderr
    assert_no_traceback(refused)

    # a different S is refused: the split is fixed when planned
    other = run_cli(["slurm", "--out", out, "--num-shards", "3"], env=fake_slurm)
    assert other.returncode == 2 and "num_shards (fixed at 4" in other.stderr

    again = run_cli(["slurm", "--out", out, "--num-shards", "4", "--submit"], env=fake_slurm)
    assert again.returncode == 0, again.stderr
    second = _submissions(fake_slurm)[len(first):]
    assert [s["array"] for s in second] == ["2", None]
    assert second[1]["dependency"] == f"afterok:{second[0]['job']}"
    assert _job_end(fake_slurm, second[0]["job"])["rcs"] == {"2": 0}
    assert _job_end(fake_slurm, second[1]["job"])["ok"]

    assert read_keypoints(out).equals(read_keypoints(clean_run))
    final = run_cli(["status", "--out", out])
    assert "shards:   4/4 complete" in final.stdout and "--array=" not in final.stdout
    done = run_cli(["slurm", "--out", out, "--num-shards", "4", "--submit"], env=fake_slurm)
    assert done.returncode == 0 and "complete and merged" in done.stdout
    assert len(_submissions(fake_slurm)) == 4  # nothing left to submit


def test_shard_refusals(sample_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    no_plan = run_cli(["run", "--out", out, "--num-shards", "2", "--shard-index", "0"])
    assert no_plan.returncode == 2 and "holds no plan yet" in no_plan.stderr
    plan = run_cli(["slurm", "--dataset", sample_root, "--out", out, "--num-shards", "2",
                    "--chunk-frames", "20"])
    assert plan.returncode == 0, plan.stderr
    assert "--array=0-1" in plan.stdout and "#SBATCH --array=0-1" in plan.stdout
    for args, msg in [
        (["--num-shards", "3", "--shard-index", "0"], "num_shards (fixed at 2"),
        (["--num-shards", "2", "--shard-index", "2"], "outside 0..1"),
        (["--num-shards", "2"], "needs --shard-index"),
        (["--num-shards", "2", "--shard-index", "0", "--fresh"], "--fresh cannot be used"),
    ]:
        proc = run_cli(["run", "--out", out, *args])
        assert proc.returncode == 2, (args, proc.stderr)
        assert msg in proc.stderr, (args, proc.stderr)
        assert_no_traceback(proc)
