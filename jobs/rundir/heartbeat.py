"""progress.json: a coordinator's heartbeat, written every few seconds, read by `status` and tests.

The same fields for every backend. Whether the coordinator behind a heartbeat still lives is told
at once on its own host (is its pid there?) and from its age elsewhere (another node of a cluster).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from phoenix_keypoints.jobs.rundir.folder import NotAFile, load_json, write_json

INTERVAL_S = 2.0
STALE_AFTER_S = 30.0  # another host's coordinator is presumed dead after this long without a beat


@dataclass
class WorkerBeat:
    slot: int
    pid: int | None = None
    host: str | None = None
    gpu: str | None = None
    cpus: list[int] = field(default_factory=list)
    chunk: int | None = None
    video: str | None = None
    frames: int = 0  # frames done in its chunk in flight (not committed yet)


@dataclass
class Heartbeat:
    pid: int
    host: str
    label: str
    backend: str
    started: float
    updated: float
    running: bool
    frames_total: int
    frames_done: int
    frames_per_s: float
    chunks_todo: int
    chunks_done: int
    workers: list[WorkerBeat] = field(default_factory=list)

    @classmethod
    def new(cls, label: str, backend: str, frames_total: int, frames_done: int,
            chunks_todo: int) -> Heartbeat:
        now = time.time()
        return cls(os.getpid(), socket.gethostname(), label, backend, now, now, True, frames_total,
                   frames_done, 0.0, chunks_todo, 0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Heartbeat:
        workers = [WorkerBeat(**w) for w in raw.get("workers", [])]
        return cls(**{**raw, "workers": workers})


def write(path: Path, beat: Heartbeat) -> None:
    write_json(path, beat.to_json())


MAX_BYTES = 2**20  # a heartbeat names each worker once: a few KB


def read(path: Path) -> Heartbeat | None:
    """The heartbeat in path, or None when there is none (or it is unreadable: never fatal)."""
    return read_checked(path)[0]


def read_checked(path: Path) -> tuple[Heartbeat | None, str]:
    """(the heartbeat, "") or (None, why it cannot be read; "" when there is none): a FIFO or a
    device in its place is named, never waited on (jobs.rundir.folder.load_json)."""
    try:
        return Heartbeat.from_json(load_json(Path(path), MAX_BYTES)), ""
    except FileNotFoundError:
        return None, ""
    except NotAFile as e:
        return None, str(e)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        return None, f"{path}: unreadable ({type(e).__name__})"


def _proc_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first); None without /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _process_start(fields: list[str]) -> float | None:
    """When the process started (epoch seconds), from its /proc stat fields and the boot time."""
    try:
        ticks = int(fields[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def pid_alive(pid: int, since: float | None = None) -> bool:
    """True while pid runs; with `since`, only if it started by then (a reused pid is not ours).

    A zombie is dead: a SIGKILLed coordinator whose parent has not reaped it yet still answers
    kill(pid, 0), but it will never write another heartbeat.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    fields = _proc_fields(pid)
    if fields is None:
        return True
    if fields[0] in ("Z", "X"):
        return False
    start = _process_start(fields) if since is not None else None
    return start is None or since is None or start <= since + 2.0  # btime has 1 s resolution


def is_live(beat: Heartbeat | None, now: float | None = None) -> bool:
    """True while the coordinator that writes this heartbeat runs."""
    if beat is None or not beat.running:
        return False
    if beat.host == socket.gethostname():
        return pid_alive(beat.pid, since=beat.started)
    return (now or time.time()) - beat.updated < STALE_AFTER_S
