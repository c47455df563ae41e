"""SLURM arrays on a real one-node cluster: slurmctld + slurmd + munge from scripts/slurm-cluster.sh.

Two end-to-end tests submit 4 shards with `slurm --submit`; a third runs 2 shards over the dataset
packed as a tar.gz, read through the one index planning made. In one, a task is `scancel`led inside a
chunk: the others take its chunk and the merging shard writes the outputs. In the other, the merging
task is SIGKILLed (a lost node): `status` names it and `--array=I`, `merge`
refuses, `slurm --submit` resubmits that index alone. Both end equal to the single-node reference
run. They skip only where no cluster can be started here (not root, no apt-get); see
docs/cluster-testing.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import (
    REPO,
    assert_no_traceback,
    assert_same_output,
    careful_env,
    copy_dataset,
    plant_library,
    read_keypoints,
    run_cli,
    session_members,
    temps,
    wait_for,
)

from phoenix_keypoints.jobs.cluster.slurm import SlurmOptions, render_array, sbatch, worker_args
from phoenix_keypoints.jobs.rundir.folder import RunError
from phoenix_keypoints.jobs.rundir.shards import array_expr, resolve_shard, shard_state

CLUSTER = REPO / "scripts" / "slurm-cluster.sh"
CLUSTER_DIR = Path(os.environ.get("PHOENIX_SLURM_DIR", "/tmp/phoenix-keypoints-slurm"))
ENDED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
         "BOOT_FAIL", "DEADLINE"}


# --- pure pieces ------------------------------------------------------------------------------
def test_array_expr_compresses_runs() -> None:
    assert array_expr([2]) == "2"
    assert array_expr([3, 0, 1, 2, 7]) == "0-3,7"
    assert array_expr([0, 2, 4, 5, 6, 9, 10]) == "0,2,4-6,9-10"
    assert array_expr(range(8), max_parallel=3) == "0-7%3"
    with pytest.raises(ValueError):
        array_expr([])


def test_shards_to_resubmit(tmp_path: Path) -> None:
    """Missing shards are those that did not end cleanly, and only while work is left."""
    claims = tmp_path / "claims"
    claims.mkdir()
    for i in (0, 1, 3):
        (claims / f"shard-{i}.done").write_text("done\n")
    st = shard_state(claims, work_left=True, num_shards=4)
    assert st.complete == [0, 1, 3] and st.missing == [2]
    assert shard_state(claims, work_left=False, num_shards=4).missing == []
    (claims / "shard-2.done").write_text("done\n")  # all ended cleanly, yet a part was rejected
    assert shard_state(claims, work_left=True, num_shards=4).missing == [0]


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
    from phoenix_keypoints.jobs.rundir.folder import RunDir

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


def test_scripts_ask_for_memory(tmp_path: Path) -> None:
    """Every sbatch script sets --mem (issue 34: clusters with a small default killed the jobs):
    a shard's from the measured per-worker peak x its workers with margin, or --mem as given."""
    from phoenix_keypoints.jobs.cluster.slurm import render_merge
    from phoenix_keypoints.jobs.rundir.folder import RunDir

    rd = RunDir(tmp_path / "run")
    assert "#SBATCH --mem=15G" in render_array(rd, 4, [0], SlurmOptions(cpus_per_task=16)).splitlines()
    assert "#SBATCH --mem=2G" in render_array(rd, 4, [0], SlurmOptions()).splitlines()
    assert "#SBATCH --mem=40G" in render_array(rd, 4, [0], SlurmOptions(mem="40G")).splitlines()
    assert "#SBATCH --mem=2G" in render_merge(rd, SlurmOptions()).splitlines()


def test_submit_without_sbatch_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RunError, match="sbatch is not on PATH"):
        sbatch(tmp_path / "x.sbatch")


# --- a real cluster ---------------------------------------------------------------------------
def _ctld_pid() -> str:
    try:
        return (CLUSTER_DIR / "run" / "slurmctld.pid").read_text().strip()
    except OSError:
        return ""


