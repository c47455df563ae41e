"""A fake backend on a simulated clock: the real scheduler, replayed without processes or waiting.

Workers are timings: each becomes ready `startup_s` after it is started and then does its frames
at its own speed; a script of faults makes chosen videos kill their worker, workers die while
starting, or parts fail to write. Events are put on one clock shared by any number of backends, so
one process can replay a whole cluster (scripts/bench/simulate.py) and the failure policy can be tested
in milliseconds (tests/test_scheduler.py).
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from phoenix_keypoints.jobs.schedule.events import (
    ChunkTask,
    Committed,
    Died,
    Event,
    FramesDone,
    Ready,
    VideoStarted,
    WriteFailed,
    Writing,
)


class SimClock:
    """Simulated seconds and the events due at them, for every backend on this clock."""

    def __init__(self) -> None:
        self.t = 0.0
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def at(self, t: float, owner: int, payload: Any) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), owner, payload))

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[int, Any]:
        """The next (owner, payload); the clock moves to its time."""
        t, _, owner, payload = heapq.heappop(self._heap)
        self.t = max(self.t, t)
        return owner, payload


@dataclass
class Faults:
    """What goes wrong: videos that kill their worker (how many times), deaths while starting..."""

    kill_video: Counter[str] = field(default_factory=Counter)  # video -> deaths left
    die_writing: Counter[int] = field(default_factory=Counter)  # chunk -> deaths while writing left
    die_starting: int = 0  # the next N workers started die before they are ready
    write_fails: set[int] = field(default_factory=set)  # chunks whose part cannot be written


@dataclass
class _Worker:
    gen: int
    pid: int


class FakeBackend:
    """Simulated workers: `speed(slot)` frames/s each, ready `startup_s` after start."""

    name = "simulated"
    _ids = itertools.count(1)
    _pids = itertools.count(1000)

    def __init__(self, clock: SimClock, slots: int, speed: Callable[[int], float],
                 startup_s: float = 2.0, part_write_s: float = 0.05, host: str = "sim",
                 faults: Faults | None = None) -> None:
        self.clock, self.n, self.speed = clock, slots, speed
        self.startup_s, self.part_write_s, self.host = startup_s, part_write_s, host
        self.faults = faults or Faults()
        self.id = next(self._ids)
        self._workers: dict[int, _Worker] = {}
        self._gen = itertools.count(1)
        self.started_at: dict[int, float] = {}  # slot -> when it was first started

    # --- the Backend interface --------------------------------------------------------------------
    def slot_count(self) -> int:
        return self.n

    def started(self) -> set[int]:
        return set(self._workers)

    def start(self, slot: int) -> None:
        w = _Worker(next(self._gen), next(self._pids))
        self._workers[slot] = w
        self.started_at.setdefault(slot, self.clock.now())
        t = self.clock.now() + self.startup_s
        if self.faults.die_starting > 0:
            self.faults.die_starting -= 1
            self._emit(t, slot, w, Died(slot, "SIGKILL"))
        else:
            self._emit(t, slot, w, Ready(slot, w.pid, self.host, "", (slot,)))

    def assign(self, slot: int, task: ChunkTask) -> None:
        w = self._workers[slot]
        t = self.clock.now()
        per_s = self.speed(slot)
        rows = 0
        for v in task.videos:
            if v.name in task.skip:
                continue
            self._emit(t, slot, w, VideoStarted(slot, task.chunk, v.name))
            n = len(v.files)
            if rows == 0 and n:  # a real worker reports its first frame at once
                self._emit(t + 1 / per_s, slot, w, FramesDone(slot, 1))
            if self.faults.kill_video[v.name] > 0:
                self.faults.kill_video[v.name] -= 1
                self._emit(t + n / per_s / 2, slot, w, Died(slot, "SIGKILL"))
                return
            t += n / per_s
            if n - (rows == 0):
                self._emit(t, slot, w, FramesDone(slot, n - (rows == 0)))
            rows += n
        self._emit(t, slot, w, Writing(slot, task.chunk))
        t += self.part_write_s
        if self.faults.die_writing[task.chunk] > 0:
            self.faults.die_writing[task.chunk] -= 1
            self._emit(t, slot, w, Died(slot, "SIGKILL"))
        elif task.chunk in self.faults.write_fails:
            self._emit(t, slot, w, WriteFailed(slot, task.chunk, "cannot write part: No space left"))
        else:
            self._emit(t, slot, w, Committed(slot, task.chunk, rows))

    def wait(self, timeout: float) -> list[Event]:
        """Events of this backend due within timeout; the clock jumps to the first (or timeout)."""
        deadline = self.clock.now() + timeout
        out: list[Event] = []
        while (t := self.clock.next_time()) is not None and t <= deadline:
            owner, payload = self.clock.pop()
            if owner == self.id:
                out += self.deliver(payload)
                if out:
                    break
        else:
            self.clock.t = max(self.clock.t, deadline)
        return out

    def deliver(self, payload: tuple[int, Event]) -> list[Event]:
        """The event as the scheduler should see it ([] when its worker was stopped meanwhile)."""
        gen, ev = payload
        slot = ev.slot
        w = self._workers.get(slot)
        if w is None or w.gen != gen:
            return []
        if isinstance(ev, Died):
            del self._workers[slot]
        return [ev]

    def stop(self, slot: int) -> None:
        self._workers.pop(slot, None)

    def close(self, grace: float) -> None:
        self._workers.clear()

    # --- internals -------------------------------------------------------------------------------
    def _emit(self, t: float, slot: int, w: _Worker, ev: Event) -> None:
        self.clock.at(t, self.id, (w.gen, ev))  # gen: which incarnation of the slot said it


class MemoryClaims:
    """The claim store of jobs.cluster.claims kept in memory: all shards of a simulated cluster
    share one."""

    class Board:
        """What the shared filesystem holds: claims, live shards, committed chunks."""

        def __init__(self) -> None:
            self.claims: dict[str, str] = {}
            self.live: set[str] = set()
            self.committed: set[int] = set()

    def __init__(self, board: MemoryClaims.Board, shard: int) -> None:
        self.board, self.shard = board, str(shard)
        board.live.add(self.shard)

    def claim(self, key: str) -> bool:
        if key in self.board.claims:
            return False
        self.board.claims[key] = self.shard
        return True

    def holder(self, key: str) -> str | None:
        return self.board.claims.get(key)

    def alive(self, holder: str) -> bool:
        return holder in self.board.live

    def take_over(self, key: str, holder: str) -> bool:
        if self.board.claims.get(key) == holder:
            del self.board.claims[key]
        return self.claim(key)

    def release(self, key: str) -> None:
        if self.board.claims.get(key) == self.shard:
            del self.board.claims[key]

    @property
    def me(self) -> str:
        return self.shard

    def committed(self, chunk: int) -> bool:
        return chunk in self.board.committed

    def beat(self) -> None:
        pass

    def finish(self, done: bool) -> None:
        self.board.live.discard(self.shard)
