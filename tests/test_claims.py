"""Claim files on a real filesystem: shards racing for chunks (real processes), a dead shard's claims
taken over, an earlier run of the same shard index, and the plan/schedule of a small local try."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from phoenix_keypoints.jobs.cluster import claims as claims_mod
from phoenix_keypoints.jobs.cluster.claims import ClaimQueue, FileClaims, chunk_key

CHUNKS = list(range(300))


def _shard(run_dir: str, shard: int, start, out: mp.Queue) -> None:
    """One shard: take chunks until none is left, 'commit' each by writing its part file."""
    root = Path(run_dir)
    store = FileClaims(root, shard, lambda c: root / "parts" / f"chunk-{c:06d}.parquet")
    queue = ClaimQueue(CHUNKS, store, time.monotonic)
    start.wait()  # a barrier: every shard is ready (spawned and imported) before any takes one
    taken = []
    while (chunk := queue.take()) is not None:
        part = root / "parts" / f"chunk-{chunk:06d}.parquet"
        with open(part, "x") as f:  # "x": a second writer of the same part would fail here
            f.write(str(shard))
        queue.finished(chunk)
        taken.append(chunk)
    queue.release()
    store.finish(done=True)
    out.put((shard, taken))


def test_racing_shards_take_every_chunk_exactly_once(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(5), ctx.Queue()  # the 4 shards and this process
    procs = [ctx.Process(target=_shard, args=(str(tmp_path), i, start, out)) for i in range(4)]
    for p in procs:
        p.start()
    start.wait(timeout=120)
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    taken = [c for chunks in results.values() for c in chunks]
    assert sorted(taken) == CHUNKS, "every chunk once, none twice"
    assert sum(1 for chunks in results.values() if chunks) >= 2, "the shards shared the work"
    claims = tmp_path / "claims"
    assert not list(claims.glob("chunk-*")), "claims are removed once parts are committed"
    assert sorted(p.name for p in claims.glob("shard-*.done")) == [f"shard-{i}.done" for i in range(4)]


def _store(root: Path, shard: int) -> FileClaims:
    (root / "parts").mkdir(exist_ok=True)
    return FileClaims(root, shard, lambda c: root / "parts" / f"chunk-{c:06d}.parquet")


def test_live_claim_is_left_alone_dead_one_taken_over(tmp_path: Path) -> None:
    a, b = _store(tmp_path, 0), _store(tmp_path, 1)
    assert a.claim(chunk_key(5))
    queue = ClaimQueue([5, 6], b, time.monotonic)
    assert queue.take() == 6, "chunk 5 is claimed by a live shard"
    old = time.time() - claims_mod.LEASE_S - 10
    os.utime(tmp_path / "claims" / "shard-0.alive", (old, old))  # shard 0 stopped beating
    queue = ClaimQueue([5], b, time.monotonic)
    assert queue.take() == 5 and b.holder(chunk_key(5)) == b.me


def test_earlier_run_of_same_shard_is_taken_over_at_once(tmp_path: Path) -> None:
    first = _store(tmp_path, 2)
    assert first.claim(chunk_key(7))  # then its node died: no release, no done marker
    again = _store(tmp_path, 2)  # the resubmitted array task 2
    assert ClaimQueue([7], again, time.monotonic).take() == 7


def test_two_takers_of_a_dead_claim_one_wins(tmp_path: Path) -> None:
    dead, b, c = _store(tmp_path, 0), _store(tmp_path, 1), _store(tmp_path, 2)
    assert dead.claim(chunk_key(3))
    (tmp_path / "claims" / "shard-0.alive").unlink()  # gone
    seen = b.holder(chunk_key(3))
    assert seen == c.holder(chunk_key(3)) and not b.alive(seen) and not c.alive(seen)
    assert [b.take_over(chunk_key(3), seen), c.take_over(chunk_key(3), seen)] == [True, False]
    assert b.holder(chunk_key(3)) == b.me, "the winner's claim stands, not broken by the loser"


def test_committed_chunks_are_not_taken(tmp_path: Path) -> None:
    store = _store(tmp_path, 0)
    (tmp_path / "parts" / "chunk-000001.parquet").write_text("x")
    queue = ClaimQueue([0, 1, 2], store, time.monotonic)
    assert [queue.take(), queue.take(), queue.take()] == [0, 2, None]
    assert queue.empty is False or queue.held == {0, 2}


@pytest.mark.parametrize("slots", [32])
def test_small_local_try_uses_every_worker_it_starts(shared_index: Path, slots: int) -> None:
    """--limit-videos 2 on the full release with 32 worker slots: whole videos make 6 chunks, so 6
    workers start and each gets one; none of the 32 slots idles while a video waits."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
    from fabricate import index_dataset

    from phoenix_keypoints.extract.corpora.base import Dataset
    from phoenix_keypoints.jobs.run.options import RunOptions
    from phoenix_keypoints.jobs.run.plan import handout_order
    from phoenix_keypoints.jobs.run.prepare import new_run
    from phoenix_keypoints.jobs.schedule.chunks import Chunks
    from phoenix_keypoints.jobs.schedule.progress import Progress
    from phoenix_keypoints.jobs.schedule.scheduler import Scheduler, run
    from phoenix_keypoints.jobs.schedule.simulation import FakeBackend, SimClock
    from phoenix_keypoints.jobs.schedule.workqueue import ChunkQueue

    full = index_dataset(shared_index)
    first2 = [v for s in ("dev", "test", "train") for v in [x for x in full.videos if x.split == s][:2]]
    ds = Dataset(full.root, full.layout, first2)
    _, plan = new_run(ds, RunOptions(limit_videos=2).resolved(), slots)
    chunks = Chunks.from_plan(plan, "/data", "fp")
    frames = {c: chunks.frames(c) for c in chunks}
    assert len(frames) == 6, "one chunk per video"
    clock = SimClock()
    backend = FakeBackend(clock, slots, speed=lambda s: 20.0)
    sched = Scheduler(backend, ChunkQueue(handout_order(frames, slots)), chunks.task,
                      Progress("", "simulated", sum(frames.values()), 0, 6, None, show_bar=False,
                               clock=clock.now), clock=clock.now, chunks_wanted=len(frames))
    out = run(sched)
    assert out.workers == 6 and sorted(backend.started_at) == list(range(6))
    assert sorted(out.done) == sorted(frames)
    per_worker = {s.index for s in sched.slots.values()}
    assert per_worker == set(range(6))
