#!/usr/bin/env python3
"""What `run --estimator wholebody` spends besides the models, piece by piece, in CPU time.

The tiny-model benchmark (wholebody.py) compares wall times; on a shared host those move more
than the job's own cost. This measures CPU instead (time.process_time / thread_time, the minimum
of a few repeats, no profiler), on the tests' tiny models and the shared sample's frames:

- start-up of one process: a bare interpreter, the modules a spawned worker imports, pyarrow's
  first table (which imports pandas unless told there is none), the archive index module, the
  two onnxruntime sessions and their model checks;
- per frame: reading the file, its sha256 (provenance, once), decoding, the models, the rest of
  the worker's loop (rows, the reading thread's queue), a chunk's table and Parquet part; and
  rtmlib's loop body on the same frames (cv2.imread, YOLOX, RTMPose), for comparison;
- the whole job: `run` (default options) on one frame (its fixed cost) and on the workload, CPU
  of the whole process tree.

    .venv/bin/python scripts/bench/wholebody_pieces.py                 # 4,968 frames, ~2 min
    .venv/bin/python scripts/bench/wholebody_pieces.py --copies 2 --json ''   # a quick look
    .venv/bin/python scripts/bench/wholebody_pieces.py --base /tmp/base   # before / after a change
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import REPO, machine, save_json  # noqa: E402

WORKER = "import phoenix_keypoints.jobs.schedule.worker as w"
FIRST_TABLE = ("import pyarrow as pa\ngetattr(w, 'skip_pandas_probe', lambda: None)()\n"
               "pa.table({'x': pa.array([1], pa.int8())})")


def child_cpu_ms(code: str, repeat: int, checkout: Path) -> float:
    """The least CPU a fresh interpreter spends running `code` (its own start-up included)."""
    code += "\nimport time; print(time.process_time())"
    best = min(float(subprocess.run([sys.executable, "-c", code], cwd=checkout, check=True,
                                    capture_output=True, text=True).stdout.split()[-1])
               for _ in range(repeat))
    return round(best * 1e3, 1)


def startup(models: dict[str, Path], repeat: int, checkout: Path) -> dict[str, float]:
    est = ("from phoenix_keypoints.extract.keypoints.estimator import open_estimator\n"
           "from phoenix_keypoints.extract.families.wholebody.runner import record\n"
           f"open_estimator({{'estimator': 'wholebody', **record({str(models['detector'])!r}, "
           f"{str(models['pose'])!r})}}, num_threads=1)")
    cases = {"python -c pass": "pass", "a worker's imports": WORKER,
             "+ pyarrow's first table": f"{WORKER}\n{FIRST_TABLE}",
             "+ the archive index module":
                 f"{WORKER}\nimport phoenix_keypoints.extract.sources.archive_index",
             "+ the models (2 sessions, checks, probes)": f"{WORKER}\n{est}"}
    return {name: child_cpu_ms(code, repeat, checkout) for name, code in cases.items()}


def per_frame(fn: Callable[[Path], object], files: list[Path], repeat: int) -> float:
    """Least thread CPU ms a frame of fn over files."""
    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        for f in files:
            fn(f)
        best = min(best, (time.thread_time() - t) / len(files))
    return round(best * 1e3, 4)


def frame_pieces(models: dict[str, Path], folders: list[Path], repeat: int) -> dict[str, float]:
    import hashlib

    import cv2
    import numpy as np

    from phoenix_keypoints.extract.families.wholebody.runner import record
    from phoenix_keypoints.extract.keypoints.estimator import open_estimator
    from phoenix_keypoints.extract.keypoints.frames import decode_frame, read_file

    cv2.setNumThreads(1)
    files = [p for d in folders for p in sorted(d.glob("*.png"))]
    data = {f: read_file(f)[0] for f in files}
    rgb = {f: decode_frame(data[f], f.name)[0] for f in files}
    est = open_estimator({"estimator": "wholebody", **record(models["detector"], models["pose"])},
                         num_threads=1)
    batches = {f: [rgb[g] for g in files[i:i + 8]] for i, f in enumerate(files) if i % 8 == 0}
    models_ms = per_frame(lambda f: est.process_batch(batches[f]) if f in batches else None,
                          files, repeat)
    return {"frames": len(files),
            "read the file, no sha256": per_frame(lambda f: read_file(f, digest=False), files, repeat),
            "sha256 of its bytes": per_frame(lambda f: hashlib.sha256(data[f]).hexdigest(), files,
                                             repeat),
            "decode (checks, imdecode, BGR to RGB)": per_frame(lambda f: decode_frame(data[f], f.name),
                                                                files, repeat),
            "cv2.imdecode alone": per_frame(
                lambda f: cv2.imdecode(np.frombuffer(data[f], np.uint8), cv2.IMREAD_COLOR), files,
                repeat),
            "the models (process_batch, 8 a call)": models_ms}


def worker_loop(models: dict[str, Path], root: Path, folders: list[Path]) -> dict[str, float]:
    """A worker's own loop on real frames: its main thread's CPU beside the models' share, and
    a chunk's table and Parquet part."""
    import pyarrow.parquet as pq

    from phoenix_keypoints.extract import sources
    from phoenix_keypoints.extract.families.wholebody.runner import record
    from phoenix_keypoints.extract.keypoints.estimator import open_estimator
    from phoenix_keypoints.extract.keypoints.video_rows import Block, extract_video
    from phoenix_keypoints.extract.sources.base import Ref

    est = open_estimator({"estimator": "wholebody", **record(models["detector"], models["pose"])},
                         num_threads=1)
    inner, spent = est.process_batch, [0.0]

    def timed_batch(rgbs: list) -> list:
        t = time.thread_time()
        out = inner(rgbs)
        spent[0] += time.thread_time() - t
        return out

    est.process_batch = timed_batch
    out, n, t = Block(declaration=est.declaration), 0, time.thread_time()
    for d in folders:
        names, loc = tuple(sorted(p.name for p in d.glob("*.png"))), str(d.relative_to(root))
        frames = sources.get("folder").frames(root, Ref("folder", loc, names))
        extract_video(est, "train", d.name, frames, len(names), out, None, loc)
        n += len(names)
    main = time.thread_time() - t
    out.to_table()  # the first one pays for what pyarrow imports then (the start-up's figure)
    t = time.thread_time()
    with tempfile.TemporaryDirectory() as tmp:
        pq.write_table(out.to_table(), Path(tmp) / "part.parquet")
    part = time.thread_time() - t
    return {"frames": n, "models beside the reading thread": round(spent[0] * 1e3 / n, 4),
            "the rest of the main thread (rows, queue)": round((main - spent[0]) * 1e3 / n, 4),
            "a chunk's table and part": round(part * 1e3 / n, 4)}


