#!/usr/bin/env python3
"""Replay the project's own plan and scheduler on a simulated cluster: how busy would the cores be?

Real code, simulated time: the real plan (jobs.run.plan, on the release's real per-video frame counts
from ../shared/data/phoenix-2014-T-index), one real Scheduler per node (jobs.schedule.scheduler) with the
real claim queue (jobs.cluster.claims, its store kept in memory) and failure policy, driven by a fake
backend (jobs.schedule.simulation) whose workers are timings: each node's array task starts after a
SLURM-like delay, each worker is ready `--startup-s` later (interpreter, mediapipe import, graph)
and then does its videos at F x its core's speed factor (normal around 1, `--speed-spread`). Parts
are merged beside the extraction in plan order, as jobs.run.merge.BackgroundMerge does, at
`--merge-frames-per-s` (measured, docs/performance.md); the job ends when the merged outputs are
written.

efficiency = frames / (F x worker-seconds allocated), each worker counted from its task's start to
the end of the whole job, merge included.

    .venv/bin/python scripts/bench/simulate.py --nodes 4 --workers-per-node 32 --frames-per-s 20 --json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_INDEX  # noqa: E402
from fabricate import index_dataset  # noqa: E402

from phoenix_keypoints.jobs.cluster.claims import RESCAN_S, ClaimQueue  # noqa: E402
from phoenix_keypoints.jobs.run.options import RunOptions  # noqa: E402
from phoenix_keypoints.jobs.run.plan import handout_order  # noqa: E402
from phoenix_keypoints.jobs.run.prepare import new_run  # noqa: E402
from phoenix_keypoints.jobs.schedule.chunks import Chunks  # noqa: E402
from phoenix_keypoints.jobs.schedule.progress import Progress  # noqa: E402
from phoenix_keypoints.jobs.schedule.scheduler import Scheduler  # noqa: E402
from phoenix_keypoints.jobs.schedule.simulation import FakeBackend, MemoryClaims, SimClock  # noqa: E402

# The merging shard's pace, parts -> keypoints.parquet + tensors in one pass: measured with
# scripts/bench/merge.py on a 16-core server node (docs/results/device-h100.json: 23,137 frames/s);
# the 2-core test VM does 12,438 (docs/results/merge-full.json). docs/performance.md shows both.
MERGE_FRAMES_PER_S = 23_000.0
FINALIZE_S = 1.0  # close both writers, fsync, rename, run.json
START_NODE = -1  # clock owners for the driver's own events
TICK = -2


@dataclass
class Node:
    index: int
    start: float
    backend: FakeBackend
    sched: Scheduler
    ended: float | None = None


@dataclass
class Replay:
    clock: SimClock
    nodes: list[Node]
    board: MemoryClaims.Board
    commits: dict[int, float] = field(default_factory=dict)


def build(args: argparse.Namespace) -> tuple[Replay, Chunks, dict[int, int]]:
    rng = random.Random(args.seed)
    ds = index_dataset(args.index)
    workers = args.nodes * args.workers_per_node
    _, plan = new_run(ds, RunOptions().resolved(), workers)
    chunks = Chunks.from_plan(plan, "/sim", "sim")
    frames = {c: chunks.frames(c) for c in chunks}
    order = handout_order(frames, workers)
    clock, board = SimClock(), MemoryClaims.Board()
    replay = Replay(clock, [], board)
    delays = sorted(rng.uniform(0, args.start_delay_max) for _ in range(args.nodes))
    spread = [max(0.5, rng.gauss(1.0, args.speed_spread)) for _ in range(workers)]
    mean = sum(spread) / len(spread)  # F is the cluster's mean speed: factors average exactly 1
    for i, delay in enumerate(delays):
        w = args.workers_per_node
        speeds = [f / mean for f in spread[i * w:(i + 1) * w]]
        backend = FakeBackend(clock, args.workers_per_node,
                              speed=lambda slot, s=speeds: args.frames_per_s * s[slot],
                              startup_s=args.startup_s, host=f"node{i}")
        queue = ClaimQueue(order, MemoryClaims(board, i), clock.now, wait_for_all=i == 0)
        progress = Progress("", backend.name, 0, 0, len(order), None, show_bar=False,
                            clock=clock.now)
        sched = Scheduler(backend, queue, chunks.task, progress, clock=clock.now,
                          chunks_wanted=len(order), on_commit=lambda c: _commit(replay, c))
        replay.nodes.append(Node(i, delay, backend, sched))
        clock.at(delay, START_NODE, i)
    return replay, chunks, frames


def _commit(replay: Replay, chunk: int) -> None:
    replay.board.committed.add(chunk)
    replay.commits[chunk] = replay.clock.now()


def drive(replay: Replay) -> None:
    """The discrete-event loop: every event to its node's scheduler, which decides what follows."""
    clock = replay.clock
    by_id = {n.backend.id: n for n in replay.nodes}
    while clock.next_time() is not None:
        owner, payload = clock.pop()
        if owner == START_NODE:
            node = replay.nodes[payload]
            node.sched.begin()
            clock.at(clock.now() + RESCAN_S, TICK, payload)
        elif owner == TICK:
            node = replay.nodes[payload]
            if node.ended is None:
                clock.at(clock.now() + RESCAN_S, TICK, payload)
        else:
            node = by_id[owner]
            for ev in node.backend.deliver(payload):
                node.sched.handle(ev)
        if node.ended is None:
            node.sched.dispatch()
            if node.sched.finished:
                node.ended = clock.now()
                node.sched.queue.release()
                node.backend.close(0)


