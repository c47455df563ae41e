"""The scheduler and its failure policy against a fake backend on a simulated clock: no processes,
no waiting, milliseconds per test. The real-process fault tests (test_faults.py) show the same
policy with real signals; these pin down every branch of it."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from phoenix_keypoints.jobs.rundir.heartbeat import Heartbeat
from phoenix_keypoints.jobs.schedule.events import ChunkTask, VideoRef
from phoenix_keypoints.jobs.schedule.progress import Progress
from phoenix_keypoints.jobs.schedule.retries import FailurePolicy, FailVideo, Fatal, Retry
from phoenix_keypoints.jobs.schedule.scheduler import Outcome, Scheduler, run
from phoenix_keypoints.jobs.schedule.simulation import FakeBackend, Faults, SimClock
from phoenix_keypoints.jobs.schedule.workqueue import ChunkQueue

# 4 chunks of 2-3 videos, 10-40 frames each
CHUNKS = {c: [VideoRef("train", f"v{c}-{i}", f"f/v{c}-{i}", tuple(f"images{j}.png"
                                                                    for j in range(1, n + 1)))
              for i, n in enumerate(sizes)]
          for c, sizes in enumerate([(10, 20), (30, 40, 10), (20, 20), (40, 10)])}
TOTAL = sum(len(v.files) for vs in CHUNKS.values() for v in vs)


def make_task(chunk: int, skip: dict[str, str]) -> ChunkTask:
    return ChunkTask(chunk, "/data", "fp", tuple(CHUNKS[chunk]), dict(skip))


def schedule(slots: int = 2, faults: Faults | None = None, heartbeat: Path | None = None,
             chunks: list[int] | None = None, policy: FailurePolicy | None = None,
             ) -> tuple[Outcome, FakeBackend, Scheduler]:
    clock = SimClock()
    backend = FakeBackend(clock, slots, speed=lambda slot: 20.0, startup_s=2.0, faults=faults)
    todo = list(CHUNKS) if chunks is None else chunks
    frames = sum(len(v.files) for c in todo for v in CHUNKS[c])
    progress = Progress("", backend.name, frames, 0, len(todo), heartbeat, show_bar=False,
                        clock=clock.now)
    sched = Scheduler(backend, ChunkQueue(todo), make_task, progress, policy, clock.now,
                      chunks_wanted=len(todo))
    return run(sched), backend, sched


def test_every_chunk_once_and_every_worker_busy() -> None:
    out, backend, sched = schedule(slots=3)
    assert sorted(out.done) == list(CHUNKS) and len(out.done) == len(set(out.done))
    assert out.error == "" and out.signal == 0 and out.failed == {}
    assert out.workers == 3 and backend.started_at == {0: 0.0, 1: 0.0, 2: 0.0}
    assert sched.progress.frames_done == TOTAL
    t = out.timings
    assert t.first_frame == pytest.approx(2.0 + 1 / 20)  # start-up, then one frame
    assert t.first_idle is not None and t.first_idle <= t.last_frame


def test_no_more_workers_than_chunks() -> None:
    out, backend, _ = schedule(slots=8, chunks=[2, 3])
    assert out.workers == 2 and sorted(backend.started_at) == [0, 1]
    assert sorted(out.done) == [2, 3]


def test_one_crash_is_retried_and_costs_nothing_else(capsys: pytest.CaptureFixture) -> None:
    out, _, sched = schedule(faults=Faults(kill_video=Counter({"v1-1": 1})))
    err = capsys.readouterr().err
    assert "died (SIGKILL) in chunk 1, video v1-1; attempt 1/3" in err
    assert sorted(out.done) == list(CHUNKS) and out.failed == {} and not out.error
    assert sched.progress.frames_done == TOTAL  # the lost chunk's frames were taken back


def test_video_that_always_kills_is_failed_alone(capsys: pytest.CaptureFixture) -> None:
    out, _, _ = schedule(faults=Faults(kill_video=Counter({"v1-1": 99})))
    err = capsys.readouterr().err
    assert [ln.split("; ")[-1] for ln in err.splitlines() if "video v1-1;" in ln] == [
        "attempt 1/3", "attempt 2/3", "attempt 3/3"]
    assert "giving up on video v1-1: marked failed; the rest of chunk 1 is redone without it" in err
    assert list(out.failed) == [1] and list(out.failed[1]) == ["v1-1"]
    assert "worker died 3 times on it (SIGKILL)" in out.failed[1]["v1-1"]
    assert sorted(out.done) == list(CHUNKS) and not out.error


def test_failed_video_is_skipped_in_the_redo() -> None:
    """The chunk handed out after the third death carries the failed video in task.skip."""
    tasks: list[ChunkTask] = []

    def spy(chunk: int, skip: dict[str, str]) -> ChunkTask:
        tasks.append(make_task(chunk, skip))
        return tasks[-1]

    clock = SimClock()
    backend = FakeBackend(clock, 1, speed=lambda s: 20.0,
                          faults=Faults(kill_video=Counter({"v0-1": 3})))
    sched = Scheduler(backend, ChunkQueue([0]), spy,
                      Progress("", "simulated", 30, 0, 1, None, show_bar=False, clock=clock.now),
                      clock=clock.now, chunks_wanted=1)
    run(sched)
    assert [t.skip for t in tasks] == [{}, {}, {}, {"v0-1": sched.outcome.failed[0]["v0-1"]}]


def test_a_chunk_that_killed_a_worker_is_handed_out_one_video_at_a_time() -> None:
    """A worker may have several videos under way (lockstep): after a death in a chunk, that chunk
    is handed out with one_by_one, so the next death is counted against its own video; the
    chunks that never killed a worker keep lockstep."""
    clock = SimClock()
    backend = FakeBackend(clock, 1, speed=lambda s: 20.0,
                          faults=Faults(kill_video=Counter({"v1-1": 1})))
    given: list[ChunkTask] = []
    assign = backend.assign
    backend.assign = lambda slot, task: (given.append(task), assign(slot, task))[1]
    sched = Scheduler(backend, ChunkQueue([0, 1, 2]), make_task,
                      Progress("", "simulated", 150, 0, 3, None, show_bar=False, clock=clock.now),
                      clock=clock.now, chunks_wanted=3)
    out = run(sched)
    assert sorted(out.done) == [0, 1, 2] and not out.failed
    assert [(t.chunk, t.one_by_one) for t in given] == [(0, False), (1, False), (1, True),
                                                        (2, False)]


def test_deaths_outside_a_video_stop_the_run() -> None:
    out, _, _ = schedule(slots=1, faults=Faults(die_writing=Counter({0: 3})))
    assert "chunk 0 killed its worker 3 times outside any video" in out.error
    assert "Check the disk and memory" in out.error
    assert 0 not in out.done


def test_workers_that_cannot_start_stop_the_run() -> None:
    out, _, _ = schedule(slots=2, faults=Faults(die_starting=3))
    assert out.error.startswith("workers die while starting (SIGKILL)")
    assert "RUN/logs/" in out.error and out.done == []


def test_start_failures_forgiven_once_work_gets_done() -> None:
    out, _, _ = schedule(slots=2, faults=Faults(die_starting=2))
    assert not out.error and sorted(out.done) == list(CHUNKS)


def test_part_that_cannot_be_written_is_fatal() -> None:
    out, _, sched = schedule(slots=1, faults=Faults(write_fails={1}))
    assert out.error.startswith("chunk 1: cannot write part: No space left")
    assert "Free space or fix permissions" in out.error
    assert 1 not in out.done and sched.progress.frames_done == 30  # chunk 0's, not chunk 1's


def test_stop_signal_ends_without_new_chunks() -> None:
    clock = SimClock()
    backend = FakeBackend(clock, 1, speed=lambda s: 20.0)
    progress = Progress("", backend.name, TOTAL, 0, 4, None, show_bar=False, clock=clock.now)
    sched = Scheduler(backend, ChunkQueue(list(CHUNKS)), make_task, progress, clock=clock.now,
                      chunks_wanted=4)
    original = sched.handle

    def handle(ev):  # SIGTERM arrives as the first part is committed
        original(ev)
        if sched.outcome.done:
            sched.request_stop(signal.SIGTERM)

    sched.handle = handle
    out = run(sched)
    assert out.signal == signal.SIGTERM and out.done == [0]


def test_heartbeat_fields(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    out, _, _ = schedule(slots=2, heartbeat=path)
    raw = json.loads(path.read_text())
    assert set(raw) == set(Heartbeat.__dataclass_fields__)
    assert raw["running"] is False and raw["frames_done"] == TOTAL == raw["frames_total"]
    assert raw["chunks_done"] == 4 and raw["backend"] == "simulated"
    assert [w["slot"] for w in raw["workers"]] == [0, 1]
    assert set(raw["workers"][0]) == {"slot", "pid", "host", "gpu", "cpus", "chunk", "video", "frames"}


def test_policy_verdicts() -> None:
    p = FailurePolicy(max_attempts=2, max_start_failures=2)
    assert p.died_in_chunk(5, "a", "SIGKILL") == Retry(1)
    assert p.died_in_chunk(5, "b", "SIGKILL") == Retry(1)  # counted per (chunk, video)
    assert p.died_in_chunk(6, "a", "SIGKILL") == Retry(1)  # and per chunk
    assert p.died_in_chunk(5, "a", "SIGSEGV") == FailVideo(2, "a", "worker died 2 times on it "
                                                                   "(SIGSEGV)")
    assert p.died_in_chunk(7, None, "SIGKILL") == Retry(1)
    assert isinstance(p.died_in_chunk(7, None, "SIGKILL"), Fatal)
    assert p.died_starting("exit status 1") == Retry(1)
    p.chunk_committed()
    assert p.died_starting("exit status 1") == Retry(1)
    assert isinstance(p.died_starting("exit status 1"), Fatal)