def rtmlib_loop(models: dict[str, Path], folders: list[Path], repeat: int) -> dict[str, float]:
    import cv2
    import onnxruntime as ort
    from tiny_onnx import rtmlib_signer, rtmlib_wholebody

    det, pose = rtmlib_wholebody(models)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    for tool in (det, pose):
        tool.session = ort.InferenceSession(tool.onnx_model, sess_options=so,
                                            providers=["CPUExecutionProvider"])
    files = [p for d in folders for p in sorted(d.glob("*.png"))]
    return {"cv2.imread": per_frame(lambda f: cv2.imread(str(f)), files, repeat),
            "cv2.imread + YOLOX + RTMPose": per_frame(
                lambda f: rtmlib_signer(det, pose, cv2.imread(str(f))), files, repeat)}


def job_cpu(root: Path, out: Path, models: dict[str, Path], checkout: Path = REPO
            ) -> dict[str, float]:
    """`run` with default options, afresh: wall, and CPU of the whole process tree. Run as
    `python -m phoenix_keypoints` from this checkout, so that another checkout's copy of this
    script measures its own code (the console script runs the installed one)."""
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "phoenix_keypoints", "run", "--dataset", root, "--out",
                    out, "--estimator", "wholebody", "--detector", models["detector"],
                    "--pose-model", models["pose"]],
                   cwd=checkout, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(time.monotonic() - t0, 2), "cpu_s": round(cpu, 3)}


def compared(args: argparse.Namespace, models: dict[str, Path], root: Path, one: Path,
             work: Path) -> dict:
    """The start-up pieces and whole runs of this checkout and, with --base, of another one
    (its code before a change), the runs alternated."""
    trees = {"after": REPO, **({"before": Path(args.base).resolve()} if args.base else {})}
    out: dict = {name: {"checkout": str(tree), "startup_cpu_ms": startup(models, args.repeat, tree),
                        "run_one_frame": [], "run_workload": []} for name, tree in trees.items()}
    for _ in range(args.repeat):
        for name, tree in trees.items():
            out[name]["run_one_frame"].append(job_cpu(one, work / "o1", models, tree))
            out[name]["run_workload"].append(job_cpu(root, work / "o2", models, tree))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--copies", type=int, default=36, help="copies of the two sample videos (138 "
                                                         "frames a copy)")
    p.add_argument("--repeat", type=int, default=3, help="repeats of each piece (the least kept)")
    p.add_argument("--base", help="another checkout (e.g. `git worktree add /tmp/base main`): its "
                                  "start-up and runs measured too, alternated with this one's")
    p.add_argument("--json", default="wholebody-pieces.json", help="file under docs/results/ ('': none)")
    args = p.parse_args()
    from tiny_onnx import tiny_models
    from workload import build_one_frame, build_workload

    with tempfile.TemporaryDirectory(prefix="bench-pieces-") as tmp:
        work = Path(tmp)
        models = tiny_models(work / "models")
        wl = build_workload(work / "PHOENIX-2014-T", args.copies)
        one = build_one_frame(work / "one" / "PHOENIX-2014-T")
        root = Path(wl["root"])
        folders = sorted((root / "features" / "fullFrame-210x260px" / "train").iterdir())
        res = {"command": " ".join(sys.argv), "machine": machine(), "frames": wl["frames"],
               **compared(args, models, root, Path(one["root"]), work),
               "per_frame_cpu_ms": frame_pieces(models, folders[:2], args.repeat),
               "worker_loop_cpu_ms_a_frame": worker_loop(models, root, folders[:10]),
               "rtmlib_loop_cpu_ms_a_frame": rtmlib_loop(models, folders[:4], args.repeat)}
    print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=1))
    if args.json:
        print(save_json(args.json, res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
