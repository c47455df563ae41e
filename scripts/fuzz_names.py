#!/usr/bin/env python3
"""The name fuzzer's long run: random-byte names in every position of every input kind.

Runs tests/name_fuzz.py's examples (the real `phoenix-keypoints run`, whole-body estimator on
tiny ONNX models built here) for seeds 0..N-1 over every (input kind, position) pair, or until
--minutes have passed, and writes a JSON summary: how many examples, exits by code, and every
example that broke a rule (exit outside what its position allows, a traceback or a worker's
death, a file opened or a folder listed outside the dataset, a raw control, bidi or zero-width
character or a byte that is no UTF-8 on the terminal, good frames lost or changed) with its name
in hex, so it can be built again. The last result is kept in docs/results/.

    .venv/bin/python scripts/fuzz_names.py --seeds 10 --out docs/results/fuzz-names.json

Exit status 0 when no example broke a rule, 1 otherwise. Needs ../shared/data (the frames and
the video the good data is made of).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]

import name_fuzz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds per (kind, position) pair")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: no limit)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "fuzz-names.json")
    ap.add_argument("--keep", action="store_true", help="keep the examples' folders")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fuzz-names-"))
    started, cpu0 = time.monotonic(), _cpu()
    material = name_fuzz.Material(work / "material")
    reference = name_fuzz.reference_run(material)
    results = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for kind, position in name_fuzz.PAIRS:
            if args.minutes and time.monotonic() - started > args.minutes * 60:
                break
            folder = work / f"{kind}-{position}-{seed}"
            results.append(name_fuzz.fuzz_one(material, reference, kind, position, seed, folder))
            if not results[-1]["problems"] and not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
            _progress(results)
    summary = _summary(results, args, time.monotonic() - started, _cpu() - cpu0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2, ensure_ascii=True) + "\n")
    print(f"{summary['examples']} example(s), {summary['broken']} broke a rule; "
          f"exits {summary['exits']}; {args.out}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if summary["broken"] else 0


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the runs and their workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _progress(results: list[dict]) -> None:
    r = results[-1]
    mark = "BROKEN " + "; ".join(r["problems"]) if r["problems"] else "ok"
    print(f"{len(results):5d} {r['kind']:>13} {r['position']:>9} exit {r['exit']} {mark}",
          file=sys.stderr, flush=True)


def _summary(results: list[dict], args: argparse.Namespace, wall: float, cpu: float) -> dict:
    broken = [r for r in results if r["problems"]]
    return {
        "what": "scripts/fuzz_names.py: random-byte names in every position of every input kind, "
                "the real `run` (whole-body, tiny ONNX models)",
        "command": f"scripts/fuzz_names.py --seeds {args.seeds} --first-seed {args.first_seed}"
                   + (f" --minutes {args.minutes:g}" if args.minutes else ""),
        "python": platform.python_version(), "machine": platform.machine(),
        # a worker started with `python -c` lists (and imports from) the current folder unless
        # PYTHONSAFEPATH=1 (Python 3.11+); the tool sets it for its workers (issue 37 item 1)
        "PYTHONSAFEPATH": os.environ.get("PYTHONSAFEPATH", ""),
        "examples": len(results), "broken": len(broken),
        "exits": dict(sorted(collections.Counter(str(r["exit"]) for r in results).items())),
        "pairs": len({(r["kind"], r["position"]) for r in results}),
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
        "broken_examples": broken,
    }


if __name__ == "__main__":
    sys.exit(main())
