#!/usr/bin/env python3
"""Soak test: the whole job under random SIGKILLs of workers and of the whole job, resumed each time.

Builds a workload of --frames frames or more (the embedded sample's videos replicated under new
names, frames hard-linked), runs it once undisturbed as the reference, then runs it again while
killing, at random moments, either one busy worker (the coordinator must respawn it and carry on)
or the coordinator with all its workers (a node reboot: `run` is started again). At the end the
merged output must equal the reference: it reports kills, frames lost, frames duplicated and rows
whose numbers differ, and writes them to OUT/soak.json.

    .venv/bin/python scripts/soak.py --frames 1200 --kills 10 --seed 1 --out /tmp/soak

Exit status 0 when the result equals the reference, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pyarrow.parquet as pq  # noqa: E402

from phoenix_keypoints.extract.corpora import discover  # noqa: E402
from phoenix_keypoints.extract.corpora.base import SPLITS  # noqa: E402
from phoenix_keypoints.extract.corpora.phoenix import FRAMES_DIR  # noqa: E402
from phoenix_keypoints.extract.sample import build_sample  # noqa: E402

CSV_HEADER = "name|video|start|end|speaker|orth|translation"


def build_workload(out: Path, frames: int) -> Path:
    """The sample's videos copied as often as needed for `frames` frames (names `<video>-rNNN`)."""
    sample = build_sample(out / "sample")
    ds = discover(sample)
    copies = max(1, math.ceil(frames / ds.num_frames))
    root = out / "workload" / "PHOENIX-2014-T"
    if root.exists():
        shutil.rmtree(root)
    manual = root / "annotations" / "manual"
    manual.mkdir(parents=True)
    lines: dict[str, list[str]] = {s: [CSV_HEADER] for s in SPLITS}
    for k in range(copies):
        for v in ds.videos:
            name = f"{v.name}-r{k:03d}"
            folder = root / FRAMES_DIR / v.split / name
            folder.mkdir(parents=True)
            for f in v.files:
                try:
                    os.link(sample / v.folder / f, folder / f)
                except OSError:
                    shutil.copyfile(sample / v.folder / f, folder / f)
            lines[v.split].append(f"{name}|{name}/1/*.png|-1|-1|{v.speaker}|{v.gloss}|"
                                  f"{v.translation}")
    for split, rows in lines.items():
        (manual / f"PHOENIX-2014-T.{split}.corpus.csv").write_text("\n".join(rows) + "\n")
    return root


def env(faults: str = "") -> dict[str, str]:
    e = dict(os.environ)
    e.pop("PHOENIX_KEYPOINTS_FAULTS", None)
    if faults:
        e["PHOENIX_KEYPOINTS_FAULTS"] = faults
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def start(args: list[str], log, faults: str = "") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "phoenix_keypoints", *map(str, args)],
                            env=env(faults), cwd=REPO, stdout=log, stderr=log, start_new_session=True)


def busy_worker_pids(run_dir: Path, coordinator: int) -> list[int]:
    """Workers with a chunk, from the heartbeat of this coordinator (not a killed one's)."""
    try:
        p = json.loads((run_dir / "progress.json").read_text())
    except (OSError, ValueError):
        return []
    if not p.get("running") or p.get("pid") != coordinator:
        return []
    return [w["pid"] for w in p.get("workers", []) if w.get("pid") and w.get("chunk") is not None]


