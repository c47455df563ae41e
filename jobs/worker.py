"""A worker process: one Holistic graph, chunks in, committed parts out.

Started with the spawn method (a graph inherited through fork crashes), pinned to its CPU(s) before
MediaPipe starts a thread, with CUDA_VISIBLE_DEVICES already set by the coordinator. It talks to the
coordinator over one pipe: it says which video it is in (so a crash can be pinned on a video),
how many frames it did, and when a part is committed.

SIGINT is ignored (Ctrl-C reaches the whole process group; the coordinator decides). SIGTERM makes
the worker stop at the next frame boundary: the chunk in flight is dropped, its temp file removed.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import defaultdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from extract.holistic import Extractor, HolisticOptions
from extract.video import Block, extract_video
from jobs import faults
from jobs.parts import PartInfo, write_part
from jobs.rundir import RunDir

PROGRESS_EVERY_S = 0.5


class Stop(BaseException):
    """SIGTERM arrived: leave at the next clean point."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Stop()


def load_chunks(rd: RunDir) -> dict[int, list[dict[str, Any]]]:
    """chunk -> its videos (plan rows) in output order."""
    chunks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rd.load_plan().select(["chunk", "split", "video", "folder", "files"]).to_pylist():
        if row["chunk"] >= 0:
            chunks[row["chunk"]].append(row)
    return chunks


def process_chunk(
    extractor: Extractor,
    rd: RunDir,
    root: Path,
    fingerprint: str,
    chunk: int,
    videos: list[dict[str, Any]],
    failed: dict[str, str],
    send: Any,
) -> PartInfo:
    """Extract a chunk's videos (minus those already failed) and commit its part."""
    out = Block()
    pending = 0
    last = time.monotonic()

    def on_frame() -> None:
        nonlocal pending, last
        pending += 1
        faults.after_frame()
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY_S:
            send(("frames", pending))
            pending, last = 0, now

    for v in videos:
        if v["video"] in failed:
            continue
        send(("video", chunk, v["video"]))
        faults.on_video_start(v["video"])
        extract_video(extractor, root, v["split"], v["video"], v["folder"], v["files"], out,
                      on_frame)
    if pending:
        send(("frames", pending))
    send(("writing", chunk))
    info = PartInfo(chunk, len(out), dict(failed))
    write_part(rd.part_path(chunk), out.to_table(), info, fingerprint)
    return info


def _die_with_parent() -> None:
    """Linux: get SIGTERM when the coordinator dies, so no orphan keeps working on a chunk."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _log_to_file(path: Path) -> None:
    """MediaPipe's C++ logs go to fd 2; send them to a per-slot log, keeping the terminal's bar clean."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


class ChunkWorker:
    """One Holistic graph bound to a run folder, doing one chunk per call.

    What a local worker process and a Ray actor share: both build it once and call `run` per chunk,
    so the parts they write are the same and a run can move between the two.
    """

    def __init__(self, run_dir: Path) -> None:
        import cv2

        cv2.setNumThreads(1)
        self.rd = RunDir(Path(run_dir))
        self.meta = self.rd.load()
        self.root = Path(self.meta["dataset"]["root"])
        self.chunks = load_chunks(self.rd)
        self.extractor = Extractor(HolisticOptions(**self.meta["options"]["holistic"]),
                                   num_threads=1)

    def run(self, chunk: int, failed: dict[str, str], send: Any) -> tuple:
        """("done", chunk, rows), or ("error", chunk, why) when the part could not be written."""
        try:
            info = process_chunk(self.extractor, self.rd, self.root, self.meta["fingerprint"],
                                 chunk, self.chunks[chunk], failed, send)
        except OSError as e:  # the part could not be written: not the chunk's fault
            return ("error", chunk, f"cannot write {e.filename or 'part'}: {e.strerror or e}")
        return ("done", chunk, info.rows)

    def close(self) -> None:
        self.extractor.close()

    def __enter__(self) -> ChunkWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def worker_main(slot: int, conn: Connection, run_dir: str, cpus: list[int] | None,
                log_name: str = "") -> None:
    """Entry point of a worker process (spawned)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _die_with_parent()
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # it died before the line above
        return
    try:
        _log_to_file(Path(run_dir) / "logs" / f"{log_name}worker-{slot}.log")
        if cpus:
            os.sched_setaffinity(0, cpus)
        with ChunkWorker(Path(run_dir)) as worker:
            conn.send(("ready", os.getpid()))
            while True:
                msg = conn.recv()
                if msg is None:
                    return
                _, chunk, failed = msg
                conn.send(worker.run(chunk, failed, conn.send))
    except Stop:
        return
    except (EOFError, BrokenPipeError):  # the coordinator is gone: nothing left to do
        return
    except Exception as e:  # a bug or a frame Python cannot handle: report it, die like a crash
        try:
            conn.send(("exception", f"{type(e).__name__}: {e}"))
        finally:
            os._exit(70)
