"""A worker: one estimator (a family's graph or models), chunks in, committed
parts out, events to its coordinator.

ChunkWorker is what a local worker process and a Ray actor share: both build it once and call `run`
per chunk, so the parts they write are the same and a run can move between backends. It needs no
plan: each ChunkTask carries its videos' frame files, so workers start (import the family's library,
build its graph or load its models) while the coordinator is still planning.

A local worker process is started with the spawn method (a graph inherited through fork crashes),
pinned to its CPU before the estimator starts a thread, with CUDA_VISIBLE_DEVICES already set by the
coordinator. SIGINT is ignored (Ctrl-C reaches the whole process group; the coordinator decides);
SIGTERM makes it stop at the next frame boundary: the chunk in flight is dropped, its temp removed.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract import sources
from phoenix_keypoints.extract.keypoints.contract import EstimatorExtras
from phoenix_keypoints.extract.keypoints.estimator import (
    RUNTIME,
    ModelFileError,
    estimator_name,
    open_estimator,
)
from phoenix_keypoints.extract.keypoints.frames import Frame
from phoenix_keypoints.extract.keypoints.model_calls import set_last_word, set_limits
from phoenix_keypoints.extract.keypoints.versions import DECODER, value_versions
from phoenix_keypoints.extract.keypoints.video_rows import (
    Block,
    KeepsFailing,
    Video,
    extract_videos,
)
from phoenix_keypoints.jobs import faults
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.made_under import MadeUnder
from phoenix_keypoints.jobs.rundir.parts import PartInfo, write_part
from phoenix_keypoints.jobs.schedule.events import (
    ChunkTask,
    Committed,
    Event,
    FramesDone,
    Ready,
    Refused,
    VideoRef,
    VideoStarted,
    WriteFailed,
    Writing,
)

PROGRESS_EVERY_S = 0.5


@dataclass(frozen=True)
class WorkerError:
    """A local worker's last words before it exits like a crash (a bug, a frame Python chokes on)."""

    slot: int
    text: str


class Stop(BaseException):
    """SIGTERM arrived: leave at the next clean point."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Stop()


class _FrameCounter:
    """Reports frames done: the first at once (start-up ends there), then every PROGRESS_EVERY_S."""

    def __init__(self, slot: int, send: Callable[[Event], None]) -> None:
        self.slot, self.send = slot, send
        self.pending, self.last, self.first = 0, time.monotonic(), True

    def __call__(self) -> None:
        self.pending += 1
        faults.after_frame()
        now = time.monotonic()
        if self.first or now - self.last >= PROGRESS_EVERY_S:
            self.flush()
            self.last, self.first = now, False

    def flush(self) -> None:
        if self.pending:
            self.send(FramesDone(self.slot, self.pending))
            self.pending = 0


class ChunkWorker:
    """One estimator bound to a run folder's parts/, doing one chunk per call.

    `settings`: the estimator's settings dict (extract/keypoints/estimator.py; the default
    family's options dict as it was)."""

    def __init__(self, slot: int, run_dir: Path, settings: dict[str, Any]) -> None:
        import cv2

        cv2.setNumThreads(1)
        self.slot = slot
        self.rd = RunDir(Path(run_dir))
        self.rd.use_archive_index(write=False, build=False, lazy=True)
        self.extractor_settings = settings
        run = settings.get(RUNTIME, {})  # a family that batches: how long and large a call may be
        set_limits(run.get("model_deadline"), run.get("model_memory"))
        self.extractor = open_estimator(settings, num_threads=1)
        self.versions = value_versions(estimator_name(settings))  # as this process has them
        # how its values are computed (a batching family's device, provider, batch shape)
        self.execution = EstimatorExtras.execution(self.extractor)

    def run(self, task: ChunkTask, send: Callable[[Event], None]
            ) -> Committed | WriteFailed | Refused:
        """Extract the chunk's videos (minus task.skip) and commit its part; a model that fails
        (or keeps failing) stops the run instead of costing the frames."""
        why = self._refusal(task)
        if why:
            return Refused(self.slot, task.chunk, why)
        try:
            return self._run(task, send)
        except ModelFileError as e:
            return Refused(self.slot, task.chunk, str(e))
        except KeepsFailing as e:
            return Refused(self.slot, task.chunk, str(e), 2 if e.model_fault else 1)

    def _run(self, task: ChunkTask, send: Callable[[Event], None]) -> Committed | WriteFailed:
        out = Block(declaration=self.extractor.declaration)
        counter = _FrameCounter(self.slot, send)
        root = Path(task.root)
        videos = [v for v in task.videos if v.name not in task.skip]
        def opened(v: VideoRef) -> Iterable[Frame]:
            send(VideoStarted(self.slot, task.chunk, v.name))
            faults.on_video_start(v.name)
            return faults.frames(v.name, sources.get(v.source).frames(
                root, v.ref(task.max_pixels, task.max_scans)))

        extract_videos(self.extractor, (Video(v.split, v.name, v.num_frames, v.folder,
                                              partial(opened, v))
                                        for v in (videos[k] for k in read_order(root, videos))),
                       out, counter, lockstep=not task.one_by_one)
        counter.flush()
        send(Writing(self.slot, task.chunk))
        info = PartInfo.of_rows(task.chunk, out.video, out.status, dict(task.skip),
                                self.extractor.settings, self._versions(videos), self.execution)
        try:
            write_part(self.rd.part_path(task.chunk), in_plan_order(out.to_table(), videos), info,
                       task.fingerprint)
        except OSError as e:  # the part could not be written: not the chunk's fault
            return WriteFailed(self.slot, task.chunk,
                               f"cannot write {e.filename or 'part'}: {e.strerror or e}")
        return Committed(self.slot, task.chunk, info.rows)

    def _refusal(self, task: ChunkTask) -> str:
        """Why this worker may not extract the run's chunks ('' where it may): it has other versions
        of what the values depend on than the run (a Ray actor on a node with another install), or
        computes them otherwise (another device, GPU model, provider options or batch shape). The
        rule and its words are MadeUnder's (jobs/rundir/made_under.py)."""
        run = MadeUnder.of_worker(task.versions, task.execution)
        here = MadeUnder.of_worker(self._versions(list(task.videos)), self.execution)
        return run.refusal(here, f"worker {self.slot} on {socket.gethostname()}")

    def _versions(self, videos: list[VideoRef]) -> dict[str, str]:
        """What this chunk's values depend on: the estimator's, and the decoder's where it decoded
        video files."""
        if not any(v.source == "video" for v in videos):
            return self.versions
        from phoenix_keypoints.extract.sources.video import decoder_version

        return {**self.versions, DECODER: decoder_version()}

    def ready(self) -> Ready:
        return Ready(self.slot, os.getpid(), socket.gethostname(),
                     os.environ.get("CUDA_VISIBLE_DEVICES", ""), tuple(sorted(os.sched_getaffinity(0))),
                     self._runtime())

    def _runtime(self) -> dict | None:
        """How this worker's estimator runs (run.json `extraction.runtime`), where it batches."""
        size = EstimatorExtras.batch_size(self.extractor)
        if size is None:
            return None
        asked = self.extractor_settings.get("runtime", {})
        return {"batch_size": size, "device": asked.get("device", "auto"),
                "providers": EstimatorExtras.providers(self.extractor),
                **{k: asked[k] for k in ("gpu_memory", "chosen") if k in asked},
                "execution": self.execution}

    def close(self) -> None:
        self.extractor.close()

    def __enter__(self) -> ChunkWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_order(root: Path, videos: list[VideoRef]) -> list[int]:
    """The order to extract a chunk's videos in: the source's own when it has one (an archive's:
    forward through the file), else the plan's. Rows are written in plan order whatever it is."""
    kinds = {v.source for v in videos}
    source = sources.get(kinds.pop()) if len(kinds) == 1 else None
    order = getattr(source, "read_order", None)
    return order(root, [v.ref() for v in videos]) if order else list(range(len(videos)))