def merge_end(replay: Replay, frames: dict[int, int], rate: float) -> float:
    """When BackgroundMerge's rule (parts in plan order, each once committed) writes the outputs."""
    t = 0.0
    for chunk in sorted(frames):
        t = max(t, replay.commits[chunk]) + frames[chunk] / rate
    return t + FINALIZE_S


def report(replay: Replay, frames: dict[int, int], args: argparse.Namespace) -> dict:
    end = merge_end(replay, frames, args.merge_frames_per_s)
    total = sum(frames.values())
    allocated = sum((end - n.start) * args.workers_per_node for n in replay.nodes)
    last_commit = max(replay.commits.values())
    first_frame = min(n.sched.outcome.timings.first_frame or end for n in replay.nodes)
    first_idle = min((n.sched.outcome.timings.first_idle or end) for n in replay.nodes)
    return {
        "nodes": args.nodes, "workers_per_node": args.workers_per_node,
        "frames_per_s": args.frames_per_s, "frames": total, "chunks": len(frames),
        "efficiency": round(total / (args.frames_per_s * allocated), 4),
        "wall_s": round(end, 1),
        "start_delays_s": [round(n.start, 1) for n in replay.nodes],
        "startup_s": round(first_frame - replay.nodes[0].start, 2),
        "tail_s": round(last_commit - first_idle, 1),
        "merge_after_last_part_s": round(end - last_commit, 1),
        "node_idle_s": [round(end - (n.ended or end), 1) for n in replay.nodes],
        "chunks_per_node": [len(n.sched.outcome.done) for n in replay.nodes],
        "assumptions": {"startup_s": args.startup_s, "speed_spread": args.speed_spread,
                        "start_delay_max_s": args.start_delay_max,
                        "merge_frames_per_s": args.merge_frames_per_s, "seed": args.seed},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--workers-per-node", type=int, required=True)
    p.add_argument("--frames-per-s", type=float, required=True, help="one worker's speed (F)")
    p.add_argument("--json", action="store_true", help="last line: the result as JSON")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed-spread", type=float, default=0.05,
                   help="std. dev. of the per-core speed factor (default 0.05)")
    p.add_argument("--start-delay-max", type=float, default=30.0,
                   help="array tasks start uniformly within this many seconds (default 30)")
    p.add_argument("--startup-s", type=float, default=2.0,
                   help="task start to a worker's first frame: interpreter, mediapipe import, graph, "
                        "first frame (default 2.0, measured: docs/performance.md)")
    p.add_argument("--merge-frames-per-s", type=float, default=MERGE_FRAMES_PER_S,
                   help=f"the merging shard's pace (default {MERGE_FRAMES_PER_S:g}, measured)")
    p.add_argument("--index", type=Path, default=SHARED_INDEX)
    args = p.parse_args(argv)
    if not (args.index / "PHOENIX-2014-T.train.frame_counts.tsv").is_file():
        print(f"error: release index not found at {args.index}", file=sys.stderr)
        return 2
    replay, _, frames = build(args)
    drive(replay)
    result = report(replay, frames, args)
    for k, v in result.items():
        if k != "assumptions" and not isinstance(v, list):
            print(f"{k:>26}: {v}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
