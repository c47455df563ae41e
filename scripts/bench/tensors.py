"""Memory and time of `tensors` / pkl export as the dataset grows (shows memory stays flat).

Tiles a real keypoints.parquet (from a finished run) into a synthetic one of N frames, videos
renamed so that each copy is a new video, then writes tensor sets from it in a fresh process each
and reports wall time and peak RSS (ru_maxrss of that process).

    python scripts/bench/tensors.py --run RUN_DIR --frames 20000 100000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

CASES = {
    "default": "TensorSpec()",
    "compact-shoulders-interp": "TensorSpec(PointSet.ask('compact-187'), 'shoulders', "
                                "'interpolate', 3)",
}

CHILD = """
import json, resource, sys, time
from pathlib import Path
from phoenix_keypoints.extract.families.holistic.points import point_table
from phoenix_keypoints.extract.keypoints.points import PointSet
from phoenix_keypoints.extract.outputs.tensors import TensorSpec, write_tensors
kp, out, case = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
t0 = time.monotonic()
if case == "pkl":
    from phoenix_keypoints.extract.outputs.export import write_pkl
    from phoenix_keypoints.extract.outputs.loader import load_split
    meta = json.loads((out / "points.json").read_text())
    write_pkl((load_split(out.parent, s, mmap=False) for s in meta["splits"]), out.parent / "k.pkl")
else:
    write_tensors(kp, out, point_table(), None, eval(sys.argv[4]))
print(json.dumps({"seconds": time.monotonic() - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def tile(src: Path, dest: Path, frames: int) -> int:
    """Copies of src's rows, videos renamed per copy, until `frames` rows; returns rows written."""
    base = pq.read_table(src)
    rows = 0
    with pq.ParquetWriter(dest, base.schema, compression="zstd") as w:
        copy = 0
        while rows < frames:
            t = base.slice(0, min(base.num_rows, frames - rows))
            vid = pc.binary_join_element_wise(t["video"], pa.scalar(f"~{copy}"), "")
            i = t.schema.get_field_index("video")
            t = t.set_column(i, t.schema.field(i), vid)
            w.write_table(t, row_group_size=1000)
            rows += t.num_rows
            copy += 1
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="a finished run folder to tile")
    ap.add_argument("--frames", type=int, nargs="+", default=[20000, 100000])
    args = ap.parse_args()
    repo = Path(__file__).resolve().parents[2]
    print(f"parent peak RSS before: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    for n in args.frames:
        with tempfile.TemporaryDirectory(dir=args.run.parent) as tmp:
            kp = Path(tmp) / "keypoints.parquet"
            t0 = time.monotonic()
            rows = tile(args.run / "keypoints.parquet", kp, n)
            print(f"\n{rows} frames, {kp.stat().st_size / 1e6:.0f} MB parquet "
                  f"(tiled in {time.monotonic() - t0:.1f} s)")
            for case in [*CASES, "pkl"]:
                out = Path(tmp) / "tensors"
                cmd = [sys.executable, "-c", CHILD, str(kp), str(out), case, CASES.get(case, "")]
                res = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=True)
                r = json.loads(res.stdout.strip().splitlines()[-1])
                print(f"  {case:26s} {r['seconds']:7.1f} s   peak RSS {r['peak_rss_mb']:6.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
