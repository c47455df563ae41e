"""What a running coordinator shows: the progress bar on a terminal, progress lines in a log, and
progress.json on disk.

A terminal gets tqdm's bar, redrawn in place. Where stderr is a file or a pipe (a SLURM log, `2>
run.log`, `| tee`) a redrawn bar is useless, so a line is written every LOG_EVERY_S seconds or
every LOG_STEP of the frames, whichever comes first: what is committed (in parts on disk, kept
whatever happens next), what is in flight (done by a worker, lost if the run stops now), the rate
and the time left.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from tqdm import tqdm

from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.rundir import heartbeat
from phoenix_keypoints.jobs.rundir.heartbeat import Heartbeat, WorkerBeat

LOG_EVERY_S = 10.0  # a log line at least this often ...
LOG_STEP = 0.05  # ... or when this share of the frames more is committed or in flight


class Progress:
    """Frames done (bar, log lines and heartbeat) and where each worker is; heartbeat every
    INTERVAL_S. frames_done counts frames in flight too; `committed` only those in parts."""

    def __init__(self, label: str, backend: str, frames_total: int, frames_done: int,
                 chunks_todo: int, path: Path | None, show_bar: bool = True,
                 clock: Callable[[], float] = time.monotonic, tty: bool | None = None) -> None:
        self.path, self.clock = path, clock
        self.beat = Heartbeat.new(label, backend, frames_total, frames_done, chunks_todo)
        tty = os.isatty(2) if tty is None else tty
        self.bar = tqdm(total=frames_total, initial=frames_done, unit="frame", dynamic_ncols=True,
                        desc=label or "frames", smoothing=0.05, disable=not (show_bar and tty),
                        file=sys.stderr, mininterval=0.5)
        self.log = show_bar and not tty  # lines instead of a bar
        self.label = label
        self.committed = frames_done
        self._rate_mark = (clock(), frames_done)
        self._last_beat = float("-inf")
        self._last_line = (clock(), frames_done, frames_done)  # when, frames done, committed

    @property
    def frames_done(self) -> int:
        return self.beat.frames_done

    def add(self, frames: int) -> None:
        """Frames processed (negative: frames of a chunk lost with its worker)."""
        self.beat.frames_done += frames
        self.bar.update(frames)

    def commit(self, frames: int) -> None:
        """Frames of a chunk whose part was just committed (counted by add before)."""
        self.committed += frames

    def tick(self, workers: Iterable[WorkerBeat], chunks_done: int, final: bool = False) -> bool:
        """Write the heartbeat when one is due (always when final); True when it was due."""
        now = self.clock()
        self._maybe_line(now)
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

    def _maybe_line(self, now: float) -> None:
        """A log line when LOG_EVERY_S passed or LOG_STEP more of the frames got done."""
        t, n, c = self._last_line
        step = max(1, round(LOG_STEP * self.beat.frames_total))
        moved = max(abs(self.frames_done - n), abs(self.committed - c))
        if self.log and (now - t >= LOG_EVERY_S or moved >= step):
            self._say(now)

    def _say(self, now: float) -> None:
        self._last_line = (now, self.frames_done, self.committed)
        messages.say(self.line(now))

    def line(self, now: float) -> str:
        """`frames: 120/580 committed (20.7 %), 40 in flight; 31.5 frames/s, about 14 s left`."""
        total, done = self.beat.frames_total, self.frames_done
        t0, n0 = self._rate_mark
        rate = (done - n0) / (now - t0) if now > t0 else 0.0
        left = f"about {_duration((total - done) / rate)} left" if rate > 0 and done < total \
            else "time left not known yet" if done < total else "all frames extracted"
        share = 100 * self.committed / total if total else 100.0
        head = f"{self.label}: " if self.label else ""
        return (f"{head}frames: {self.committed}/{total} committed ({share:.1f} %), "
                f"{max(0, done - self.committed)} in flight; {rate:.1f} frames/s, {left}")

    def close(self) -> None:
        if self.log and self._last_line[1:] != (self.frames_done, self.committed):
            self._say(self.clock())
        self.bar.close()


def _duration(seconds: float) -> str:
    """`42 s`, `3 min 5 s`, `2 h 10 min`."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
