"""Which chunk a free worker gets next: the order work is handed out in, for one coordinator."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Protocol


class WorkQueue(Protocol):
    def take(self) -> int | None:
        """The next chunk to hand out, or None when there is none to give now."""

    def put_back(self, chunk: int) -> None:
        """A chunk whose worker died: it is handed out again, first."""

    def finished(self, chunk: int) -> None:
        """The chunk's part is committed."""

    def release(self) -> None:
        """The coordinator stops: give back whatever it holds."""

    def beat(self) -> None:
        """The coordinator is alive (called with every heartbeat)."""

    @property
    def empty(self) -> bool:
        """Nothing is left to hand out, and nothing will be (this coordinator may stop)."""


class ChunkQueue:
    """The chunks of one coordinator in the given order (the plan's: largest work first)."""

    def __init__(self, chunks: Iterable[int]) -> None:
        self._pending = deque(chunks)

    def take(self) -> int | None:
        return self._pending.popleft() if self._pending else None

    def put_back(self, chunk: int) -> None:
        self._pending.appendleft(chunk)

    def finished(self, chunk: int) -> None:
        pass

    def release(self) -> None:
        pass

    def beat(self) -> None:
        pass

    @property
    def empty(self) -> bool:
        return not self._pending

    def __len__(self) -> int:
        return len(self._pending)
