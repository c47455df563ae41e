"""The one scheduler: hands chunks to workers, survives their deaths, shows progress, obeys signals.

It is a state machine fed with typed events (jobs.schedule.events) by a backend that only starts workers,
hands them chunks and reports what they do; `run` is its loop for a real job, and the simulator
drives the same machine from a simulated clock. Everything a job decides lives here or in what it
calls: the queue (which chunk next), the failure policy (jobs.schedule.retries), the progress bar and the
heartbeat (jobs.schedule.progress), the messages (jobs.messages).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.rundir.heartbeat import WorkerBeat
from phoenix_keypoints.jobs.schedule.events import (
    ChunkTask,
    Committed,
    Died,
    Event,
    FramesDone,
    Ready,
    Refused,
    VideoStarted,
    WriteFailed,
    Writing,
)
from phoenix_keypoints.jobs.schedule.progress import Progress
from phoenix_keypoints.jobs.schedule.retries import FailurePolicy, FailVideo, Fatal, Verdict
from phoenix_keypoints.jobs.schedule.workqueue import WorkQueue

WAIT_S = 0.5
# what to check when workers keep dying before they are ready; the run's family words its own
# (jobs.run.extraction.start_advice: the module its workers import)
START_ADVICE = "check that the estimator's library imports on this machine"
STOP_GRACE_S = 30.0


class Backend(Protocol):
    """Starts workers, hands them chunks, reports what they do as events, stops them."""

    name: str

    def slot_count(self) -> int: ...

    def started(self) -> set[int]: ...

    def start(self, slot: int) -> None: ...

    def assign(self, slot: int, task: ChunkTask) -> None: ...

    def wait(self, timeout: float) -> list[Event]: ...

    def stop(self, slot: int) -> None: ...

    def close(self, grace: float) -> None: ...


@dataclass
class SlotState:
    """Where one worker slot is, as its events tell it."""

    index: int
    ready: bool = False
    pid: int | None = None
    host: str | None = None
    gpu: str | None = None
    cpus: tuple[int, ...] = ()
    chunk: int | None = None
    video: str | None = None
    writing: bool = False
    frames: int = 0  # frames reported for the chunk in flight

    def clear_chunk(self) -> None:
        self.chunk, self.video, self.writing, self.frames = None, None, False, 0

    def beat(self) -> WorkerBeat:
        return WorkerBeat(self.index, self.pid, self.host, self.gpu, list(self.cpus), self.chunk,
                          self.video, self.frames if self.chunk is not None else 0)


@dataclass
class Timings:
    """When (scheduler clock, seconds) the run's milestones came: for benchmarks and run.json."""

    first_frame: float | None = None
    first_idle: float | None = None  # a ready worker first found nothing left to take
    last_frame: float | None = None


@dataclass
class Outcome:
    done: list[int] = field(default_factory=list)
    failed: dict[int, dict[str, str]] = field(default_factory=dict)  # chunk -> video -> why
    error: str = ""  # a fatal problem that stopped the run
    refused: bool = False  # ... and it was the input's (a model file): exit 2, not 1
    signal: int = 0  # SIGINT/SIGTERM that stopped the run
    workers: int = 0
    timings: Timings = field(default_factory=Timings)
    runtime: dict[str, dict] = field(default_factory=dict)  # slot -> how its estimator ran


