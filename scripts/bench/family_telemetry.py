"""What onnxruntime's telemetry leaves behind when an installed family loads (issue 52 item 7): a
third-party family whose module imports onnxruntime and makes a session (tests/ort_toy_family.py,
installed as pip would: an entry point of group phoenix_keypoints.families), used by
`extract_keypoints(frames, estimator="toy")` in a plain `python` with a fresh HOME. Says the files
that appeared under HOME, the wall seconds and the peak RSS (GNU time's %M).

    python scripts/bench/family_telemetry.py [--name family-telemetry.json]   # under docs/results/
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent), str(HERE.parents[2] / "tests")]
from common import machine, save_json  # noqa: E402
from helpers import REPO, careful_env, family_env  # noqa: E402
from tiny_onnx import tiny_models  # noqa: E402

CODE = ("import numpy as np; from phoenix_keypoints import extract_keypoints; "
        "k = extract_keypoints(np.zeros((2, 32, 32, 3), np.uint8), estimator='toy'); "
        "print(len(k.status))")


def measure(tmp: Path) -> dict:
    """One plain python using the installed family; what it left under its fresh HOME."""
    site, home = tmp / "site", tmp / "home"
    site.mkdir()
    home.mkdir()
    env = family_env(site, "ort_toy", "toy = ort_toy_family:OrtToy")
    model = tiny_models(tmp / "m")["detector"]
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-c", CODE], cwd=tmp,
                       capture_output=True, text=True, timeout=300, env=careful_env(
                           {"HOME": str(home), "ORT_TOY_MODEL": str(model),
                            "PYTHONPATH": f"{env['PYTHONPATH']}{os.pathsep}{REPO}"}))
    lines = p.stderr.strip().splitlines()
    return {"exit": p.returncode, "wall_s": round(time.monotonic() - t0, 2),
            "peak_rss_mib": int(lines[-1]) // 1024 if lines and lines[-1].isdigit() else None,
            "rows": p.stdout.strip(),
            "files_under_home": sorted(str(f.relative_to(home)) for f in home.rglob("*")
                                       if f.is_file())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="family-telemetry.json", help="file name under docs/results/")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        result = measure(Path(t))
    print(result)
    save_json(args.name, {"machine": machine(), "case": "installed family importing onnxruntime, "
                          "extract_keypoints in a plain python", **result})


if __name__ == "__main__":
    main()
