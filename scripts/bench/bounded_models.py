"""What each model file of issue 46's round costs `run` now (items 1-3: loops, deadlines, memory,
a slow load, declared inputs, a batch of large inputs, 300 outputs; issue 52 item 2: a file padded
with empty nodes, an op_type given twice on the wire): wall seconds, peak RSS of the
largest process (GNU time's %M) and the exit, on the 16 frames of scripts/bench/hostile_models.py
(`--workers 1`, default options unless the case names one). Every run is under `timeout` and an
address-space cap (prlimit --as), as the tests run them.

    python scripts/bench/bounded_models.py [--name bounded-models.json]   # under docs/results/
    python scripts/bench/bounded_models.py --only "clean,empty nodes,twice" --walks \\
        --name model-walk.json   # and the tool's own walks of files, in this process (--walks)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import machine, save_json  # noqa: E402
from hostile_models import frames  # noqa: E402
from tiny_onnx import (  # noqa: E402
    detector_end2end,
    folding,
    huge_allocation,
    looping,
    many_convs,
    padded,
    pose_declaring,
    tiny_models,
    twice_op_type,
    with_outputs,
)

CAP = 8 << 30  # address space of each run (and its workers)
TIMEOUT = 900


def cases(tmp: Path) -> dict[str, tuple[Path, Path, list[str]]]:
    m = tiny_models(tmp / "m")
    det, pose = m["detector"], m["pose"]

    def loop(src: Path, out: str, trips: int | str, body: str = "count", **kw) -> Path:
        return looping(src, tmp / f"{len(list(tmp.iterdir()))}.onnx", out, trips, body, **kw)

    return {
        "clean": (det, pose, []),
        "detector: Loop of 2^62 trips": (loop(det, "dets", 2**62), pose, []),
        "pose model: Loop of 10^6 trips stacking 4 MB each": (
            det, loop(pose, "simcc_x", 10**6, "grow"), []),
        "detector: Loop whose trip count comes from the pixels": (loop(det, "dets", "data"), pose, []),
        "pose model: Loop without a trip count": (det, loop(pose, "simcc_x", "none"), []),
        "detector: Loop of 10^4 trips of a 512x512 product (about 40 s a call), "
        "--model-deadline 5": (loop(det, "dets", 10_000, "slow"), pose, ["--model-deadline", "5"]),
        "the same, only on frames (an If: the grey check skips it), --model-deadline 5": (
            loop(det, "dets", 10_000, "slow", above=200), pose, ["--model-deadline", "5"]),
        "pose model: Loop of 10^4 trips stacking 4 MB each (40 GB), default --model-memory": (
            det, loop(pose, "simcc_x", 10_000, "grow"), []),
        "detector: one ConstantOfShape of 4 GiB (one node), --model-memory 1024": (
            huge_allocation(det, tmp / "big.onnx", "dets", 1 << 30), pose,
            ["--model-memory", "1024"]),
        "detector: a 6000x6000 product of constants, folded while it loads, --model-deadline 1": (
            folding(det, tmp / "fold.onnx", "dets", 6000), pose, ["--model-deadline", "1"]),
        "detector declaring a 20000x20000 input": (
            detector_end2end(tmp / "d20000.onnx", hw=(20000, 20000)), pose, []),
        "pose model declaring a 20000x20000 input": (
            det, pose_declaring(tmp / "p20000.onnx", (20000, 20000)), []),
        "detector of 2048x2048, --batch-size 64": (
            detector_end2end(tmp / "d2048.onnx", hw=(2048, 2048)), pose, ["--batch-size", "64"]),
        "pose model of 300 outputs": (det, with_outputs(pose, tmp / "many.onnx", 300), []),
        "detector followed by 30,000,000 empty nodes (60 MB)": (
            padded(det, tmp / "padded.onnx", 30_000_000), pose, []),
        "detector followed by 4,000,000 fields ModelProto does not have (12 MB, many fields)": (
            padded(det, tmp / "unknown.onnx", 4_000_000, unknown=True), pose, []),
        "detector: Loop of 2^62 trips whose op_type is on the wire twice (Identity, then Loop)": (
            twice_op_type(det, tmp / "twice.onnx"), pose, []),
    }


def measure(one: Path, out: Path, det: Path, pose: Path, more: list[str]) -> dict:
    t0 = time.monotonic()
    p = subprocess.run(["prlimit", f"--as={CAP}", "timeout", "-s", "KILL", str(TIMEOUT),
                        "/usr/bin/time", "-f", "%M", sys.executable, "-m", "phoenix_keypoints",
                        "run", "--dataset", str(one), "--out", str(out), "--estimator", "wholebody",
                        "--detector", str(det), "--pose-model", str(pose), "--workers", "1", *more],
                       capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    said = [x for x in lines[:-1] if x.startswith(("error", "warning"))]
    peak = int(lines[-1]) // 1024 if lines and lines[-1].isdigit() else None
    return {"exit": p.returncode, "wall_s": round(time.monotonic() - t0, 2), "peak_rss_mib": peak,
            "said": said[-1][:600] if said else ""}


def walk_costs(tmp: Path) -> dict[str, dict]:
    """Each of the tool's two walks of a file before onnxruntime reads it (its external data, its
    loops), in this process: fields read, nodes, seconds, peak memory it allocated, what it said."""
    import tracemalloc

    from phoenix_keypoints.extract.keypoints import onnx_files, onnx_graph
    from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

    det = tiny_models(tmp / "w")["detector"]
    files = {"a chain of 6,000 convolutions (5 attributes each, their weights)":
             many_convs(tmp / "convs.onnx", 6000),
             "detector followed by 30,000,000 empty nodes (60 MB)":
             padded(det, tmp / "w-pad.onnx", 30_000_000),
             "detector followed by 4,000,000 fields ModelProto does not have (12 MB)":
             padded(det, tmp / "w-unknown.onnx", 4_000_000, unknown=True)}
    wires: list = []
    made = onnx_files._Wire.__init__

    def counted(self, buf) -> None:  # each walk's reader, kept to read its counts
        made(self, buf)
        wires.append(self)

    onnx_files._Wire.__init__ = counted
    out = {}
    for name, path in files.items():
        for walk, call in (("external data", onnx_files.external_locations),
                           ("loops", onnx_graph.graph_problem)):
            row = {}
            for traced in (False, True):  # timed untraced (tracemalloc slows Python 10x), then traced
                onnx_files._walked.clear()
                onnx_graph._read.clear()
                if traced:
                    tracemalloc.start()
                t0 = time.monotonic()
                try:
                    said = repr(call(path, "--detector"))
                except ModelFileError as e:
                    said = str(e)[:160]
                if traced:
                    row["peak_traced_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
                    tracemalloc.stop()
                else:
                    row = {"seconds": round(time.monotonic() - t0, 2),
                           "fields_read": wires[-1].reads, "nodes": wires[-1].nodes, "said": said}
            out[f"{name}: {walk}"] = row
            print(name, walk, row, flush=True)
    onnx_files._Wire.__init__ = made
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="bounded-models.json", help="file name under docs/results/")
    ap.add_argument("--only", default="", help="comma-separated words: only the cases naming one")
    ap.add_argument("--walks", action="store_true", help="also time the tool's own walks of files")
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        one = frames(tmp)
        (tmp / "models").mkdir()
        results = {}
        for k, (name, (det, pose, more)) in enumerate(cases(tmp / "models").items()):
            if only and not any(w in name for w in only):
                continue
            results[name] = measure(one, tmp / f"run-{k}", det, pose, more)
            print(name, results[name], flush=True)
        walks = walk_costs(tmp) if args.walks else {}
    save_json(args.name, {"machine": machine(), "frames": 16, "cap_bytes": CAP, "cases": results,
                          **({"walks": walks} if walks else {})})


if __name__ == "__main__":
    main()