def in_plan_order(table: pa.Table, videos: list[VideoRef]) -> pa.Table:
    """A chunk's rows with its videos in plan order (a video's own rows keep their order)."""
    rank = {(v.split, v.name): k for k, v in enumerate(videos)}  # a name can be in two splits
    keys = np.array([rank[sv] for sv in zip(table["split"].to_pylist(), table["video"].to_pylist(),
                                            strict=True)])
    if keys.size == 0 or (np.diff(keys) >= 0).all():
        return table
    return table.take(pa.array(np.argsort(keys, kind="stable")))


class _NoPandas:
    """A meta path finder that answers `import pandas` with ImportError while it is installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas left out of this worker", name=name)


def skip_pandas_probe() -> None:
    """Tell pyarrow once that this process has no pandas, so that it never imports it.

    pyarrow's first `pa.array()` (and its first `to_numpy()`) asks whether its values are pandas'
    by importing pandas: ~0.3 s of CPU per worker (docs/results/, the pieces benchmark of
    2026-11-27), for a question whose answer here is always no: a worker's values are lists and
    numpy arrays with their types given, and no pandas object can exist before pandas is imported.
    The finder is there for that one call only: anything that does import pandas later gets it, and
    pyarrow imports it again where it needs it (`to_pandas`)."""
    if "pandas" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([], pa.int8()).to_numpy()  # both ask: to_numpy by its own route (pyarrow 21)
    finally:
        sys.meta_path.remove(finder)


def _die_with_parent() -> None:
    """Linux: get SIGTERM when the coordinator dies, so no orphan keeps working on a chunk."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def log_to_file(path: Path) -> None:
    """A family's C++ logs go to fd 2; send them to a per-slot log, keeping the terminal's bar clean."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def worker_main(slot: int, conn: Connection, run_dir: str, cpus: list[int], options: dict,
                log_path: str) -> None:
    """Entry point of a local worker process (spawned)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:  # from here: a SIGTERM while starting (a refused plan stops idle workers) is a quiet exit
        _die_with_parent()
        parent = multiprocessing.parent_process()
        if parent is not None and os.getppid() != parent.pid:  # it died before the line above
            return
        log_to_file(Path(log_path))
        # a model call that does not stop when told ends this process: its coordinator is told why
        set_last_word(lambda why: conn.send(Refused(slot, -1, why)))
        if cpus:
            os.sched_setaffinity(0, cpus)
        with ChunkWorker(slot, Path(run_dir), options) as worker:
            skip_pandas_probe()  # after the family's imports: one that imports pandas keeps it whole
            conn.send(worker.ready())
            while (task := conn.recv()) is not None:
                conn.send(worker.run(task, conn.send))
    except Stop:
        return
    except (EOFError, BrokenPipeError):  # the coordinator is gone: nothing left to do
        return
    except ModelFileError as e:  # a model file changed since the coordinator checked it
        conn.send(Refused(slot, -1, str(e)))
        return
    except Exception as e:  # a bug or a frame Python cannot handle: report it, die like a crash
        try:
            conn.send(WorkerError(slot, f"{type(e).__name__}: {e}"))
        finally:
            os._exit(70)
