"""The coordinator on one node: spawn pinned workers, feed them chunks, survive their deaths.

Each worker owns one slot (a GPU id for CUDA_VISIBLE_DEVICES and a CPU). The coordinator assigns one
chunk at a time to an idle worker over that worker's pipe, so it always knows which chunk, and from
the worker's reports which video, was in flight when a worker died. A death puts the chunk back and
starts a new worker in the slot; a video that kills its worker `max_attempts` times is marked failed
and its chunk is redone without it, so one bad video costs only itself.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from tqdm import tqdm

from jobs.devices import Slot
from jobs.rundir import RunDir, write_json
from jobs.worker import worker_main

HEARTBEAT_S = 2.0
STOP_GRACE_S = 30.0
MAX_START_FAILURES = 3


def signal_name(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


@dataclass
class Worker:
    slot: Slot
    proc: Any
    conn: Connection
    ready: bool = False
    pid: int | None = None
    chunk: int | None = None
    video: str | None = None
    frames: int = 0  # frames reported for the chunk in flight
    exception: str = ""


@dataclass
class Outcome:
    done: list[int] = field(default_factory=list)
    failed: dict[int, dict[str, str]] = field(default_factory=dict)  # chunk -> video -> why
    error: str = ""  # a fatal problem that stopped the run (disk full, workers cannot start)
    signal: int = 0  # SIGINT/SIGTERM that stopped the run


class LocalExecutor:
    """Runs chunks on worker processes of this machine."""

    def __init__(self, rd: RunDir, slots: list[Slot], max_attempts: int = 3,
                 label: str = "", tag: str = "") -> None:
        self.rd = rd
        self.slots = slots
        self.max_attempts = max_attempts
        self.label = label
        self.tag = tag  # "shard-I": own heartbeat file and worker logs beside other shards
        self._ctx = mp.get_context("spawn")
        self._stop = 0

    # --- processes -----------------------------------------------------------------------------
    def _start(self, slot: Slot) -> Worker:
        parent, child = self._ctx.Pipe()
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = slot.gpu  # inherited by the spawned interpreter
        try:
            proc = self._ctx.Process(
                target=worker_main, args=(slot.index, child, str(self.rd.path), list(slot.cpus),
                                         f"{self.tag}-" if self.tag else ""),
                name=f"phoenix-keypoints-worker-{slot.index}", daemon=True,
            )
            proc.start()
        finally:
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
        child.close()
        return Worker(slot, proc, parent)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._stop = signum

    # --- the loop ------------------------------------------------------------------------------
    def run(self, todo: list[int], chunk_frames: dict[int, int],
            failed: dict[int, dict[str, str]], frames_total: int, frames_done: int) -> Outcome:
        """Process chunks `todo` (chunk_frames: frames per chunk; failed: videos to leave out)."""
        out = Outcome(failed={c: dict(failed.get(c, {})) for c in todo})
        pending = deque(todo)
        crashes: Counter[tuple[int, str]] = Counter()
        start_failures = 0
        started = time.time()
        rate_mark = (time.monotonic(), frames_done)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        workers = [self._start(s) for s in self.slots[: max(1, len(todo))]] if todo else []
        bar = tqdm(total=frames_total, initial=frames_done, unit="frame", dynamic_ncols=True,
                   desc=self.label or "frames", smoothing=0.05,
                   mininterval=0.5 if os.isatty(2) else 30)
        last_beat = 0.0

        def beat(final: bool = False) -> None:
            nonlocal rate_mark
            now = time.monotonic()
            rate = (bar.n - rate_mark[1]) / max(1e-9, now - rate_mark[0])
            write_json(self.rd.progress_file(self.tag), {
                "pid": os.getpid(), "host": socket.gethostname(), "label": self.label,
                "started": started, "updated": time.time(), "running": not final,
                "frames_total": frames_total, "frames_done": bar.n, "frames_per_s": rate,
                "chunks_todo": len(todo), "chunks_done": len(out.done),
                "workers": [{"slot": w.slot.index, "pid": w.pid, "gpu": w.slot.gpu,
                             "cpus": list(w.slot.cpus), "chunk": w.chunk, "video": w.video}
                            for w in workers],
            })

        def fatal(msg: str) -> None:
            if not out.error:
                out.error = msg
            self._stop = self._stop or -1

        def on_message(w: Worker, msg: tuple) -> None:
            kind = msg[0]
            if kind == "ready":
                w.ready, w.pid = True, msg[1]
            elif kind == "video":
                w.video = msg[2]
            elif kind == "frames":
                w.frames += msg[1]
                bar.update(msg[1])
            elif kind == "writing":
                w.video = None
            elif kind == "done":
                out.done.append(msg[1])
                w.chunk, w.video, w.frames = None, None, 0
            elif kind == "error":
                fatal(f"chunk {msg[1]}: {msg[2]}. Free space or fix permissions, then run the "
                      "same command again to resume.")
                bar.update(-w.frames)
                w.chunk, w.video, w.frames = None, None, 0
            elif kind == "exception":
                w.exception = msg[1]

        def on_death(i: int, w: Worker) -> None:
            nonlocal start_failures
            while True:  # what it said before dying tells where it died
                try:
                    if not w.conn.poll():
                        break
                    on_message(w, w.conn.recv())
                except (EOFError, OSError):
                    break
            how = signal_name(w.proc.exitcode) + (f", {w.exception}" if w.exception else "")
            w.conn.close()
            if w.chunk is None:
                if not w.ready:
                    start_failures += 1
                    if start_failures >= MAX_START_FAILURES:
                        fatal(f"workers die while starting ({how}); run with --workers-per-gpu 1 "
                              "to see the error, or check that mediapipe imports.")
                        return
            else:
                start_failures = 0
                chunk, where = w.chunk, w.video or "<writing part>"
                bar.update(-w.frames)
                crashes[(chunk, where)] += 1
                n = crashes[(chunk, where)]
                tqdm.write(f"worker {w.slot.index} (pid {w.pid}) died ({how}) in chunk {chunk}, "
                           f"{'video ' + where if w.video else where}; attempt {n}/"
                           f"{self.max_attempts}", file=sys.stderr)
                if n >= self.max_attempts:
                    if w.video is None:
                        fatal(f"writing the part of chunk {chunk} killed its worker {n} times "
                              f"({how}).")
                    else:
                        out.failed[chunk][w.video] = f"worker died {n} times on it ({how})"
                        tqdm.write(f"giving up on video {w.video}: marked failed; the rest of "
                                   f"chunk {chunk} is redone without it", file=sys.stderr)
                pending.appendleft(chunk)
            if not self._stop:
                workers[i] = self._start(w.slot)

        try:
            while not self._stop:
                for w in workers:
                    if w.ready and w.chunk is None and pending:
                        w.chunk, w.video, w.frames = pending.popleft(), None, 0
                        w.conn.send(("chunk", w.chunk, out.failed[w.chunk]))
                if not pending and all(w.chunk is None for w in workers):
                    break
                ready = wait([w.conn for w in workers] + [w.proc.sentinel for w in workers], 0.5)
                for w in workers:
                    if w.conn in ready:
                        try:
                            while w.conn.poll():
                                on_message(w, w.conn.recv())
                        except (EOFError, OSError):
                            pass
                for i, w in enumerate(list(workers)):
                    if w.proc.sentinel in ready or not w.proc.is_alive():
                        w.proc.join()
                        on_death(i, w)
                if time.monotonic() - last_beat > HEARTBEAT_S:
                    beat()
                    last_beat = time.monotonic()
        finally:
            self._shutdown(workers)
            for s, h in old.items():
                signal.signal(s, h)
            beat(final=True)
            bar.close()
        if self._stop > 0:
            out.signal = self._stop
        return out

    def _shutdown(self, workers: list[Worker]) -> None:
        """Idle workers get a goodbye; busy ones (only when stopping) SIGTERM, then SIGKILL."""
        for w in workers:
            if not w.proc.is_alive():
                continue
            try:
                if w.chunk is None:
                    w.conn.send(None)
                else:
                    w.proc.terminate()
            except OSError:
                w.proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for w in workers:
            w.proc.join(max(0.0, deadline - time.monotonic()))
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join()
            w.conn.close()
