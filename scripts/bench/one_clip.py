#!/usr/bin/env python3
"""One clip: `run --dataset clip.mp4` and `extract_keypoints(clip)` against a plain Holistic loop.

What a user pays on one clip beyond MediaPipe (issue 53 item 11): three commands, each a fresh
process as a user starts it, alternated round by round (their order rotating) so outside load
falls on all alike; wall from start to exit, CPU of the process tree:
- loop: the plain loop a user writes (PLAIN_LOOP below: PyAV decode, mediapipe's Holistic with
  its defaults, one `process()` a frame, the landmarks kept as numpy);
- run: `phoenix-keypoints run --dataset CLIP --out O`, default options;
- extract: `python -c "extract_keypoints(CLIP)"`, default options.
With --pieces, where the start-up goes: `python -X importtime` of each command's imports (the
largest top-level packages), and run's own milestones from run.json (first frame, merge).

    .venv/bin/python scripts/bench/one_clip.py --rounds 3 --pieces --json one-clip.json  # ~2 min
    git worktree add /tmp/wt-main main     # and the same commands of another checkout beside them:
    .venv/bin/python scripts/bench/one_clip.py --rounds 3 --against /tmp/wt-main
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]
from common import REPO, SHARED_DATA, loadavg, machine, save_json, table  # noqa: E402
from run import _cpu, child_env, phoenix_keypoints  # noqa: E402

CLIP = SHARED_DATA / "video-sample" / "signer_demo.mp4"
TARGETS = {"run": 1.25, "extract": 1.10}  # wall / the plain loop's, issue 53 item 11

PLAIN_LOOP = """
import sys
import av
import mediapipe as mp
import numpy as np

def points(lms, n):
    if lms is None:
        return np.full((n, 3), np.nan, np.float32)
    return np.array([[p.x, p.y, p.z] for p in lms.landmark], np.float32)

out = []
with av.open(sys.argv[1]) as c, mp.solutions.holistic.Holistic() as h:
    for frame in c.decode(video=0):
        r = h.process(frame.to_ndarray(format="rgb24"))
        out.append([points(r.pose_landmarks, 33), points(r.face_landmarks, 468),
                    points(r.left_hand_landmarks, 21), points(r.right_hand_landmarks, 21)])
print(len(out), "frames")
"""

EXTRACT = ("import sys; from phoenix_keypoints import extract_keypoints; "
           "kp = extract_keypoints(sys.argv[1], progress=False); print(len(kp), 'frames')")


def commands(clip: Path, out: Path, against: list[Path]) -> dict[str, list[str]]:
    """name -> the command line, as a user runs it; for each checkout in `against`, run@ and
    extract@ its code too (PYTHONPATH: its phoenix_keypoints/ reaches its extract/ and jobs/)."""
    ours = {"run": [*map(str, phoenix_keypoints()), "run", "--dataset", str(clip), "--out",
                    str(out)],
            "extract": [sys.executable, "-c", EXTRACT, str(clip)]}
    cmds = {"loop": [sys.executable, "-c", PLAIN_LOOP, str(clip)], **ours}
    for tree in against:
        cmds |= {f"{k}@{tree.name}": v for k, v in ours.items()}
    return cmds


def env_of(name: str, against: list[Path]) -> dict[str, str]:
    """This checkout's code, or another one's for a name@TREE command."""
    env = child_env()
    for tree in against:
        if name.endswith(f"@{tree.name}"):
            env["PYTHONPATH"] = str(tree)
    return env


def timed(name: str, cmd: list[str], out: Path, against: list[Path]) -> dict:
    """One command: wall, CPU of its process tree, and run's milestones."""
    shutil.rmtree(out, ignore_errors=True)
    cpu0, t0, start = _cpu(), time.monotonic(), time.time()
    proc = subprocess.run(cmd, cwd=REPO, env=env_of(name, against), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, check=False)
    wall, end = time.monotonic() - t0, time.time()
    if proc.returncode:
        raise SystemExit(f"{name} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    got = {"wall_s": round(wall, 3), "cpu_s": round(_cpu() - cpu0, 2)}
    if name.startswith("run"):
        info = json.loads((out / "run.json").read_text())
        ex, merge = info.get("extraction") or {}, info["merge"]
        got |= {"first_frame_s": _gap(ex.get("first_frame"), start),
                "last_frame_s": _gap(ex.get("last_frame"), start),
                "merge_done_s": _gap(merge.get("time"), start), "exit_s": round(end - start, 3)}
    return got


def _gap(later: float | None, earlier: float) -> float | None:
    return None if later is None else round(later - earlier, 3)


def imports(cmd: list[str], out: Path) -> dict:
    """`-X importtime` of a command: total import seconds and the ten largest top-level imports
    (cumulative), from its stderr: of every process it starts (spawn passes -X on to the worker
    and the resource tracker), added up."""
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]] if cmd[0] == sys.executable
                          else [sys.executable, "-X", "importtime", "-m", "phoenix_keypoints",
                                *cmd[1:]], cwd=REPO, env=child_env(), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, check=False)
    top: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if cumulative.strip().isdigit() and not name.startswith("  "):  # top level: one space
            top[name.strip()] = top.get(name.strip(), 0) + int(cumulative) / 1e6
    largest = sorted(top.items(), key=lambda kv: -kv[1])[:10]
    return {"total_s": round(sum(top.values()), 3),
            "largest_s": {k: round(v, 3) for k, v in largest}}


