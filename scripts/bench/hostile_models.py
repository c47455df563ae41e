"""What each hostile model file costs `run` (issue 37 item 3): wall seconds, peak RSS of the largest
process and the exit, on 16 frames of the embedded sample (one frame folder, `--workers 1`), for
the cases tests/test_model_trust.py builds with tests/tiny_onnx.py. Against a clean run of the
same tiny models, so the figures say what a refusal saves and what a per-frame status costs.

    python scripts/bench/hostile_models.py [--name hostile-models.json]   # under docs/results/
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import machine, save_json  # noqa: E402
from helpers import interleaved_frames  # noqa: E402
from tiny_onnx import failing, poisoned, renamed, tiny_models, with_external_data  # noqa: E402

from phoenix_keypoints.extract.sample import build_sample  # noqa: E402


def frames(tmp: Path) -> Path:
    """hopper-1's and astronaut-1's first 8 frames in turn, in one folder (as the tests build it)."""
    return interleaved_frames(build_sample(tmp / "sample"), tmp / "frames")


def cases(tmp: Path) -> dict[str, tuple[Path, Path]]:
    m = tiny_models(tmp / "m")
    det, pose = m["detector"], m["pose"]
    (tmp / "x" / "in").mkdir(parents=True)
    nan_box = np.array([np.nan] * 4 + [0], np.float32)
    out = {
        "clean": (det, pose),
        "external data '../../o.bin'": (
            with_external_data(det, tmp / "x/in/det.onnx", "../../o.bin", tmp / "o.bin"), pose),
        "pose model as --detector": (pose, pose),
        "NaN boxes on 8 of 16 frames": (poisoned(det, tmp / "nan.onnx", "dets", nan_box, 105), pose),
        "NaN SimCC on every frame": (det, poisoned(pose, tmp / "nanp.onnx", "simcc_x",
                                                   np.array([np.nan], np.float32))),
        "fails on any input (10^12 floats)": (failing(det, tmp / "f0.onnx", "dets"), pose),
        "fails on frames only (10^12 floats)": (failing(det, tmp / "f1.onnx", "dets", 200), pose),
        "ESC in output and initializer names": (
            renamed(det, tmp / "esc.onnx", {"dets": "d\x1b[2J"}, "i\x1b[2J"), pose),
    }
    os.mkfifo(tmp / "fifo.onnx")
    os.symlink("/dev/zero", tmp / "zero.onnx")
    return out | {"a FIFO as --detector": (tmp / "fifo.onnx", pose),
                  "a link to /dev/zero as --detector": (tmp / "zero.onnx", pose)}


def measure(one: Path, out: Path, det: Path, pose: Path) -> dict:
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "phoenix_keypoints", "run",
                        "--dataset", str(one), "--out", str(out), "--estimator", "wholebody",
                        "--detector", str(det), "--pose-model", str(pose), "--workers", "1"],
                       capture_output=True, text=True, timeout=600)
    lines = p.stderr.strip().splitlines()
    said = [x for x in lines[:-1] if x.startswith(("error", "warning: 8"))]
    return {"exit": p.returncode, "wall_s": round(time.monotonic() - t0, 2),
            "peak_rss_mib": int(lines[-1]) // 1024, "said": said[-1][:200] if said else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="hostile-models.json", help="file name under docs/results/")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        one = frames(tmp)
        results = {}
        for k, (name, (det, pose)) in enumerate(cases(tmp).items()):
            results[name] = measure(one, tmp / f"run-{k}", det, pose)
            print(name, results[name], flush=True)
    save_json(args.name, {"machine": machine(), "frames": 16, "cases": results})


if __name__ == "__main__":
    main()