def _start_cluster() -> dict[str, str]:
    """`scripts/slurm-cluster.sh start`: what it exports; a skip where no cluster can be had."""
    proc = subprocess.run([str(CLUSTER), "start"], capture_output=True, text=True, timeout=900)
    if proc.returncode == 3:
        pytest.skip(f"no SLURM cluster here: {proc.stderr.strip()}")
    assert proc.returncode == 0, f"{CLUSTER} start failed (exit {proc.returncode}):\n{proc.stderr}"
    return dict(re.findall(r"^export (\w+)=(\S*)$", proc.stdout, re.M))


@pytest.fixture(scope="session")
def slurm_env() -> Iterator[dict[str, str]]:
    """SLURM_CONF of a running one-node cluster, started by scripts/slurm-cluster.sh if none runs.

    Each test session holds a shared lock on a lease file while it uses the cluster; at its end, the
    session that finds no other holder stops the cluster if a test session started it (one a person
    started stays up). So two sessions side by side do not stop the cluster under each other.
    """
    first = _start_cluster()  # before the lease: it skips where the folder may not even be ours
    marker = CLUSTER_DIR / "started-by-tests"
    with open(CLUSTER_DIR / "test-sessions.lock", "a") as lease:
        fcntl.flock(lease, fcntl.LOCK_SH)
        again = _start_cluster()  # under the lease: a session ending meanwhile may have stopped it
        if "1" in (first["PHOENIX_SLURM_STARTED"], again["PHOENIX_SLURM_STARTED"]):
            marker.write_text(_ctld_pid())
        yield {"SLURM_CONF": again["SLURM_CONF"]}
        try:
            fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another session still uses it; the last one out stops it
        if marker.is_file() and marker.read_text() == _ctld_pid():
            subprocess.run([str(CLUSTER), "stop"], check=True, timeout=180)
            marker.unlink()


