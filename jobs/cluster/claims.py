"""Chunks handed out across the shards of a SLURM array through claim files on the shared filesystem.

Every shard takes the next chunk in plan order that has no part and no live claim, so a shard that
starts early or runs on faster cores simply does more, and none idles while another has work left.
A claim is a file created with O_CREAT|O_EXCL (atomic on local filesystems and NFSv3+): of two shards
racing for a chunk, exactly one creates it. It names its shard; the shard proves it lives by touching
its lease file with every heartbeat. A claim whose shard's lease is older than LEASE_S (measured
against the filesystem's own clock, through a file this shard just touched), or whose shard is this
one (an earlier run of the same array index: the shard lock makes two at once impossible), is
broken by renaming it away (one renamer wins) and claimed anew. Should a shard that was thought dead
still finish its chunk, both write the same part and the atomic rename keeps one whole copy.

A shard that ends cleanly removes its claims and leaves `shard-I.done`; one that dies leaves them to
expire. The merger role (the shard that merges parts while the others extract) is a claim too.
"""

from __future__ import annotations

import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Protocol

LEASE_S = 120.0  # well above NFS attribute caching (acregmax 60 s) and a heartbeat's 2 s
RESCAN_S = 5.0  # how often a shard with nothing to take looks again (claims may expire)
MERGER = "merger"


class ClaimStore(Protocol):
    """Where claims live: files for real shards, memory for the simulator."""

    def claim(self, key: str) -> bool: ...

    def holder(self, key: str) -> str | None: ...

    def alive(self, holder: str) -> bool: ...

    def take_over(self, key: str, holder: str) -> bool: ...

    def release(self, key: str) -> None: ...

    def committed(self, chunk: int) -> bool: ...

    def beat(self) -> None: ...

    def finish(self, done: bool) -> None: ...


def chunk_key(chunk: int) -> str:
    return f"chunk-{chunk:06d}"


