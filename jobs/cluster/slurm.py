"""`slurm`: plan once, then an sbatch array over the shards not yet complete and a merge job after it.

SLURM is the scheduler; this only writes its scripts (and, with --submit, calls sbatch). Planning
happens here, on the login node, before any task starts, so the array tasks only load the plan and
never race to make it. The shards share the chunks through claims (jobs.cluster.claims) and the first to
start merges as they go. Completion is read from the run folder (every chunk has a trusted part; a
shard that ended cleanly left claims/shard-I.done), so running the same command after a failure
submits only the shards that did not finish (or only the merge), and the merge job waits for the
array with --dependency=afterok.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from phoenix_keypoints.extract.keypoints.environ import FORCED, clean_environment
from phoenix_keypoints.extract.keypoints.versions import differences, named, pip_hint
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.run.done import scan_parts
from phoenix_keypoints.jobs.run.options import RunOptions
from phoenix_keypoints.jobs.run.prepare import FROZEN, load_or_plan
from phoenix_keypoints.jobs.run.todo import binding, versions_here
from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError
from phoenix_keypoints.jobs.rundir.locks import run_folder
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo
from phoenix_keypoints.jobs.rundir.shards import array_expr, live_shards, shard_state
from phoenix_keypoints.jobs.schedule.devices import worker_slots


@dataclass
class SlurmOptions:
    """What the sbatch scripts ask of the cluster (None: the cluster's default)."""

    max_parallel: int | None = None
    time: str | None = None
    cpus_per_task: int | None = None
    gpus_per_task: int | None = None
    partition: str | None = None
    account: str | None = None
    sbatch_args: list[str] = field(default_factory=list)
    mem: str | None = None  # sbatch --mem of a shard; None: shard_mem()
    # --batch-size and --device of a family that batches, passed to each shard's run
    batch_size: int | None = None
    device: str | None = None
    model_deadline: float | None = None  # --model-deadline and --model-memory, passed on too
    model_memory: int | None = None


# Memory, from docs/performance.md: a worker's RSS stays in a 467-561 MiB band over 10,000 frames
# (scripts/bench/worker_rss.py); the merge of the whole release peaks at 490 MiB, `report` at 499.
WORKER_PEAK_MIB = 561
MARGIN = 1.5  # other frame sizes, refined faces, a cluster's own accounting
COORDINATOR_MIB = 1024  # the coordinator, and the merge the first shard runs beside its workers
MERGE_MEM = "2G"


def shard_mem(so: SlurmOptions) -> str:
    """A shard's --mem: the measured per-worker peak x its workers (one per CPU), with margin, and
    room for the coordinator and the merge. Clusters whose default is small kill a job without it."""
    if so.mem:
        return so.mem
    workers = so.cpus_per_task or 1  # sbatch gives one CPU unless asked
    mib = WORKER_PEAK_MIB * workers * MARGIN + COORDINATOR_MIB
    return f"{-(-int(mib) // 1024)}G"


# What a task's interpreter starts with, whoever submits the script (sbatch exports the submitting
# shell's environment): onnxruntime's telemetry off and no import from the current folder
# (extract.keypoints.environ). --chdir makes the current folder the run folder, the tool's own, so
# an empty search-path entry in that shell finds nothing planted; the task cleans the rest for its
# workers itself (jobs.cli.main, and the local backend's spawning()).
_ENVIRONMENT = "export " + " ".join(f"{k}={v}" for k, v in sorted(FORCED.items()))


def _python() -> str:
    """The interpreter running now: the tasks use the same environment (on the shared filesystem)."""
    return shlex.quote(sys.executable)


def _common(rd: RunDir, so: SlurmOptions) -> list[str]:
    lines = []
    if so.time:
        lines.append(f"--time={so.time}")
    if so.partition:
        lines.append(f"--partition={so.partition}")
    if so.account:
        lines.append(f"--account={so.account}")
    for arg in so.sbatch_args:
        if "\n" in arg or not arg.startswith("-"):
            raise RunError(f"--sbatch-arg {arg!r}: give one sbatch option, e.g. --sbatch-arg=--qos=long")
    return lines + list(so.sbatch_args)


def worker_args(so: SlurmOptions) -> list[str]:
    """How a shard's `run` uses its allocation: C CPUs, G GPUs -> G GPUs x C/G workers each.

    Without GPUs the run already starts one worker per CPU the allocation lets it use (affinity).
    A run's --batch-size, --device, --model-deadline and --model-memory are passed on as given.
    """
    args = [*(["--batch-size", str(so.batch_size)] if so.batch_size else []),
            *(["--device", so.device] if so.device else []),
            *(["--model-deadline", f"{so.model_deadline:g}"] if so.model_deadline else []),
            *(["--model-memory", str(so.model_memory)] if so.model_memory else [])]
    if not so.gpus_per_task:
        return args
    args += ["--num-gpus", str(so.gpus_per_task)]
    if so.cpus_per_task:
        args += ["--workers-per-gpu", str(max(1, so.cpus_per_task // so.gpus_per_task))]
    return args


def _absolute(rd: RunDir) -> Path:
    """The run folder as the scripts name it: absolute, so sbatch may run them from anywhere."""
    return Path(os.path.abspath(rd.path))


def _directive_path(path: Path) -> str:
    """A path in an #SBATCH line: sbatch splits those at blanks unless the value is quoted."""
    return f'"{path}"' if any(c.isspace() for c in str(path)) else str(path)


def render_array(rd: RunDir, num_shards: int, shards: list[int], so: SlurmOptions) -> str:
    """The array script: one task per shard index, each a `run --num-shards S --shard-index I`."""
    path = _absolute(rd)
    out = shlex.quote(str(path))
    directives = [
        "--job-name=phoenix-keypoints",
        f"--array={array_expr(shards, so.max_parallel)}",
        f"--output={_directive_path(path / 'logs' / 'slurm-%A_%a.out')}",
        f"--chdir={_directive_path(path)}",
        "--ntasks=1",
    ]
    if so.cpus_per_task:
        directives.append(f"--cpus-per-task={so.cpus_per_task}")
    directives.append(f"--mem={shard_mem(so)}")
    if so.gpus_per_task:
        directives.append(f"--gpus-per-task={so.gpus_per_task}")
    directives += _common(rd, so)
    cmd = [_python(), "-m", "phoenix_keypoints", "run", "--out", out, "--num-shards", str(num_shards),
           "--shard-index", '"$SLURM_ARRAY_TASK_ID"', *worker_args(so)]
    return "\n".join([
        "#!/bin/bash",
        f"# phoenix-keypoints: shards {array_expr(shards)} of {num_shards} for {path}.",
        "# Written by `phoenix-keypoints slurm`; run that again to resubmit what is still missing.",
        *(f"#SBATCH {d}" for d in directives),
        "set -euo pipefail",
        _ENVIRONMENT,
        "exec " + " ".join(cmd),
        "",
    ])


def render_merge(rd: RunDir, so: SlurmOptions) -> str:
    """The merge job: one process, after the array; it refuses (and names shards) if any is missing."""
    path = _absolute(rd)
    directives = [
        "--job-name=phoenix-keypoints-merge",
        f"--output={_directive_path(path / 'logs' / 'slurm-merge-%j.out')}",
        f"--chdir={_directive_path(path)}",
        "--ntasks=1",
        "--kill-on-invalid-dep=yes",  # a failed shard: leave the queue instead of pending forever
        f"--mem={MERGE_MEM}",
        *_common(rd, so),
    ]
    return "\n".join([
        "#!/bin/bash",
        f"# phoenix-keypoints: merge the parts of {path} once every shard is complete.",
        *(f"#SBATCH {d}" for d in directives),
        "set -euo pipefail",
        _ENVIRONMENT,
        f"exec {_python()} -m phoenix_keypoints merge --out {shlex.quote(str(path))}",
        "",
    ])


def sbatch(script: Path, dependency: str | None = None) -> str:
    """Submit a script; returns the job id (sbatch --parsable prints `id` or `id;cluster`)."""
    env = clean_environment()  # exported to the tasks: clean, whatever a library did to ours
    exe = shutil.which("sbatch", path=env.get("PATH", os.defpath))
    if exe is None:
        raise RunError("sbatch is not on PATH: run this on a SLURM login node, or leave out "
                       "--submit to get the scripts and the command to submit them.")
    cmd = [exe, "--parsable"] + ([f"--dependency={dependency}"] if dependency else []) + [str(script)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.SubprocessError) as e:
        raise RunError(f"sbatch {script} failed to run ({e}).") from None
    job = res.stdout.strip().split(";")[0]
    if res.returncode != 0 or not job:
        raise RunError(f"sbatch {script} failed (exit status {res.returncode}): "
                       f"{(res.stderr or res.stdout).strip()[:500]}")
    return job


def _show(array_script: Path | None, merge_script: Path) -> None:
    """Without --submit: the scripts and the one line that submits both."""
    if array_script is not None:
        messages.result(f"# {array_script}\n{array_script.read_text()}")
    messages.result(f"# {merge_script}\n{merge_script.read_text()}")
    messages.result("# submit both (or run this command again with --submit):")
    q_merge = shlex.quote(str(merge_script))
    if array_script is not None:
        messages.result(f"jid=$(sbatch --parsable {shlex.quote(str(array_script))}) && "
                        f"sbatch --dependency=afterok:${{jid%%;*}} {q_merge}")
    else:
        messages.result(f"sbatch {q_merge}")


def _submit(rd: RunDir, array_script: Path | None, merge_script: Path, shards: list[int]) -> None:
    """sbatch the array (if any) and the merge job after it; note both in slurm/submissions.jsonl."""
    record: dict = {"time": time.time(), "array": array_expr(shards) if shards else None}
    if array_script is not None:
        record["array_job"] = sbatch(array_script)
        messages.result(f"submitted shards {array_expr(shards)}: job {record['array_job']}")
        record["merge_job"] = sbatch(merge_script, dependency=f"afterok:{record['array_job']}")
        messages.result(f"submitted merge: job {record['merge_job']} (after job "
                        f"{record['array_job']} succeeds)")
    else:
        record["merge_job"] = sbatch(merge_script)
        messages.result(f"submitted merge: job {record['merge_job']}")
    with open(rd.path / "slurm" / "submissions.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    messages.result(f"follow it with: phoenix-keypoints status --out {rd.path}")


def plan_for_array(rd: RunDir, opts: RunOptions, num_shards: int, so: SlurmOptions,
                   frozen: bool = False) -> RunInfo:
    """Plan here, before any array task starts, for the workers the array will have; a corpus that
    changed since is re-planned here too, unless shards still run on the plan (or --frozen)."""
    per_task = so.cpus_per_task or len(worker_slots(None, None))
    live = live_shards(rd.shard_progress_files())
    why = FROZEN if frozen else (
        f"Shard(s) {', '.join(map(str, sorted(live)))} still run on the stored plan, so it is kept: "
        "run this command again once they end, to extract the changes.") if live else ""
    with run_folder(rd, "plan", wait=True):
        return load_or_plan(rd, opts, num_shards * per_task, num_shards=num_shards, frozen=why)


def _versions_note(info: RunInfo) -> None:
    """The scripts run this Python on the nodes: say before submitting when it has other versions
    than the run was planned under, since its shards would refuse (jobs.run.todo.shard_versions)
    unless their nodes' installs differ from this one's."""
    diffs = differences(binding(info.value_versions()), versions_here(info))
    if diffs:
        messages.warn(f"this Python ({sys.executable}), which the array script runs, has other versions "
                      f"of what the keypoints depend on than the run was planned under "
                      f"({named(diffs, 'in the run', 'here')}): a shard that sees them exits 2 before "
                      f"extracting. Install the run's versions{pip_hint(diffs)}, or plan the run "
                      "again with this Python (another --out).")


def slurm_command(rd: RunDir, info: RunInfo, so: SlurmOptions, submit: bool) -> int:
    """Write (and maybe submit) the array over the missing shards and the merge job after it."""
    num_shards = info.num_shards
    state = scan_parts(rd, info, rd.load_plan(), move_bad=False)
    live = live_shards(rd.shard_progress_files())
    shards = shard_state(rd.claims_dir, bool(state.missing), num_shards, live)
    missing = shards.missing
    if state.missing:
        _versions_note(info)
    if not missing and info.merge is not None and not info.merge.partial:
        messages.result(f"all {num_shards} shard(s) complete and merged: {rd.keypoints_path}")
        return 0
    if live and not missing:
        messages.result(f"shard(s) {', '.join(map(str, sorted(live)))} still running: nothing to "
                        f"submit; `phoenix-keypoints status --out {rd.path}` follows them.")
        return 0
    folder = rd.path / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    (rd.path / "logs").mkdir(exist_ok=True)  # sbatch does not create the --output folder
    merge_script = folder / "merge.sbatch"
    merge_script.write_text(render_merge(rd, so))
    array_script = None
    if missing:
        array_script = folder / "shards.sbatch"
        array_script.write_text(render_array(rd, num_shards, missing, so))
        messages.say(f"{len(shards.complete)}/{num_shards} shard(s) complete; to submit: "
                     f"{len(missing)} (--array={array_expr(missing)})")
    else:
        messages.say(f"all {num_shards} shard(s) complete; only the merge is left")
    if submit:
        _submit(rd, array_script, merge_script, missing)
    else:
        _show(array_script, merge_script)
    return 0
