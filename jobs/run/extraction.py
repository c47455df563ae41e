"""Extract a list of chunks on a backend: the pieces of a scheduled job put together.

The runner decides what to do (jobs.run.todo) and what it means afterwards; this builds the backend,
the queue, the progress display and the scheduler for one coordinator and runs them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa

from phoenix_keypoints.extract.keypoints.estimator import family
from phoenix_keypoints.jobs.run.todo import Work
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.made_under import MadeUnder
from phoenix_keypoints.jobs.rundir.runinfo import ExtractionInfo, RunInfo
from phoenix_keypoints.jobs.schedule.chunks import Chunks
from phoenix_keypoints.jobs.schedule.devices import worker_slots
from phoenix_keypoints.jobs.schedule.events import ChunkTask
from phoenix_keypoints.jobs.schedule.local import LocalBackend
from phoenix_keypoints.jobs.schedule.progress import Progress
from phoenix_keypoints.jobs.schedule.scheduler import Backend, Outcome, Scheduler, run
from phoenix_keypoints.jobs.schedule.workqueue import ChunkQueue, WorkQueue


def make_backend(rd: RunDir, settings: dict, kind: str, num_gpus: int | None,
                 workers_per_gpu: int | None, address: str | None = None,
                 shard: int | None = None) -> Backend:
    """Local worker processes (pinned per worker_slots), or actors on Ray."""
    prefix = f"shard-{shard}-" if shard is not None else ""
    if kind == "ray":
        from phoenix_keypoints.jobs.schedule.ray_backend import RayBackend

        return RayBackend(rd.path, settings, num_gpus, workers_per_gpu, address, prefix)
    return LocalBackend(rd.path, worker_slots(num_gpus, workers_per_gpu), settings, prefix)


def extract(rd: RunDir, info: RunInfo, plan: pa.Table, work: Work, backend: Backend,
            queue: WorkQueue | None = None, shard: int | None = None,
            on_commit: Callable[[int], None] | None = None) -> Outcome:
    """Run work.todo on backend until done, failed or stopped; never raises for a worker's death.

    queue: how chunks are handed out (default: work.todo in plan order, this coordinator alone).
    """
    chunks = Chunks.from_plan(plan, info.dataset.root, info.fingerprint, info.options.pixel_limit,
                             info.options.scan_limit, work.versions)
    chunks.execution = dict(work.execution)

    def task(chunk: int, skip: dict[str, str]) -> ChunkTask:
        """A chunk's task, bound to how the committed parts were computed or, with none, to how
        the first ready worker computes: one file, one computation (jobs/rundir/made_under.py)."""
        if shard is not None:  # the array's other shards commit meanwhile: their parts bind too
            chunks.execution = dict(MadeUnder.of_run(rd, info).execution) or chunks.execution
        if not chunks.execution:
            chunks.execution = first_execution(sched.outcome.runtime)
        return chunks.task(chunk, skip)

    label = f"shard {shard}/{info.num_shards}" if shard is not None else ""
    progress = Progress(label, backend.name, work.frames_total, work.frames_done, len(work.todo),
                        rd.progress_file(shard))
    sched = Scheduler(backend, queue or ChunkQueue(work.todo), task, progress,
                      chunks_wanted=len(work.todo), on_commit=on_commit,
                      start_advice=start_advice(info.options.estimator))
    outcome = run(sched)
    if shard is None:
        rd.update(lambda i: setattr(i, "extraction", milestones(outcome)))
    return outcome


def first_execution(runtime: dict[str, dict]) -> dict:
    """The execution record of the ready worker of the lowest slot ({} where none has one)."""
    for slot in sorted(runtime, key=int):
        if runtime[slot].get("execution"):
            return dict(runtime[slot]["execution"])
    return {}


def start_advice(estimator: str) -> str:
    """What to check when this family's workers die before they are ready: that the module its
    workers need imports (its IMPORTS: by default its class's module)."""
    module = family(estimator).IMPORTS
    return f"check that {module} imports on this machine (python -c 'import {module}')"


def milestones(outcome: Outcome) -> ExtractionInfo:
    """The outcome's timings as epoch seconds, for run.json (benchmarks read them there)."""
    offset = time.time() - time.monotonic()
    t = outcome.timings

    def wall(x: float | None) -> float | None:
        return None if x is None else round(x + offset, 3)

    return ExtractionInfo(outcome.workers, len(outcome.done), wall(t.first_frame),
                          wall(t.first_idle), wall(t.last_frame), round(time.time(), 3),
                          outcome.runtime)
