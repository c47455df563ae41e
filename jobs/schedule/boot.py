"""The first module a spawned local worker runs, as its `__mp_main__` (jobs/schedule/local.py).

Why: a worker that dies while starting (an import that fails, a broken install) dies before its
entry point can report anything; its traceback went to the terminal, or nowhere a user looked.
Run first, this module sends the process's output to the worker's log (named by the coordinator
in PHOENIX_KEYPOINTS_WORKER_LOG), so the traceback lands there and the coordinator reports its
last line. It imports nothing heavy (of the project: the fault hooks, a leaf).
"""

from __future__ import annotations

import os

LOG_ENV = "PHOENIX_KEYPOINTS_WORKER_LOG"


def to_log() -> None:
    """stdout and stderr (fds 1 and 2) to the log the coordinator named, appended."""
    path = os.environ.pop(LOG_ENV, "")
    if not path:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


if __name__ == "__mp_main__":
    to_log()
    from phoenix_keypoints.jobs import faults

    faults.worker_starting()