def bench(rounds: int, pieces: bool, against: list[Path]) -> dict:
    """Alternated rounds of the commands; medians and ratios to the loop."""
    names = list(commands(CLIP, Path(), against))
    with tempfile.TemporaryDirectory(prefix="one-clip-") as tmp:
        cmds = commands(CLIP, Path(tmp) / "out", against)
        for name in names:  # warm the page cache and bytecode
            if name.startswith("run"):
                timed(name, cmds[name], Path(tmp) / "out", against)
        cycles = []
        for i in range(rounds):
            order = names[i % len(names):] + names[:i % len(names)]
            cycle = {"order": order, "load_1min": loadavg()[0]}
            for name in order:
                cycle[name] = timed(name, cmds[name], Path(tmp) / "out", against)
            cycles.append(cycle)
            print(f"round {i + 1}: " + ", ".join(f"{n} {cycle[n]['wall_s']:.2f} s"
                                                  for n in names), file=sys.stderr, flush=True)
        res = {"clip": str(CLIP.relative_to(SHARED_DATA.parent.parent)), "cycles": cycles}
        if pieces:
            res["imports"] = {n: imports(cmds[n], Path(tmp) / "out") for n in names if "@" not in n}
    med = {n: statistics.median(c[n]["wall_s"] for c in cycles) for n in names}
    res["median_wall_s"] = {n: round(v, 3) for n, v in med.items()}
    res["ratio_to_loop"] = {n: round(med[n] / med["loop"], 3) for n in names[1:]}
    res["per_round_ratio"] = {n: [round(c[n]["wall_s"] / c["loop"]["wall_s"], 3) for c in cycles]
                              for n in names[1:]}
    res["targets"] = TARGETS
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--pieces", action="store_true", help="also -X importtime of each command")
    p.add_argument("--against", type=Path, action="append", default=[],
                   help="another checkout (e.g. a git worktree of main; repeatable) whose run and "
                   "extract_keypoints alternate with these, on this venv's libraries")
    p.add_argument("--json", default="", help="file name under docs/results/ ('' : none)")
    args = p.parse_args()
    out = {"machine": machine(), "command": " ".join(["scripts/bench/one_clip.py", *sys.argv[1:]]),
           "load_before": loadavg(), "results": bench(args.rounds, args.pieces, args.against)}
    out["against"] = {t.name: subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=t,
                                             capture_output=True, text=True,
                                             check=False).stdout.strip() for t in args.against}
    out["load_after"] = loadavg()
    res = out["results"]
    print(table([[n, res["median_wall_s"][n], res["ratio_to_loop"].get(n, 1.0),
                  TARGETS.get(n, "") if "@" not in n else ""] for n in res["median_wall_s"]],
                ["command", "median wall s", "/ loop", "target"]))
    if args.json:
        print(save_json(args.json, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