class Scheduler:
    def __init__(self, backend: Backend, queue: WorkQueue, make_task: Callable[[int, dict], ChunkTask],
                 progress: Progress, policy: FailurePolicy | None = None,
                 clock: Callable[[], float] = time.monotonic, chunks_wanted: int = 0,
                 on_commit: Callable[[int], None] | None = None,
                 start_advice: str = START_ADVICE) -> None:
        self.backend, self.queue, self.make_task = backend, queue, make_task
        self.start_advice = start_advice  # what to check when workers die while starting
        self.on_commit = on_commit  # told of every committed part (the merge beside the run)
        self.progress, self.policy = progress, policy or FailurePolicy()
        self.clock = clock
        self.chunks_wanted = chunks_wanted  # how many workers are worth starting
        self.slots: dict[int, SlotState] = {}
        self.outcome = Outcome()
        self.stop_signal = 0
        self.crashed: set[int] = set()  # chunks a worker died in: handed out one video at a time

    # --- state -----------------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return bool(self.stop_signal or self.outcome.error)

    @property
    def finished(self) -> bool:
        busy = any(s.chunk is not None for s in self.slots.values())
        return self.stopping or (self.queue.empty and not busy)

    def request_stop(self, signum: int) -> None:
        self.stop_signal = self.stop_signal or signum

    def fatal(self, why: str) -> None:
        self.outcome.error = self.outcome.error or why

    # --- workers ---------------------------------------------------------------------------------
    def begin(self) -> None:
        """Start as many workers as there are chunks (up to the slots); stop any started beyond."""
        n = min(self.backend.slot_count(), max(0, self.chunks_wanted))
        started = self.backend.started()
        for i in sorted(started - set(range(n))):
            self.backend.stop(i)
        for i in range(n):
            self.slots[i] = SlotState(i)
            if i not in started:
                self.backend.start(i)
        self.outcome.workers = n

    def dispatch(self) -> None:
        """Give every ready, idle worker its next chunk."""
        for s in self.slots.values():
            if self.stopping:
                return
            if not s.ready or s.chunk is not None:
                continue
            chunk = self.queue.take()
            if chunk is None:
                if self.outcome.timings.first_idle is None:
                    self.outcome.timings.first_idle = self.clock()
                return
            s.chunk = chunk
            task = self.make_task(chunk, self.outcome.failed.get(chunk, {}))
            if chunk in self.crashed:  # a worker died in it: which video is known only one by one
                task = replace(task, one_by_one=True)
            self.backend.assign(s.index, task)

    # --- events ----------------------------------------------------------------------------------
    def handle(self, ev: Event) -> None:
        s = self.slots.get(ev.slot)
        if s is None:  # a worker stopped as surplus, still saying goodbye
            return
        if isinstance(ev, Ready):
            s.ready, s.pid, s.host, s.gpu, s.cpus = True, ev.pid, ev.host, ev.gpu, ev.cpus
            if ev.runtime is not None:
                self.outcome.runtime[str(ev.slot)] = ev.runtime
        elif isinstance(ev, VideoStarted):
            s.video = ev.video
        elif isinstance(ev, FramesDone):
            self._frames(s, ev.frames)
        elif isinstance(ev, Writing):
            s.video, s.writing = None, True
        elif isinstance(ev, Committed):
            self._committed(s, ev.chunk)
        elif isinstance(ev, (WriteFailed, Refused)):
            self._stopped(s, ev)
        elif isinstance(ev, Died):
            self._died(s, ev.how)

    def _stopped(self, s: SlotState, ev: WriteFailed | Refused) -> None:
        """A chunk that cannot be done stops the run: the disk's fault, or the input's (exit 2)."""
        if isinstance(ev, Refused):
            if not self.outcome.error:  # the first error decides the exit; a second worker's
                self.outcome.refused = ev.code == 2  # refusal (other words) changes neither
            self.fatal(ev.why)
        else:
            self.fatal(f"chunk {ev.chunk}: {ev.why}. Free space or fix permissions, then "
                       f"{messages.RESUME}.")
        self.progress.add(-s.frames)
        s.clear_chunk()

    def _frames(self, s: SlotState, n: int) -> None:
        if s.chunk is None:  # a late report of a chunk already settled
            return
        s.frames += n
        self.progress.add(n)
        now = self.clock()
        if self.outcome.timings.first_frame is None:
            self.outcome.timings.first_frame = now
        self.outcome.timings.last_frame = now

    def _committed(self, s: SlotState, chunk: int) -> None:
        self.outcome.done.append(chunk)
        self.progress.commit(s.frames)
        if self.on_commit is not None:
            self.on_commit(chunk)
        self.outcome.timings.last_frame = self.clock()
        self.queue.finished(chunk)
        self.policy.chunk_committed()
        s.clear_chunk()

    def _died(self, s: SlotState, how: str) -> None:
        if s.chunk is None:
            verdict: Verdict = self.policy.died_starting(how)
            if isinstance(verdict, Fatal):
                self.fatal(f"{verdict.why}. Each worker's whole output is in its log in RUN/logs/; "
                           f"{self.start_advice}.")
        else:
            verdict = self._crash(s, how)
        self.slots[s.index] = SlotState(s.index)
        if not self.stopping:
            self.backend.start(s.index)

    def _crash(self, s: SlotState, how: str) -> Verdict:
        """A worker died holding a chunk: say where, apply the policy, hand the chunk out again."""
        chunk = s.chunk
        assert chunk is not None
        self.crashed.add(chunk)
        self.progress.add(-s.frames)
        verdict = self.policy.died_in_chunk(chunk, s.video, how)
        where = f"video {s.video}" if s.video else ("writing its part" if s.writing
                                                    else "before its first video")
        attempt = getattr(verdict, "attempt", self.policy.max_attempts)
        messages.say(f"worker {s.index} (pid {s.pid}) died ({how}) in chunk {chunk}, {where}; "
                     f"attempt {attempt}/{self.policy.max_attempts}")
        if isinstance(verdict, FailVideo):
            self.outcome.failed.setdefault(chunk, {})[verdict.video] = verdict.why
            messages.say(f"giving up on video {verdict.video}: marked failed; the rest of chunk "
                         f"{chunk} is redone without it")
        elif isinstance(verdict, Fatal):
            self.fatal(f"{verdict.why}. Check the disk and memory of this machine, then "
                       f"{messages.RESUME}.")
        self.queue.put_back(chunk)
        return verdict

    # --- heartbeat -------------------------------------------------------------------------------
    def tick(self, final: bool = False) -> None:
        if self.progress.tick((s.beat() for s in self.slots.values()), len(self.outcome.done), final):
            self.queue.beat()


@contextmanager
def stop_on_signals(sched: Scheduler) -> Iterator[None]:
    """SIGINT/SIGTERM ask the scheduler to stop (workers end at a frame boundary), not to unwind."""
    old = {s: signal.signal(s, lambda signum, frame: sched.request_stop(signum))
           for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run(sched: Scheduler) -> Outcome:
    """The real loop: wait for events, let the scheduler decide, until done or stopped."""
    backend = sched.backend
    try:
        with stop_on_signals(sched):  # kept while workers stop: a second Ctrl-C is no traceback
            try:
                sched.begin()
                while True:
                    sched.dispatch()
                    if sched.finished:
                        break
                    for ev in backend.wait(WAIT_S):
                        sched.handle(ev)
                    sched.tick()
            finally:
                sched.queue.release()
                backend.close(STOP_GRACE_S)
    finally:
        sched.tick(final=True)
        sched.progress.close()
    if sched.stop_signal:
        sched.outcome.signal = sched.stop_signal
    return sched.outcome
