"""The headline set in one go, written to one dated results file: the figures docs/performance.md
shows, measured together on one machine.

- run vs cores x bare MediaPipe loops vs pose-format, on real PHOENIX frames (run.py, 40x58);
- video input: the same three on 40 copies of signer_demo.mp4 (video.py);
- the release's tar.gz against its unpacked folder (archive.py, 15 copies of the two videos);
- merge + tensors of the whole release, fabricated without pixels (merge.py, fraction 1).

Each runs the README's command with default options, alternated with its references within the
script itself; the figures, the commands and the machine go to docs/results/headline-DATE.json.

    .venv/bin/python scripts/bench/headline.py [--repeat 2] [--only run,video,archive,merge]

About 40 minutes on 2 cores with --repeat 2. Nothing else should run meanwhile (the load average
before and after each part is recorded).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]
from common import REPO, RESULTS_DIR, loadavg, machine, save_json, table  # noqa: E402

HERE = Path(__file__).resolve().parent


def parts(repeat: int) -> dict[str, list[str]]:
    """part -> its script's command line (the result file name is added per part)."""
    return {
        "run": ["run.py", "--sizes", "40x58", "--repeat", str(repeat), "--json"],
        "video": ["video.py", "--videos", "40", "--repeat", str(repeat), "--json"],
        "archive": ["archive.py", "--copies", "15", "--repeat", str(repeat), "--save"],
        "merge": ["merge.py", "--fractions", "1", "--json"],
    }


def summary(name: str, res: dict) -> list[list]:
    """(what, figure) rows of one part's results."""
    if name in ("run", "video"):
        cycles = res["cycles"] if name == "video" else next(iter(res["sizes"].values()))["cycles"]
        rows = []
        for key in ("run_over_cores_bare", "run_over_pose_format"):
            got = [c[key] for c in cycles if key in c]
            if got:
                rows.append([f"{name}: {key.replace('_', ' ')}",
                             " / ".join(f"{x:.3f}" for x in got)])
        return rows
    if name == "archive":
        return [["archive: run from the tar.gz / from the folder (frames/s)",
                 str(res["run"]["archive_over_folder"])]]
    r = res["results"][0]
    return [["merge + tensors, whole release", f"{r['wall_s']} s wall, {r['peak_rss_mib_kernel']} MiB"]]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=2, help="alternated cycles per part")
    p.add_argument("--only", default="run,video,archive,merge")
    args = p.parse_args()
    stamp = time.strftime("%Y-%m-%d")
    out: dict = {"machine": machine(), "command": " ".join(sys.argv), "parts": {}}
    rows: list[list] = []
    for name, cmd in parts(args.repeat).items():
        if name not in args.only.split(","):
            continue
        tmp = f".headline-{name}.json"
        # run from the repository with its path relative, so the results name no folder of this host
        argv = [sys.executable, str((HERE / cmd[0]).relative_to(REPO)), *cmd[1:], tmp]
        print(f"== {name}: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
        before, t0 = loadavg(), time.monotonic()
        proc = subprocess.run(argv, check=False, cwd=REPO)
        if proc.returncode:
            print(f"{name} failed (exit {proc.returncode})", file=sys.stderr)
            return proc.returncode
        res = json.loads((RESULTS_DIR / tmp).read_text())
        (RESULTS_DIR / tmp).unlink()
        out["parts"][name] = {"command": " ".join(["scripts/bench/" + cmd[0], *cmd[1:-1]]),
                              "seconds": round(time.monotonic() - t0), "load_before": before,
                              "load_after": loadavg(), "results": res}
        rows += summary(name, res)
    out["summary"] = rows
    print(table(rows, ["what", "figure"]))
    print(save_json(f"headline-{stamp}.json", out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