def _slurm(env: dict[str, str], *args: str) -> str:
    """A SLURM client command's stdout ('' when it fails: a job not known yet or any more)."""
    proc = subprocess.run(args, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    return proc.stdout if proc.returncode == 0 else ""


def _jobs(env: dict[str, str], job: str) -> dict[str, dict[str, str]]:
    """`scontrol show job` fields of a job, or of each task of an array keyed by its index ("" for
    a plain job; pending tasks may still share one record, keyed like "2-3")."""
    out = {}
    for line in _slurm(env, "scontrol", "show", "job", "--oneliner", job).splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        out[fields.get("ArrayTaskId", "")] = fields
    return out


def _ended(env: dict[str, str], job: str) -> dict[str, dict[str, str]] | None:
    """The job's (or every array task's) final fields once all have ended, None before."""
    jobs = _jobs(env, job)
    return jobs if jobs and all(j["JobState"] in ENDED for j in jobs.values()) else None


def _states(jobs: dict[str, dict[str, str]]) -> dict[str, str]:
    return {index: fields["JobState"] for index, fields in jobs.items()}


def _submissions(out: Path) -> list[dict]:
    """What `slurm --submit` recorded it submitted, one line per call."""
    return [json.loads(line) for line in (out / "slurm" / "submissions.jsonl").read_text().splitlines()]


def _in_chunk(out: Path, merger: bool) -> tuple[int, dict] | None:
    """(shard, heartbeat) of a shard inside a chunk that is (or is not) the array's merger."""
    try:
        merging = int((out / "claims" / "merger").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    for path in sorted(out.glob("progress-shard-*.json")):
        shard = int(path.stem.rsplit("-", 1)[1])
        try:
            beat = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        busy = any(w["chunk"] is not None and w["pid"] for w in beat["workers"])
        if busy and beat.get("running") and (shard == merging) == merger:
            return shard, beat
    return None


def _proc_status(pid: int) -> tuple[int, int]:
    """(session id, number of CPUs the process may run on) of a live process."""
    sid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    status = Path(f"/proc/{pid}/status").read_text()
    allowed = re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M).group(1)
    ranges = [r.partition("-") for r in allowed.split(",")]
    return sid, sum(int(b or a) - int(a) + 1 for a, _, b in ranges)


def _submit_array(env: dict[str, str], sample_root: Path, out: Path) -> tuple[str, str]:
    """4 shards of the embedded sample, frames slowed so that a test can act mid-chunk."""
    slow = dict(env, PHOENIX_KEYPOINTS_FAULTS="frame-delay=0.4")  # sbatch exports it to the tasks
    proc = run_cli(["slurm", "--dataset", sample_root, "--out", out, "--num-shards", "4",
                    "--chunk-frames", "20", "--cpus-per-task", "1", "--time", "0:10:00",
                    "--submit"], env=slow)
    assert proc.returncode == 0, proc.stderr
    [first] = _submissions(out)
    assert first["array"] == "0-3"
    array_job, merge_job = first["array_job"], first["merge_job"]
    assert f"afterok:{array_job}_*" in _jobs(env, merge_job)[""]["Dependency"]
    return array_job, merge_job


def _task_gone(env: dict[str, str], out: Path, array_job: str, shard: int, sid: int) -> str:
    """Once every task has ended: the task's log, checked for what a stopped shard leaves."""
    wait_for(lambda: not session_members(sid), 30, f"no process of task {shard} left", interval=0.5)
    assert not temps(out)
    return (out / "logs" / f"slurm-{array_job}_{shard}.out").read_text()


@pytest.mark.slow
def test_real_scancel_of_a_running_task_others_take_its_work(slurm_env: dict[str, str],
                                                              sample_root: Path, clean_run: Path,
                                                              tmp_path: Path) -> None:
    """`scancel` of a task mid-chunk: it stops cleanly and gives its chunk back; the other shards
    do it, the merging shard writes the outputs; nothing is left to resubmit."""
    out = tmp_path / "run"
    array_job, merge_job = _submit_array(slurm_env, sample_root, out)
    shard, beat = wait_for(lambda: _in_chunk(out, merger=False), 240,
                           "a shard other than the merger inside a chunk", interval=0.2)
    sid, cpus = _proc_status(beat["pid"])
    assert len(beat["workers"]) == cpus  # one worker per CPU SLURM gave the task
    assert _jobs(slurm_env, array_job)[str(shard)]["JobState"] == "RUNNING"
    _slurm(slurm_env, "scancel", f"{array_job}_{shard}")

    ended = wait_for(lambda: _ended(slurm_env, array_job), 300, "every array task to end", interval=1)
    assert _states(ended) == {str(i): "CANCELLED" if i == shard else "COMPLETED" for i in range(4)}
    log = _task_gone(slurm_env, out, array_job, shard, sid)
    assert "CANCELLED" in log and "stopped" in log and "Traceback" not in log, log  # SIGTERM handled
    merge = wait_for(lambda: _ended(slurm_env, merge_job), 120, "the merge job to leave", interval=1)
    assert merge[""]["JobState"] == "CANCELLED", merge  # --kill-on-invalid-dep: a task failed
    assert_same_output(out, clean_run)  # merged inside the array by the merging shard
    status = run_cli(["status", "--out", out])
    assert "shards:   4/4 complete" in status.stdout and "merged:   82 rows" in status.stdout
    assert "--array=" not in status.stdout, status.stdout
    done = run_cli(["slurm", "--out", out, "--num-shards", "4", "--submit"], env=slurm_env)
    assert done.returncode == 0 and "complete and merged" in done.stdout
    assert len(_submissions(out)) == 1  # nothing left to submit


@pytest.mark.slow
def test_real_dead_task_resubmitted_alone(slurm_env: dict[str, str], sample_root: Path,
                                          clean_run: Path, tmp_path: Path) -> None:
    """The merging task's processes SIGKILLed mid-chunk (a node lost: nothing runs its clean-up): its
    claims stay until their lease ends, so the others finish without them; status names the task,
    merge refuses, `slurm --submit` resubmits that index alone, which takes over its own claims and
    merges. (A `scancel`, even with --signal=KILL, lets the task stop cleanly: the other test.)"""
    out = tmp_path / "run"
    array_job, merge_job = _submit_array(slurm_env, sample_root, out)
    shard, beat = wait_for(lambda: _in_chunk(out, merger=True), 240,
                           "the merging shard inside a chunk", interval=0.2)
    sid, _ = _proc_status(beat["pid"])
    os.killpg(os.getpgid(beat["pid"]), signal.SIGKILL)

    ended = wait_for(lambda: _ended(slurm_env, array_job), 300, "every array task to end", interval=1)
    states = _states(ended)
    assert states.pop(str(shard)) != "COMPLETED" and set(states.values()) == {"COMPLETED"}, ended
    _task_gone(slurm_env, out, array_job, shard, sid)
    merge = wait_for(lambda: _ended(slurm_env, merge_job), 120, "the merge job to leave", interval=1)
    assert merge[""]["JobState"] == "CANCELLED", merge
    assert not (out / "keypoints.parquet").exists()

    status = run_cli(["status", "--out", out])
    assert status.returncode == 0, status.stderr
    assert f"shards:   3/4 complete; missing 1: {shard}" in status.stdout, status.stdout
    assert f"--array={shard} " in status.stdout, status.stdout
    refused = run_cli(["merge", "--out", out])
    assert refused.returncode == 2, refused.stderr
    assert f"1 of 4 shard(s) not complete: {shard}" in refused.stderr
    assert_no_traceback(refused)
    other = run_cli(["slurm", "--out", out, "--num-shards", "3"], env=slurm_env)
    assert other.returncode == 2 and "num_shards (fixed at 4" in other.stderr  # S is fixed

    again = run_cli(["slurm", "--out", out, "--num-shards", "4", "--submit"], env=slurm_env)
    assert again.returncode == 0, again.stderr
    [second] = _submissions(out)[1:]
    assert second["array"] == str(shard)
    tasks = wait_for(lambda: _ended(slurm_env, second["array_job"]), 300, "the task again", interval=1)
    assert _states(tasks) == {str(shard): "COMPLETED"}
    merged = wait_for(lambda: _ended(slurm_env, second["merge_job"]), 300, "the merge job", interval=1)
    assert merged[""]["JobState"] == "COMPLETED" and merged[""]["ExitCode"] == "0:0", merged
    assert_same_output(out, clean_run)
    final = run_cli(["status", "--out", out])
    assert "shards:   4/4 complete" in final.stdout and "--array=" not in final.stdout


@pytest.mark.slow
def test_real_array_reads_an_archive_through_one_index(slurm_env: dict[str, str], sample_root: Path,
                                                       clean_run: Path, tmp_path: Path) -> None:
    """The dataset as a tar.gz with the corpus two folders down, as the release packs it: `slurm`
    indexes it once at planning (the login node); the tasks read their frames through that index
    without indexing again, and the merged keypoints are the folder run's (only image and mtime
    columns differ). Typed relative, with a run folder named with a blank and `#`: the scripts name
    it absolute (sbatch runs from anywhere), the logs land in it, and the same command again (the
    documented resubmission) is accepted."""
    tgz = tmp_path / "sample.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(sample_root, arcname="release/PHOENIX-2014-T")
    out = tmp_path / "run #1 a"
    command = ["slurm", "--dataset", tgz.name, "--out", out.name, "--num-shards", "2",
               "--chunk-frames", "20", "--cpus-per-task", "1", "--time", "0:10:00", "--submit"]
    proc = run_cli(command, env=slurm_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    index = {p.name: p.stat().st_mtime_ns for p in (out / "archive").iterdir()}
    assert "archive.json" in index and "gzip.index" in index
    [sub] = _submissions(out)
    tasks = wait_for(lambda: _ended(slurm_env, sub["array_job"]), 300, "both tasks", interval=1)
    assert set(_states(tasks).values()) == {"COMPLETED"}, tasks
    merged = wait_for(lambda: _ended(slurm_env, sub["merge_job"]), 120, "the merge job", interval=1)
    assert merged[""]["ExitCode"] == "0:0", merged
    assert {p.name: p.stat().st_mtime_ns for p in (out / "archive").iterdir()} == index
    got, ref = pq.read_table(out / "keypoints.parquet"), pq.read_table(clean_run / "keypoints.parquet")
    cols = ["split", "video", "frame", "status", "pose", "face", "left_hand", "right_hand",
            "file_size", "file_sha256"]
    assert got.num_rows == ref.num_rows > 0 and got.select(cols).equals(ref.select(cols))
    assert {im.rpartition("#")[2] for im in got["image"].to_pylist()} == {f"archive={tgz.name}"}
    assert len(list((out / "logs").glob("slurm-*.out"))) == 3  # two tasks and the merge
    again = run_cli(command, env=slurm_env, cwd=tmp_path)
    assert again.returncode == 0 and "complete and merged" in again.stdout, again.stderr


@pytest.mark.slow
def test_real_tasks_load_nothing_from_the_folder_sbatch_ran_in(slurm_env: dict[str, str],
                                                               sample_root: Path,
                                                               wholebody_options: list[str],
                                                               tmp_path: Path) -> None:
    """`cd corpus && phoenix-keypoints slurm --dataset . --submit` with a library planted in the
    corpus (issue 37): planning imports cv2, which leaves an empty entry in LD_LIBRARY_PATH, and
    sbatch exports the environment and runs a script where it was called. On 2e4d814 the task's
    interpreter and its workers loaded the corpus's library; now the tasks start in the run folder
    with a clean environment, and the run completes."""
    corpus = copy_dataset(sample_root, tmp_path / "corpus", writable=True)
    marker = tmp_path / "MARKER"
    plant_library(corpus, marker)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "phoenix_keypoints", "slurm", "--dataset", ".", "--out",
                           str(out), "--num-shards", "2", "--chunk-frames", "20", "--cpus-per-task",
                           "1", "--time", "0:10:00", "--submit", *wholebody_options],
                          env=careful_env(slurm_env), cwd=corpus, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    [sub] = _submissions(out)
    tasks = wait_for(lambda: _ended(slurm_env, sub["array_job"]), 300, "both tasks", interval=1)
    assert set(_states(tasks).values()) == {"COMPLETED"}, tasks
    merged = wait_for(lambda: _ended(slurm_env, sub["merge_job"]), 120, "the merge job", interval=1)
    assert merged[""]["ExitCode"] == "0:0", merged
    assert not marker.exists(), marker.read_text()
    assert read_keypoints(out).num_rows == 82


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


def test_slurm_workers_and_a_wholebody_plan(sample_root: Path, tmp_path: Path) -> None:
    """`slurm --workers N` (was "unrecognized arguments") asks for N CPUs a shard, as
    --cpus-per-task N; a whole-body plan's shards run from run.json alone (the scripts name no
    model), merge, and `status` names the estimator and its model files."""
    from tiny_onnx import tiny_models

    models = tiny_models(tmp_path / "models")
    out = tmp_path / "run"
    plan = run_cli(["slurm", "--dataset", sample_root, "--out", out, "--num-shards", "2",
                    "--chunk-frames", "20", "--workers", "4", "--estimator", "wholebody",
                    "--detector", models["detector"], "--pose-model", models["pose"]])
    assert plan.returncode == 0, plan.stderr
    assert "#SBATCH --cpus-per-task=4" in plan.stdout and "#SBATCH --mem=5G" in plan.stdout
    both = run_cli(["slurm", "--out", out, "--num-shards", "2", "--workers", "4", "--cpus-per-task",
                    "2"])
    assert both.returncode == 2 and "give one of them" in both.stderr, both.stderr
    assert_no_traceback(both)
    for shard in ("0", "1"):
        proc = run_cli(["run", "--out", out, "--num-shards", "2", "--shard-index", shard,
                        "--workers", "1"])
        assert proc.returncode == 0, proc.stderr
    assert run_cli(["merge", "--out", out]).returncode == 0
    status = run_cli(["status", "--out", out]).stdout
    assert ("estimator: wholebody (--detector tiny-yolox-end2end.onnx, --pose-model "
            "tiny-rtmpose-simcc.onnx)") in status, status
    assert "shards:   2/2 complete" in status and "merged:" in status, status
    assert pq.read_schema(out / "keypoints.parquet").names[-2:] == ["wholebody", "persons"]
