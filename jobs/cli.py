"""The `phoenix-keypoints` command line: run, status, merge, sample.

Every expected problem (bad dataset, foreign run folder, missing model, interrupted run) ends in a
one-paragraph message and an exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from extract.dataset import SPLITS, DatasetError
from extract.holistic import ModelError
from jobs.rundir import RunDir, RunError


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {n}")
    return n


def _non_negative(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {n}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="phoenix-keypoints",
        description="RWTH-PHOENIX-Weather 2014 T frames to MediaPipe Holistic keypoints.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="plan, extract what is not done yet, merge (resumes)")
    r.add_argument("--dataset", type=Path, help="folder holding annotations/ and features/")
    r.add_argument("--out", type=Path, required=True, help="run folder (created if missing)")
    r.add_argument("--num-gpus", type=_non_negative,
                   help="GPUs to pin workers to (default: visible GPUs, 0 when none)")
    r.add_argument("--workers-per-gpu", type=_positive,
                   help="workers per GPU, or CPU workers with 0 GPUs (default: usable CPUs)")
    r.add_argument("--splits", type=_csv, help=f"comma-separated, default {','.join(SPLITS)}")
    r.add_argument("--limit-videos", type=_positive, help="first N videos of each split")
    r.add_argument("--videos", type=_csv, help="comma-separated video names")
    r.add_argument("--chunk-frames", type=_positive,
                   help="target frames per chunk (default 1000; whole videos)")
    r.add_argument("--model-complexity", type=int, choices=(0, 1, 2),
                   help="Holistic pose model (default 1, the only one mediapipe 0.10.21 ships)")
    r.add_argument("--fresh", action="store_true",
                   help="delete the run in --out (if any) and start again")
    r.add_argument("--allow-partial", action="store_true",
                   help="merge even if videos failed (run.json lists what is missing)")
    r.add_argument("--retry-failed", action="store_true",
                   help="redo the chunks of videos that failed before (after fixing their frames)")

    s = sub.add_parser("status", help="progress of a run folder (safe beside a live run)")
    s.add_argument("--out", type=Path, required=True)

    m = sub.add_parser("merge", help="merge committed parts into keypoints.parquet + tensors")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--allow-partial", action="store_true",
                   help="merge although chunks are missing or videos failed")

    sa = sub.add_parser("sample", help="write a tiny demo dataset (PHOENIX-2014-T layout)")
    sa.add_argument("--out", type=Path, required=True)
    return p


def _run(args: argparse.Namespace) -> int:
    from jobs.runner import RunOptions, run

    opts = RunOptions(args.dataset, args.splits, args.videos, args.limit_videos,
                      args.chunk_frames, args.model_complexity)
    return run(RunDir(args.out), opts, args.num_gpus, args.workers_per_gpu, fresh=args.fresh,
               allow_partial=args.allow_partial, retry_failed=args.retry_failed)


def _status(args: argparse.Namespace) -> int:
    from jobs.status import render

    print(render(RunDir(args.out)))
    return 0


def _merge(args: argparse.Namespace) -> int:
    from jobs.merge import merge
    from jobs.runner import _summary, locked

    rd = RunDir(args.out)
    with locked(rd, "merge"):
        result = merge(rd, allow_partial=args.allow_partial)
    _summary(rd, result)
    return 0


def _sample(args: argparse.Namespace) -> int:
    from extract.sample import build_sample

    root = build_sample(args.out)
    print(root)
    return 0


COMMANDS = {"run": _run, "status": _status, "merge": _merge, "sample": _sample}


class Terminated(BaseException):
    """SIGTERM outside the extraction loop (planning, merging): unwind like Ctrl-C, exit 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)  # so temp files are removed on the way out
    try:
        return COMMANDS[args.command](args)
    except (DatasetError, RunError, ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an unexpected disk or permission problem: say what, not a traceback
        print(f"error: {e}. Fix it and run the same command again: it resumes.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except Terminated:
        print("terminated; run the same command again to resume", file=sys.stderr)
        return 143
    except BrokenPipeError:
        return 141


if __name__ == "__main__":
    sys.exit(main())
