"""`run`: plan once, extract what is not committed yet, merge. The same call resumes after a crash.

A run folder belongs to one dataset and one set of options (its fingerprint). Asking for anything
else in the same folder is refused unless --fresh says to start over, so a resume can never mix
parts of two different runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extract.dataset import SPLITS, Dataset, discover
from extract.holistic import HolisticOptions, check_model
from jobs.devices import worker_slots
from jobs.local import LocalExecutor
from jobs.merge import CorruptPart, merge, plan_chunks, scan_parts
from jobs.parts import remove_stale_temps
from jobs.plan import make_plan
from jobs.rundir import RUN_FORMAT, RunDir, RunError, versions
from jobs.shards import resolve_shard, shard_chunks

DEFAULT_CHUNK_FRAMES = 1000


@dataclass
class RunOptions:
    """What decides a run's output (fingerprinted), as asked on the command line (None: not asked)."""

    dataset: Path | None = None
    splits: tuple[str, ...] | None = None
    videos: tuple[str, ...] | None = None
    limit_videos: int | None = None
    chunk_frames: int | None = None
    model_complexity: int | None = None

    def resolved(self) -> dict[str, Any]:
        return {
            "splits": list(self.splits or SPLITS),
            "videos": list(self.videos) if self.videos else None,
            "limit_videos": self.limit_videos,
            "chunk_frames": self.chunk_frames or DEFAULT_CHUNK_FRAMES,
            "holistic": HolisticOptions(model_complexity=self.model_complexity or 1).as_dict(),
        }


