"""A stand-in for SLURM's `sbatch` for tests: array tasks run as local processes.

Put on PATH as `sbatch` (see tests/test_slurm.py). It understands what `phoenix-keypoints slurm`
uses: --parsable, --array (command line or #SBATCH, with %K), --dependency=afterok:JOB,
#SBATCH --output (%A %a %j). Every submission is appended to $FAKE_SBATCH_DIR/submissions.jsonl;
each array task runs `bash SCRIPT` in its own session with SLURM_ARRAY_TASK_ID set, its pid in
tasks/JOB_I.pid and exit status in tasks/JOB_I.rc (negative: killed by that signal), and the job's
end in jobs/JOB.done. A job whose afterok dependency failed never runs ("DependencyNeverSatisfied",
as with --kill-on-invalid-dep=yes).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_SBATCH_DIR", "."))


def parse_array(expr: str) -> tuple[list[int], int | None]:
    expr, _, k = expr.partition("%")
    out: list[int] = []
    for part in expr.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out, int(k) if k else None


def directives(script: Path) -> dict[str, str]:
    out = {}
    for line in script.read_text().splitlines():
        if line.startswith("#SBATCH "):
            key, _, value = line[len("#SBATCH "):].strip().partition("=")
            out[key] = value
    return out


def next_job_id() -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "counter", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = int(f.read().strip() or 1000) + 1
        f.seek(0)
        f.truncate()
        f.write(str(n))
    return n


def submit(argv: list[str]) -> int:
    opts = {}
    script = None
    for a in argv:
        if a.startswith("--"):
            key, _, value = a.partition("=")
            opts[key] = value
        else:
            script = Path(a)
    if script is None or not script.is_file():
        print(f"sbatch: error: no script ({argv})", file=sys.stderr)
        return 1
    dirs = directives(script)
    array = opts.get("--array") or dirs.get("--array")
    job = next_job_id()
    record = {"job": job, "argv": argv, "script": str(script), "array": array,
              "dependency": opts.get("--dependency"), "output": dirs.get("--output")}
    (STATE / "jobs").mkdir(exist_ok=True)
    (STATE / "jobs" / f"{job}.json").write_text(json.dumps(record))
    with open(STATE / "submissions.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    subprocess.Popen([sys.executable, __file__, "--fake-run-job", str(job)], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(job if "--parsable" in opts else f"Submitted batch job {job}")
    return 0


def run_job(job: int) -> None:
    rec = json.loads((STATE / "jobs" / f"{job}.json").read_text())
    done = STATE / "jobs" / f"{job}.done"
    dep = rec["dependency"]
    if dep:
        kind, _, other = dep.partition(":")
        assert kind == "afterok", dep
        other_done = STATE / "jobs" / f"{other}.done"
        while not other_done.exists():
            time.sleep(0.2)
        if not json.loads(other_done.read_text())["ok"]:
            done.write_text(json.dumps({"ok": False, "state": "DependencyNeverSatisfied"}))
            return
    indices, limit = parse_array(rec["array"]) if rec["array"] else ([None], None)
    tasks = STATE / "tasks"
    tasks.mkdir(exist_ok=True)
    running: dict[object, subprocess.Popen] = {}
    rcs: dict[str, int] = {}
    queue = list(indices)
    while queue or running:
        while queue and len(running) < (limit or len(indices)):
            i = queue.pop(0)
            env = dict(os.environ, SLURM_JOB_ID=str(job))
            if i is not None:
                env.update(SLURM_ARRAY_JOB_ID=str(job), SLURM_ARRAY_TASK_ID=str(i))
            out = (rec["output"] or f"slurm-{job}.out").replace("%A", str(job)).replace(
                "%a", str(i)).replace("%j", str(job))
            with open(out, "ab") as log:
                p = subprocess.Popen(["bash", rec["script"]], env=env, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
            (tasks / f"{job}_{i}.pid").write_text(str(p.pid))
            running[i] = p
        for i, p in list(running.items()):
            if p.poll() is not None:
                rcs[str(i)] = p.returncode
                (tasks / f"{job}_{i}.rc").write_text(str(p.returncode))
                del running[i]
        time.sleep(0.1)
    done.write_text(json.dumps({"ok": all(rc == 0 for rc in rcs.values()), "rcs": rcs}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fake-run-job"]:
        run_job(int(sys.argv[2]))
    else:
        sys.exit(submit(sys.argv[1:]))
