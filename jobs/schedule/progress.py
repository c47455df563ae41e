"""What a running coordinator shows: the progress bar on the terminal and progress.json on disk."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from tqdm import tqdm

from phoenix_keypoints.jobs.rundir import heartbeat
from phoenix_keypoints.jobs.rundir.heartbeat import Heartbeat, WorkerBeat


class Progress:
    """Frames done (bar and heartbeat) and where each worker is; heartbeat every INTERVAL_S."""

    def __init__(self, label: str, backend: str, frames_total: int, frames_done: int,
                 chunks_todo: int, path: Path | None, show_bar: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.clock = path, clock
        self.beat = Heartbeat.new(label, backend, frames_total, frames_done, chunks_todo)
        self.bar = tqdm(total=frames_total, initial=frames_done, unit="frame", dynamic_ncols=True,
                        desc=label or "frames", smoothing=0.05, disable=not show_bar,
                        file=sys.stderr, mininterval=0.5 if os.isatty(2) else 30)
        self._rate_mark = (clock(), frames_done)
        self._last_beat = float("-inf")

    @property
    def frames_done(self) -> int:
        return self.beat.frames_done

    def add(self, frames: int) -> None:
        """Frames processed (negative: frames of a chunk lost with its worker)."""
        self.beat.frames_done += frames
        self.bar.update(frames)

    def tick(self, workers: Iterable[WorkerBeat], chunks_done: int, final: bool = False) -> bool:
        """Write the heartbeat when one is due (always when final); True when it was due."""
        now = self.clock()
        if not final and now - self._last_beat < heartbeat.INTERVAL_S:
            return False
        self._last_beat = now
        if self.path is None:
            return True
        t0, n0 = self._rate_mark
        self.beat.frames_per_s = (self.beat.frames_done - n0) / max(1e-9, now - t0)
        self.beat.updated = time.time()
        self.beat.running = not final
        self.beat.chunks_done = chunks_done
        self.beat.workers = list(workers)
        heartbeat.write(self.path, self.beat)
        return True

    def close(self) -> None:
        self.bar.close()