def run_fingerprint(dataset_fp: str, options: dict[str, Any]) -> str:
    blob = json.dumps({"dataset": dataset_fp, "options": options}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


@contextmanager
def locked(rd: RunDir, name: str = "run", shared: bool = False, wait: bool = False) -> Iterator[None]:
    """One coordinator per run folder (per shard): a second one is refused, not interleaved.

    Shards take the "run" lock shared and their own "shard-I" lock exclusive: shards on other nodes
    do not block each other, two copies of one shard do, and a whole-run `run` (exclusive) waits
    for none of them but is refused while any runs. `wait` blocks instead of refusing (planning).
    """
    rd.path.mkdir(parents=True, exist_ok=True)
    with open(rd.path / f".{name}.lock", "a+") as f:  # readable too: NFS emulates LOCK_SH with it
        try:
            fcntl.flock(f, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                        | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            raise RunError(
                f"another phoenix-keypoints process is running on {rd.path} ({name}); wait for "
                "it, or stop it first."
            ) from None
        yield


_OUR_FILES = ("run.json", "plan.parquet", "progress.json", "keypoints.parquet")
_OUR_DIRS = ("parts", "tensors", "tensors.tmp")


def clear_run(rd: RunDir) -> None:
    """--fresh: remove this tool's files from the folder (and nothing else the user put there)."""
    for name in _OUR_FILES:
        (rd.path / name).unlink(missing_ok=True)
    for name in _OUR_DIRS:
        shutil.rmtree(rd.path / name, ignore_errors=True)


def _dataset_summary(ds: Dataset) -> dict[str, Any]:
    return {
        "root": str(ds.root.resolve()),
        "layout": ds.layout,
        "fingerprint": ds.fingerprint(),
        "videos": len(ds.videos),
        "frames": ds.num_frames,
        "problems": {v.name: v.problem for v in ds.videos if v.problem},
        "unlisted_folders": ds.unlisted,
    }


def prepare(rd: RunDir, opts: RunOptions, fresh: bool = False,
            num_shards: int | None = None) -> dict[str, Any]:
    """Load the run in rd, or plan it; refuse a folder that holds another run unless fresh."""
    if fresh:
        clear_run(rd)
    if rd.exists():
        meta = rd.load()
        asked = opts.dataset.resolve() if opts.dataset else Path(meta["dataset"]["root"])
        mine = dict(meta["options"])
        want = RunOptions(
            asked, opts.splits or tuple(mine["splits"]),
            opts.videos or (tuple(mine["videos"]) if mine["videos"] else None),
            opts.limit_videos if opts.limit_videos is not None else mine["limit_videos"],
            opts.chunk_frames or mine["chunk_frames"],
            opts.model_complexity or mine["holistic"]["model_complexity"],
        ).resolved()
        diffs = [k for k in want if want[k] != mine[k]]
        if str(asked) != meta["dataset"]["root"]:
            diffs.insert(0, f"dataset ({meta['dataset']['root']})")
        if num_shards is not None and num_shards != meta.get("num_shards", 1):
            diffs.append(f"num_shards (fixed at {meta.get('num_shards', 1)} when planned)")
        if diffs:
            raise RunError(
                f"{rd.path} holds a run with other {', '.join(diffs)}. Use another --out, or "
                "--fresh to delete that run and start again."
            )
        ds = discover(Path(meta["dataset"]["root"]), mine["splits"], mine["videos"],
                      mine["limit_videos"])
        if ds.fingerprint() != meta["dataset"]["fingerprint"]:
            raise RunError(
                f"the dataset at {ds.root} changed since {rd.path} was planned (corpus or frame "
                "files differ). Use --fresh to start again on the data as it is now."
            )
        return meta
    if opts.dataset is None:
        raise RunError(f"{rd.path} holds no run yet: pass --dataset PHOENIX_ROOT to start one.")
    if rd.path.exists() and any(rd.path.glob("parts/*.parquet")):
        raise RunError(f"{rd.path} has parts but no run.json; use --fresh or another --out.")
    options = opts.resolved()
    t0 = time.monotonic()
    ds = discover(opts.dataset, options["splits"], options["videos"], options["limit_videos"])
    check_model(HolisticOptions(**options["holistic"]))  # after the csv checks: imports mediapipe
    plan = make_plan(ds, options["chunk_frames"])
    summary = _dataset_summary(ds)
    chunks = [c for c in plan["chunk"].to_pylist() if c >= 0]
    meta = {
        "format": RUN_FORMAT,
        "created": time.time(),
        "dataset": summary,
        "options": options,
        "fingerprint": run_fingerprint(summary["fingerprint"], options),
        "num_shards": num_shards or 1,
        "versions": versions(),
        "plan": {"chunks": len(set(chunks)), "videos": len(ds.videos),
                 "frames": ds.num_frames, "seconds": round(time.monotonic() - t0, 3)},
    }
    rd.path.mkdir(parents=True, exist_ok=True)
    rd.save_plan(plan)
    rd.save(meta)  # run.json last: its presence means the plan is complete
    return meta


def extract_missing(rd: RunDir, meta: dict[str, Any], num_gpus: int | None,
                    workers_per_gpu: int | None, shard: int | None = None,
                    backend: str = "local", address: str | None = None,
                    retry_failed: bool = False) -> tuple[int, dict]:
    """Run every chunk (of this shard) that has no trusted part. Returns (exit code, info).

    retry_failed: also redo chunks whose part lists failed videos (after the user fixed their
    frames); the old part stays until the new one replaces it, so a crash loses nothing.
    """
    plan = rd.load_plan()
    num_shards = meta.get("num_shards", 1)
    only = None
    if shard is not None:  # read only this shard's parts: the others may be being written
        only = set(shard_chunks(plan_chunks(plan), num_shards, shard))
    state = scan_parts(rd, meta, plan, only=only)
    mine = sorted(state.chunks if only is None else only)
    mine_set = set(mine)
    for chunk, why in state.rejected.items():
        if chunk in mine_set:
            print(f"part of chunk {chunk} not trusted ({why}): moved to parts/rejected/, redoing it",
                  file=sys.stderr)
    rd.parts_dir.mkdir(exist_ok=True)
    remove_stale_temps(rd, mine_set)
    retry = {c for c in mine if c in state.done and state.done[c].failed} if retry_failed else set()
    if retry:
        names = sorted(v for c in retry for v in state.done[c].failed)
        print(f"--retry-failed: redoing {len(retry)} chunk(s) with failed video(s): "
              f"{', '.join(names[:10])}{' ...' if len(names) > 10 else ''}", file=sys.stderr)
    todo = [c for c in mine if c not in state.done or c in retry]
    frames = {c: sum(state.chunks[c].values()) for c in mine}
    total = sum(frames.values())
    done_frames = sum(state.done[c].rows for c in mine if c in state.done and c not in retry)
    label = f"shard {shard}/{num_shards}" if shard is not None else ""
    tag = f"shard-{shard}" if shard is not None else ""
    ex: Any
    if backend == "ray":
        from jobs.ray_backend import RayExecutor

        ex = RayExecutor(rd, num_gpus, workers_per_gpu, address, label=label, tag=tag)
    else:
        ex = LocalExecutor(rd, worker_slots(num_gpus, workers_per_gpu), label=label, tag=tag)
    t0 = time.monotonic()
    out = ex.run(todo, frames, {}, total, done_frames)
    info = {"todo": len(todo), "done": len(out.done),
            "workers": ex.workers if backend == "ray" else len(ex.slots),
            "seconds": time.monotonic() - t0, "failed": {v: w for f in out.failed.values()
                                                         for v, w in f.items()}}
    if out.signal:
        return 128 + out.signal, info
    if out.error:
        print(f"error: {out.error}", file=sys.stderr)
        return 1, info
    return 0, info


def failed_message(failed: dict[str, str]) -> str:
    """What to tell the user about videos that kept killing their worker, and what to do."""
    shown = "; ".join(f"{v} ({why})" for v, why in sorted(failed.items())[:10])
    return (
        f"{len(failed)} video(s) failed and have no rows: {shown}"
        f"{' ...' if len(failed) > 10 else ''}. Check their frames (the worker logs in logs/ "
        "show MediaPipe's last words), fix or remove the bad frames, then run the same command "
        "with --retry-failed; or add --allow-partial to merge without them (run.json's merge "
        "section then lists them)."
    )


def run(rd: RunDir, opts: RunOptions, num_gpus: int | None, workers_per_gpu: int | None,
        fresh: bool = False, allow_partial: bool = False, retry_failed: bool = False,
        num_shards: int | None = None,
        shard_index: int | None = None, backend: str = "local", address: str | None = None) -> int:
    """The `run` command: plan, extract, merge on this node (or Ray); one shard only with shards."""
    sharded = resolve_shard(num_shards, shard_index)
    if sharded:
        return run_shard(rd, opts, *sharded, num_gpus, workers_per_gpu, fresh, backend, address)
    with locked(rd):
        meta = prepare(rd, opts, fresh)
        _report_problems(meta)
        for attempt in range(3):  # a part found corrupt while merging is redone, then merged
            code, info = extract_missing(rd, meta, num_gpus, workers_per_gpu, backend=backend,
                                         address=address,
                                         retry_failed=retry_failed and attempt == 0)
            if code:
                if code in (130, 143):
                    print(f"stopped; run the same command to resume ({info['done']} chunk(s) "
                          "committed this time).", file=sys.stderr)
                return code
            if not allow_partial:
                failed = scan_parts(rd, meta, rd.load_plan(), move_bad=False).failed
                if failed:
                    print(f"error: {failed_message(failed)}", file=sys.stderr)
                    return 1
            try:
                result = merge(rd, allow_partial=allow_partial)
            except CorruptPart as e:
                print(f"warning: {e.why}; redoing chunk {e.chunk}", file=sys.stderr)
                continue
            except RunError as e:
                print(f"error: {e}", file=sys.stderr)
                return 1
            _summary(rd, result)
            return 1 if result["failed_videos"] else 0
        print("error: parts keep failing their checksums; check the disk.", file=sys.stderr)
        return 1


def plan_shared(rd: RunDir, opts: RunOptions, num_shards: int) -> dict[str, Any]:
    """Load the run, or plan it once for num_shards shards when --dataset says what to plan.

    The `slurm` command plans before it submits, so array tasks normally only load. A task started
    by hand with --dataset before any plan exists plans under a blocking lock; should the shared
    filesystem not honour the lock, two planners write the same deterministic plan and run.json
    (same fingerprint), so either one's parts are trusted by the other.
    """
    if rd.exists():
        return prepare(rd, opts, num_shards=num_shards)
    if opts.dataset is None:
        raise RunError(
            f"{rd.path} holds no plan yet. Make it before the shards start: `phoenix-keypoints "
            f"slurm --dataset PHOENIX_ROOT --out {rd.path} --num-shards {num_shards}` (plans, "
            "then writes or submits the array), or pass --dataset to this shard."
        )
    with locked(rd, "plan", wait=True):
        return prepare(rd, opts, num_shards=num_shards)


def run_shard(rd: RunDir, opts: RunOptions, num_shards: int, shard: int, num_gpus: int | None,
              workers_per_gpu: int | None, fresh: bool = False, backend: str = "local",
              address: str | None = None) -> int:
    """`run --num-shards S --shard-index I`: extract shard I's chunks into the shared run folder.

    No merge here: the merge job (or `merge` on a login node) does it once every shard is complete.
    """
    if fresh:
        raise RunError(
            "--fresh cannot be used with --num-shards: one shard would delete what the others "
            f"wrote. Delete {rd.path} (or use another --out) before submitting the array."
        )
    with locked(rd, "run", shared=True), locked(rd, f"shard-{shard}"):
        meta = plan_shared(rd, opts, num_shards)
        if shard == 0:
            _report_problems(meta)
        code, info = extract_missing(rd, meta, num_gpus, workers_per_gpu, shard=shard,
                                     backend=backend, address=address)
    if code:
        if code in (130, 143):
            print(f"shard {shard}/{num_shards} stopped; run it again to resume ({info['done']} "
                  "chunk(s) committed this time).", file=sys.stderr)
        return code
    if info["failed"]:
        print(f"warning: shard {shard}: {len(info['failed'])} video(s) failed: "
              f"{', '.join(sorted(info['failed'])[:5])}", file=sys.stderr)
    print(f"shard {shard}/{num_shards} complete ({info['done']} chunk(s) done now). Once every "
          f"shard is: `phoenix-keypoints merge --out {rd.path}`.")
    return 0


def _report_problems(meta: dict[str, Any]) -> None:
    problems = meta["dataset"]["problems"]
    if problems:
        shown = ", ".join(f"{v} ({p})" for v, p in list(problems.items())[:5])
        print(f"warning: {len(problems)} listed video(s) cannot be processed: {shown}"
              f"{' ...' if len(problems) > 5 else ''}", file=sys.stderr)
    unlisted = meta["dataset"]["unlisted_folders"]
    if unlisted:
        print(f"note: {len(unlisted)} folder(s) on disk are in no corpus file and are skipped: "
              f"{', '.join(unlisted[:5])}", file=sys.stderr)


def _summary(rd: RunDir, result: dict[str, Any]) -> None:
    meta = rd.load()
    per_split = ", ".join(f"{s} {n}" for s, n in sorted(result["frames_per_split"].items()))
    print(f"keypoints: {rd.keypoints_path} ({result['rows']} frames: {per_split})")
    print(f"tensors:   {rd.tensors_dir}/")
    if meta["dataset"]["problems"]:
        print(f"videos not on disk or without frames: {len(meta['dataset']['problems'])} "
              "(listed in run.json under dataset.problems)")
    if result["failed_videos"]:
        print(f"FAILED videos (no rows): {', '.join(sorted(result['failed_videos']))}",
              file=sys.stderr)
    if result["partial"]:
        print("partial merge: run.json's merge section lists what is missing", file=sys.stderr)
