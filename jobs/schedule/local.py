"""The local backend: one spawned worker process per slot, each with its pipe, pinned to its CPU.

Only mechanics: start a process (CUDA_VISIBLE_DEVICES set before the interpreter starts), send it a
chunk, turn what comes back on its pipe and its death into events, stop it. What any of that means
for the run is the scheduler's business (jobs.schedule.scheduler).
"""

from __future__ import annotations

import importlib.machinery
import multiprocessing as mp
import os
import re
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.keypoints.environ import spawning
from phoenix_keypoints.jobs.schedule.boot import LOG_ENV
from phoenix_keypoints.jobs.schedule.devices import Slot
from phoenix_keypoints.jobs.schedule.events import (
    ChunkTask,
    Committed,
    Died,
    Event,
    Ready,
    Refused,
    WriteFailed,
)
from phoenix_keypoints.jobs.schedule.worker import WorkerError, worker_main


def exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


@dataclass
class _Proc:
    proc: Any
    conn: Connection
    log: Path
    log_start: int = 0  # the log's size when the process started: what it writes comes after
    ready: bool = False
    busy: bool = False
    last_words: str = ""


_MAIN_LOCK = threading.Lock()


@contextmanager
def _own_main(log: Path) -> Iterator[None]:
    """Spawned workers start from this package, never from the user's main module.

    multiprocessing's spawn re-runs the parent's `__main__` in each child (by its __spec__ name or
    its __file__) before it unpickles the target: a script without an `if __name__ == "__main__":`
    guard would start its whole job again in every worker, and `python -` (main file `<stdin>`)
    cannot be re-run at all. The worker needs nothing of it, so while a process starts, `__main__`
    stands for jobs.schedule.boot: the child runs that first, which sends its output to `log`
    before anything else can fail (the environment names the log to it)."""
    stand_in = types.ModuleType("__main__")
    stand_in.__spec__ = importlib.machinery.ModuleSpec("phoenix_keypoints.jobs.schedule.boot", None)
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = stand_in
        os.environ[LOG_ENV] = str(log)
        try:
            yield
        finally:
            os.environ.pop(LOG_ENV, None)
            if main is not None:
                sys.modules["__main__"] = main


_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*$", re.M)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def last_error(log: Path, since: int = 0) -> str:
    """The last `SomeError: why` line the worker's log got after byte `since` (its traceback's last
    line), or ""."""
    try:
        with open(log, "rb") as f:
            f.seek(max(since, f.seek(0, os.SEEK_END) - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    found = _ERROR_LINE.findall(text)
    return found[-1].strip()[:300] if found else ""


class LocalBackend:
    """Worker processes on this machine, one per slot."""

    name = "local"

    def __init__(self, run_dir: Path, slots: list[Slot], settings: dict, log_prefix: str = "") -> None:
        self.run_dir = Path(run_dir)
        self.slots = slots
        self.settings = settings
        self.log_prefix = log_prefix  # "shard-I-": logs beside other shards' in the same folder
        self._ctx = mp.get_context("spawn")
        self._procs: dict[int, _Proc] = {}
        self._leaving: list[_Proc] = []  # stopped, reaped by close()

    def slot_count(self) -> int:
        return len(self.slots)

    def started(self) -> set[int]:
        return set(self._procs)

    def start(self, slot: int) -> None:
        s = self.slots[slot]
        parent, child = self._ctx.Pipe()
        log = self.run_dir / "logs" / f"{self.log_prefix}worker-{slot}.log"
        start_size = _size(log)
        proc = self._ctx.Process(
            target=worker_main, args=(slot, child, str(self.run_dir), list(s.cpus),
                                     self.settings, str(log)),
            name=f"phoenix-keypoints-worker-{slot}", daemon=True)
        # the spawned interpreter (and multiprocessing's resource tracker, started with the first)
        # inherits os.environ: clean, whatever a library did to it, and its GPU named
        with _own_main(log), spawning(CUDA_VISIBLE_DEVICES=s.gpu):
            proc.start()
        child.close()
        self._procs[slot] = _Proc(proc, parent, log, start_size)

    def assign(self, slot: int, task: ChunkTask) -> None:
        p = self._procs[slot]
        p.busy = True
        with suppress(OSError):  # it died meanwhile: its sentinel reports it
            p.conn.send(task)

    def wait(self, timeout: float) -> list[Event]:
        procs = list(self._procs.items())
        ready = wait([p.conn for _, p in procs] + [p.proc.sentinel for _, p in procs], timeout)
        events: list[Event] = []
        for _, p in procs:
            if p.conn in ready:
                events += self._drain(p)
        for slot, p in procs:
            if p.proc.sentinel in ready or not p.proc.is_alive():
                p.proc.join()
                events += self._drain(p)  # what it said before dying tells where it died
                if not p.ready and not p.last_words:  # died before its entry could say why
                    p.last_words = last_error(p.log, p.log_start)
                how = exit_reason(p.proc.exitcode) + (f", {p.last_words}" if p.last_words else "")
                p.conn.close()
                del self._procs[slot]
                events.append(Died(slot, how))
        return events

    def _drain(self, p: _Proc) -> list[Event]:
        out: list[Event] = []
        try:
            while not p.conn.closed and p.conn.poll():
                msg = p.conn.recv()
                if isinstance(msg, WorkerError):
                    p.last_words = msg.text
                    continue
                if isinstance(msg, Ready):
                    p.ready = True
                elif isinstance(msg, (Committed, WriteFailed, Refused)):
                    p.busy = False
                out.append(msg)
        except (EOFError, OSError):
            pass
        return out

    def stop(self, slot: int) -> None:
        """An idle worker: tell it goodbye (it exits by itself)."""
        p = self._procs.pop(slot, None)
        if p is not None:
            self._goodbye(p)
            self._leaving.append(p)

    def _goodbye(self, p: _Proc) -> None:
        try:
            if p.busy or not p.ready:  # SIGTERM: it stops at a frame boundary (or mid-start-up)
                p.proc.terminate()
            else:
                p.conn.send(None)
        except OSError:
            p.proc.terminate()

    def close(self, grace: float) -> None:
        """Idle workers get a goodbye; busy ones SIGTERM, then SIGKILL after `grace` seconds.

        When none is busy (the work is done), they are reaped on a thread: closing their graphs
        takes them most of a second, which the merge need not wait for.
        """
        procs = list(self._procs.values()) + self._leaving
        # a worker stopped mid-start-up (a run refused while they import) is reaped here too: it
        # dies at once, and the refusal's clean-up must not race its log file being created
        busy = any((p.busy or not p.ready) and p.proc.is_alive() for p in procs)
        self._procs.clear()
        self._leaving = []
        for p in procs:
            if p.proc.is_alive():
                self._goodbye(p)
        if busy:
            _reap(procs, grace)
        else:
            threading.Thread(target=_reap, args=(procs, grace), name="reap-workers",
                             daemon=True).start()


def _reap(procs: list[_Proc], grace: float) -> None:
    """Wait up to `grace` seconds for the processes to end; SIGKILL the rest."""
    deadline = time.monotonic() + grace
    for p in procs:
        p.proc.join(max(0.0, deadline - time.monotonic()))
        if p.proc.is_alive():
            p.proc.kill()
            p.proc.join()
        p.conn.close()