def wait_while_running(proc: subprocess.Popen, seconds: float, busy_in: Path | None = None) -> None:
    """Sleep up to `seconds` while proc runs; with busy_in, stop as soon as a worker is busy."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if busy_in is not None and busy_worker_pids(busy_in, proc.pid):
            return
        time.sleep(0.05)


def compare(got_path: Path, ref_path: Path) -> dict[str, int | bool]:
    got, ref = pq.read_table(got_path), pq.read_table(ref_path)
    gk = list(zip(got["video"].to_pylist(), got["frame"].to_pylist(), strict=True))
    rk = list(zip(ref["video"].to_pylist(), ref["frame"].to_pylist(), strict=True))
    ref_rows = dict(zip(rk, ref.drop_columns(["image"]).to_pylist(), strict=True))
    seen: set = set()
    differ = 0
    for key, row in zip(gk, got.drop_columns(["image"]).to_pylist(), strict=True):
        if key not in seen and key in ref_rows and row != ref_rows[key]:
            differ += 1
        seen.add(key)
    return {
        "rows": len(gk),
        "reference_rows": len(rk),
        "frames_lost": len(set(rk) - set(gk)),
        "frames_duplicated": len(gk) - len(set(gk)),
        "frames_extra": len(set(gk) - set(rk)),
        "rows_differing": differ,
        "byte_identical": got_path.read_bytes() == ref_path.read_bytes(),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=1200, help="workload size (at least)")
    ap.add_argument("--kills", type=int, default=10, help="SIGKILLs to inflict")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/phoenix-soak"))
    ap.add_argument("--workers", type=int, default=2, help="--workers-per-gpu of the runs")
    ap.add_argument("--chunk-frames", type=int, default=100)
    ap.add_argument("--job-share", type=float, default=0.5,
                    help="share of kills that take the whole job down (the rest: one worker)")
    ap.add_argument("--max-wait", type=float, default=12.0,
                    help="longest random wait in seconds before a kill")
    ap.add_argument("--frame-delay", type=float, default=0.0,
                    help="seconds of sleep per frame in the soaked run (fault hook), to stretch a "
                         "small workload; 0 for real speed")
    ap.add_argument("--reference", type=Path,
                    help="an undisturbed run folder to compare with (its dataset and options are "
                         "used; --frames and --chunk-frames are then ignored)")
    return ap.parse_args(argv)


def reference(a: argparse.Namespace) -> tuple[Path, list, float]:
    """(the undisturbed run folder, the run options both runs use, seconds it took to make)."""
    if a.reference:
        meta = json.loads((a.reference / "run.json").read_text())
        root, chunk_frames = meta["dataset"]["root"], meta["options"]["chunk_frames"]
        ref_dir = a.reference
    else:
        root, chunk_frames = build_workload(a.out, a.frames), a.chunk_frames
        ref_dir = a.out / "reference"
        shutil.rmtree(ref_dir, ignore_errors=True)
    opts = ["--dataset", root, "--workers-per-gpu", a.workers]
    opts += ["--chunk-frames", chunk_frames] if chunk_frames else []
    if a.reference:
        return ref_dir, opts, 0.0
    t0 = time.monotonic()
    with open(a.out / "reference.log", "w") as log:
        if start(["run", "--out", ref_dir, *opts], log).wait() != 0:
            raise SystemExit(f"reference run failed: see {a.out / 'reference.log'}")
    return ref_dir, opts, time.monotonic() - t0


def kill_one(proc: subprocess.Popen, kind: str, soak_dir: Path,
             rng: random.Random) -> tuple[str, int] | None:
    """SIGKILL a busy worker (or the whole job): (what was killed, its pid), None if nothing was."""
    pids = busy_worker_pids(soak_dir, proc.pid)
    if kind == "worker" and pids:
        pid = rng.choice(pids)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended in the meantime: not a kill
            return None
        return "worker", pid
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return "job", proc.pid


def soak(a: argparse.Namespace, opts: list, soak_dir: Path) -> tuple[int, dict, list, int]:
    """Run, kill at random, run again, until the kills are spent; (rc, kills, events, starts)."""
    rng = random.Random(a.seed)
    kills, starts, events = {"worker": 0, "job": 0}, 0, []
    t0 = time.monotonic()
    with open(a.out / "soak.log", "w") as log:
        proc = None
        while True:
            if proc is None:
                proc = start(["run", "--out", soak_dir, *opts], log,
                             f"frame-delay={a.frame_delay}" if a.frame_delay else "")
                starts += 1
            if sum(kills.values()) >= a.kills:
                break
            kind = "job" if rng.random() < a.job_share else "worker"
            # Kills land while workers are busy: wait for one, then a random while longer.
            wait_while_running(proc, 30.0, soak_dir)
            wait_while_running(proc, rng.uniform(0.0, a.max_wait))
            if proc.poll() is not None:  # it finished before the kill: start again to continue
                if proc.returncode == 0:
                    print("the run finished before all kills were spent", flush=True)
                    break
                proc = None
                continue
            t = round(time.monotonic() - t0, 1)
            killed = kill_one(proc, kind, soak_dir, rng)
            if killed is None:
                continue
            events.append({"t": t, "kill": killed[0], "pid": killed[1]})
            if killed[0] == "job":
                proc = None
            kills[killed[0]] += 1
            print(f"{t:7.1f}s kill {sum(kills.values())}/{a.kills}: {killed[0]}", flush=True)
        rc = proc.wait() if proc is not None else 1
    return rc, kills, events, starts


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    soak_dir = a.out / "soak"
    shutil.rmtree(soak_dir, ignore_errors=True)
    ref_dir, opts, ref_s = reference(a)
    frames = json.loads((ref_dir / "run.json").read_text())["plan"]["frames"]
    print(f"workload: {frames} frames; reference run {ref_s:.1f} s", flush=True)
    t0 = time.monotonic()
    rc, kills, events, starts = soak(a, opts, soak_dir)
    if rc != 0:
        print(f"the last run exited {rc}: see {a.out / 'soak.log'}", file=sys.stderr)
        return 1
    result = {
        "command": "scripts/soak.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "frames": frames, "kills": sum(kills.values()), "worker_kills": kills["worker"],
        "job_kills": kills["job"], "runs_started": starts, "reference_seconds": round(ref_s, 1),
        "soak_seconds": round(time.monotonic() - t0, 1),
        "temp_files_left": len(list((soak_dir / "parts").glob(".*.tmp"))),
        **compare(soak_dir / "keypoints.parquet", ref_dir / "keypoints.parquet"),
        "events": events,
    }
    (a.out / "soak.json").write_text(json.dumps(result, indent=2) + "\n")
    ok = (result["frames_lost"] == result["frames_duplicated"] == result["frames_extra"]
          == result["rows_differing"] == result["temp_files_left"] == 0)
    print(json.dumps({k: v for k, v in result.items() if k != "events"}, indent=2))
    print("OK: equal to the undisturbed run" if ok else "FAIL: differs from the undisturbed run")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
