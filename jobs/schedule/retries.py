"""The failure policy: what a worker's death costs, decided in one place for every backend.

- A worker that dies inside a video is retried on the same chunk; the video that killed it
  `max_attempts` times is failed (it gets no rows) and the rest of its chunk is redone without it,
  so one bad video costs only itself.
- A worker that dies while writing its part, or before its first video, `max_attempts` times on the
  same chunk stops the run: that is the machine's fault (disk, memory), not a video's.
- Workers that die before they are ready (or while idle) `max_start_failures` times in a row stop
  the run: the family's library does not import, or the machine cannot start them; retrying
  forever hides it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

MAX_ATTEMPTS = 3
MAX_START_FAILURES = 3


@dataclass(frozen=True)
class Retry:
    attempt: int


@dataclass(frozen=True)
class FailVideo:
    """Give up on this video: mark it failed, redo the chunk without it."""

    attempt: int
    video: str
    why: str


@dataclass(frozen=True)
class Fatal:
    why: str


Verdict = Retry | FailVideo | Fatal


@dataclass
class FailurePolicy:
    max_attempts: int = MAX_ATTEMPTS
    max_start_failures: int = MAX_START_FAILURES
    crashes: Counter[tuple[int, str]] = field(default_factory=Counter)
    start_failures: int = 0

    def died_starting(self, how: str) -> Verdict:
        """A worker died before it was ready, or while it had no chunk."""
        self.start_failures += 1
        if self.start_failures >= self.max_start_failures:
            return Fatal(f"workers die while starting ({how})")
        return Retry(self.start_failures)

    def died_in_chunk(self, chunk: int, video: str | None, how: str) -> Verdict:
        """A worker died holding `chunk`, inside `video` (None: before any video, or writing)."""
        where = video or "<outside a video>"
        self.crashes[(chunk, where)] += 1
        n = self.crashes[(chunk, where)]
        if n < self.max_attempts:
            return Retry(n)
        if video is None:
            return Fatal(f"chunk {chunk} killed its worker {n} times outside any video, while "
                         f"starting it or writing its part ({how})")
        return FailVideo(n, video, f"worker died {n} times on it ({how})")

    def chunk_committed(self) -> None:
        """Work gets done: earlier start failures were passing (a node's hiccup), not a pattern."""
        self.start_failures = 0
