"""The `phoenix-keypoints` command line: run, slurm, status, merge, sample.

Every expected problem (bad dataset, foreign run folder, missing model, interrupted run) ends in a
one-paragraph message and an exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from extract.dataset import SPLITS, DatasetError
from extract.holistic import ModelError
from jobs.rundir import RunDir, RunError

if TYPE_CHECKING:
    from jobs.runner import RunOptions


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


def _plan_args(p: argparse.ArgumentParser) -> None:
    """What the plan is made of: used when a run folder is planned, checked when it is resumed."""
    p.add_argument("--splits", type=_csv, help=f"comma-separated, default {','.join(SPLITS)}")
    p.add_argument("--limit-videos", type=_positive, help="first N videos of each split")
    p.add_argument("--videos", type=_csv, help="comma-separated video names")
    p.add_argument("--chunk-frames", type=_positive,
                   help="target frames per chunk (default 1000; whole videos)")
    p.add_argument("--model-complexity", type=int, choices=(0, 1, 2),
                   help="Holistic pose model (default 1, the only one mediapipe 0.10.21 ships)")


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
    _plan_args(r)
    r.add_argument("--fresh", action="store_true",
                   help="delete the run in --out (if any) and start again")
    r.add_argument("--allow-partial", action="store_true",
                   help="merge even if videos failed (run.json lists what is missing)")
    r.add_argument("--num-shards", type=_positive,
                   help="this node does one shard of S (fixed when planned); no merge")
    r.add_argument("--shard-index", type=_non_negative,
                   help="which shard, 0..S-1 (default: $SLURM_ARRAY_TASK_ID)")
    r.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local worker processes (default), or actors on Ray (extra [ray])")
    r.add_argument("--address",
                   help="with --backend ray: the cluster to join ('auto': the one started with "
                        "`ray start`); default: start a local Ray")

    sl = sub.add_parser("slurm", help="plan, then an sbatch array over the missing shards + merge job")
    sl.add_argument("--dataset", type=Path, help="folder holding annotations/ and features/")
    sl.add_argument("--out", type=Path, required=True,
                    help="run folder on a filesystem every node sees")
    sl.add_argument("--num-shards", type=_positive, required=True,
                    help="array size S, fixed in run.json when planned")
    _plan_args(sl)
    sl.add_argument("--max-parallel", type=_positive, help="at most K shards at once (--array=...%%K)")
    sl.add_argument("--time", help="time limit per shard and for the merge (sbatch --time)")
    sl.add_argument("--cpus-per-task", type=_positive,
                    help="CPUs per shard: one worker per CPU (per GPU: C/G)")
    sl.add_argument("--gpus-per-task", type=_positive, help="GPUs per shard")
    sl.add_argument("--partition", help="sbatch --partition")
    sl.add_argument("--account", help="sbatch --account")
    sl.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                    help="another sbatch option for both jobs, e.g. --sbatch-arg=--qos=long "
                         "(repeatable)")
    sl.add_argument("--submit", action="store_true",
                    help="submit with sbatch (default: print the scripts and the command)")

    s = sub.add_parser("status", help="progress of a run folder (safe beside a live run)")
    s.add_argument("--out", type=Path, required=True)

    m = sub.add_parser("merge", help="merge committed parts into keypoints.parquet + tensors")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--allow-partial", action="store_true",
                   help="merge although chunks are missing or videos failed")

    sa = sub.add_parser("sample", help="write a tiny demo dataset (PHOENIX-2014-T layout)")
    sa.add_argument("--out", type=Path, required=True)
    return p


def _options(args: argparse.Namespace) -> RunOptions:
    from jobs.runner import RunOptions

    return RunOptions(args.dataset, args.splits, args.videos, args.limit_videos,
                      args.chunk_frames, args.model_complexity)


def _run(args: argparse.Namespace) -> int:
    from jobs.runner import run

    if args.backend == "ray":
        from jobs.ray_backend import require_ray

        require_ray()
    elif args.address:
        raise RunError("--address is for --backend ray.")
    return run(RunDir(args.out), _options(args), args.num_gpus, args.workers_per_gpu,
               fresh=args.fresh, allow_partial=args.allow_partial, num_shards=args.num_shards,
               shard_index=args.shard_index, backend=args.backend, address=args.address)


def _slurm(args: argparse.Namespace) -> int:
    from jobs.runner import locked, prepare
    from jobs.slurm import SlurmOptions, slurm_command

    rd = RunDir(args.out)
    so = SlurmOptions(args.max_parallel, args.time, args.cpus_per_task, args.gpus_per_task,
                      args.partition, args.account, args.sbatch_arg)
    with locked(rd, "plan", wait=True):  # plan here, before any array task starts
        meta = prepare(rd, _options(args), num_shards=args.num_shards)
    return slurm_command(rd, meta, so, submit=args.submit)


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


COMMANDS = {"run": _run, "slurm": _slurm, "status": _status, "merge": _merge, "sample": _sample}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (DatasetError, RunError, ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 141


if __name__ == "__main__":
    sys.exit(main())