class FileClaims:
    """Claims as files in RUN/claims/, for shard `shard` of a run folder."""

    def __init__(self, run_dir: Path, shard: int, part_path: Callable[[int], Path]) -> None:
        self.dir = Path(run_dir) / "claims"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.shard = str(shard)
        self.part_path = part_path
        # shard, host, pid and a token: which run of which shard holds a claim
        self.me = f"{self.shard} {socket.gethostname()} {os.getpid()} {time.time_ns():x}"
        (self.dir / f"shard-{self.shard}.done").unlink(missing_ok=True)
        self.beat()

    def _lease(self, shard: str) -> Path:
        return self.dir / f"shard-{shard}.alive"

    def claim(self, key: str) -> bool:
        try:
            fd = os.open(self.dir / key, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(self.me + "\n")
        if key.startswith("chunk-"):  # temp parts of it were left by a shard that died writing it
            part = self.part_path(int(key.removeprefix("chunk-")))
            for tmp in part.parent.glob(f".{part.stem}.*.tmp"):
                tmp.unlink(missing_ok=True)
        return True

    def holder(self, key: str) -> str | None:
        """Who holds the claim: "shard host pid" (None: nobody)."""
        try:
            return (self.dir / key).read_text().strip() or None
        except OSError:
            return None

    def _mtime(self, path: Path) -> float | None:
        """mtime as the file server has it now (open revalidates NFS's cached attributes)."""
        try:
            with open(path, "rb") as f:
                return os.fstat(f.fileno()).st_mtime
        except OSError:
            return None

    def alive(self, holder: str) -> bool:
        shard = holder.split()[0]
        if holder == self.me:
            return True
        if shard == self.shard:
            return False  # an earlier run of this array index: this one holds the shard's lock
        seen, now = self._mtime(self._lease(shard)), self._mtime(self._lease(self.shard))
        return seen is not None and now is not None and now - seen < LEASE_S

    def take_over(self, key: str, holder: str) -> bool:
        """Break `holder`'s (dead) claim and claim the key; False if another shard got there first.

        The rename moves whatever claim is there; if it is not the dead one (another shard took
        the key over meanwhile), it is linked back, which fails only if yet another claim exists.
        """
        grave = self.dir / f".{key}.stale.{self.shard}.{os.getpid()}.{time.monotonic_ns()}"
        try:
            os.rename(self.dir / key, grave)
        except FileNotFoundError:
            return self.claim(key)  # released meanwhile: claim it like a free one
        try:
            if grave.read_text().strip() != holder:
                with suppress(FileExistsError):
                    os.link(grave, self.dir / key)
                return False
        finally:
            grave.unlink(missing_ok=True)
        return self.claim(key)

    def release(self, key: str) -> None:
        if self.holder(key) == self.me:
            (self.dir / key).unlink(missing_ok=True)

    def committed(self, chunk: int) -> bool:
        return self.part_path(chunk).exists()

    def beat(self) -> None:
        """Prove this shard lives: touch its lease (the server's clock sets the time)."""
        lease = self._lease(self.shard)
        lease.touch()
        os.utime(lease, None)

    def finish(self, done: bool) -> None:
        """Leaving: drop the lease; `done` (nothing left to take) leaves the completion marker."""
        self._lease(self.shard).unlink(missing_ok=True)
        if done:
            (self.dir / f"shard-{self.shard}.done").write_text(self.me + "\n")


class ClaimQueue:
    """The work queue of one shard: its own put-back chunks first, then the next claimable chunk."""

    def __init__(self, chunks: Iterable[int], store: ClaimStore, clock: Callable[[], float],
                 wait_for_all: bool = False) -> None:
        self.order = list(chunks)
        self.store, self.clock = store, clock
        self.wait_for_all = wait_for_all  # the merger: stay until every chunk is committed
        self.held: set[int] = set()
        self._mine: deque[int] = deque()  # claimed, handed out again after a worker died
        self._cursor = 0  # chunks before it are committed or claimed by someone
        self._claimed_by_others: list[int] = []
        self._next_scan = float("-inf")
        self.exhausted = False

    def take(self) -> int | None:
        if self._mine:
            return self._mine.popleft()
        while self._cursor < len(self.order):
            chunk = self.order[self._cursor]
            self._cursor += 1
            if self._try(chunk):
                return chunk
        return self._rescan()

    def _try(self, chunk: int) -> bool:
        """Claim chunk unless it is committed or a live shard holds it."""
        if self.store.committed(chunk):
            return False
        key = chunk_key(chunk)
        if self.store.claim(key) or self._take_from_dead(key):
            if self.store.committed(chunk):  # committed between the check and the claim
                self.store.release(key)
                return False
            self.held.add(chunk)
            return True
        self._claimed_by_others.append(chunk)
        return False

    def _take_from_dead(self, key: str) -> bool:
        holder = self.store.holder(key)
        return holder is not None and not self.store.alive(holder) and \
            self.store.take_over(key, holder)

    def _rescan(self) -> int | None:
        """Chunks others held: taken over if their shard died, forgotten once committed."""
        if self.clock() < self._next_scan:
            return None
        self._next_scan = self.clock() + RESCAN_S
        waiting = [c for c in self._claimed_by_others if not self.store.committed(c)]
        self._claimed_by_others = []
        for i, chunk in enumerate(waiting):
            if self._try(chunk):
                self._claimed_by_others += waiting[i + 1:]
                return chunk
        self.exhausted = not self._claimed_by_others
        return None

    def put_back(self, chunk: int) -> None:
        self._mine.appendleft(chunk)

    def beat(self) -> None:
        self.store.beat()

    def finished(self, chunk: int) -> None:
        self.held.discard(chunk)
        self.store.release(chunk_key(chunk))

    def release(self) -> None:
        for chunk in list(self.held):
            self.store.release(chunk_key(chunk))
        self.held.clear()
        self._mine.clear()

    @property
    def empty(self) -> bool:
        """Nothing of ours left to hand out: a shard may leave (the merger waits until every chunk
        is committed, found so by its last rescan)."""
        if self._mine or self._cursor < len(self.order):
            return False
        return self.exhausted if self.wait_for_all else True
