"""Fault injection for tests and the soak script: off unless PHOENIX_KEYPOINTS_FAULTS is set.

The value is a comma-separated list of:
- `kill-video=NAME`: a worker SIGKILLs itself when it starts video NAME, every time (a frame that
  crashes the estimator, as far as the coordinator can tell).
- `kill-frame=NAME:N`: a worker SIGKILLs itself when it reads frame N (0-based) of video NAME,
  every time: a frame that crashes the worker in the middle of a video, while other videos of
  its chunk may be under way beside it (--det-every's lockstep).
- `enospc-chunk=N`: writing the part of chunk N fails with ENOSPC (disk full).
- `frame-delay=SECONDS`: sleep that long after each frame, so that tests can kill mid-chunk.
- `write-delay=SECONDS`: sleep that long with a part's temp file written but not yet renamed, so
  that tests can kill or stop a worker while it commits.
- `kill-after-plan`: the coordinator SIGKILLs itself once a re-plan (the corpus changed) has saved
  the new plan and before it saves run.json.
- `fail-worker-start`: a spawned local worker raises ImportError before its entry point runs (a
  broken install, as far as the coordinator can tell).
Real processes still get real signals: only the trigger is planted.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import TypeVar

ENV = "PHOENIX_KEYPOINTS_FAULTS"
T = TypeVar("T")


@cache
def _faults() -> dict[str, str]:
    out = {}
    for item in filter(None, (s.strip() for s in os.environ.get(ENV, "").split(","))):
        key, _, value = item.partition("=")
        out[key] = value
    return out


def on_video_start(video: str) -> None:
    if _faults().get("kill-video") == video:
        os.kill(os.getpid(), signal.SIGKILL)


def frames(video: str, source: Iterable[T]) -> Iterable[T]:
    """The video's frames, the worker killed at the frame `kill-frame` names."""
    name, _, at = _faults().get("kill-frame", "").rpartition(":")
    if name != video:
        return source
    return _killed_at(source, int(at))


def _killed_at(source: Iterable[T], at: int) -> Iterator[T]:
    for i, frame in enumerate(source):
        if i == at:
            os.kill(os.getpid(), signal.SIGKILL)
        yield frame


def before_write(chunk: int, path: Path) -> None:
    if _faults().get("enospc-chunk") == str(chunk):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def before_commit() -> None:
    delay = _faults().get("write-delay")
    if delay:
        time.sleep(float(delay))


def after_frame() -> None:
    delay = _faults().get("frame-delay")
    if delay:
        time.sleep(float(delay))


def after_plan() -> None:
    if "kill-after-plan" in _faults():
        os.kill(os.getpid(), signal.SIGKILL)


def worker_starting() -> None:
    if "fail-worker-start" in _faults():
        raise ImportError("planted by PHOENIX_KEYPOINTS_FAULTS=fail-worker-start")
