"""`run --backend ray`: the same chunks and parts as the local path, on the actors of a Ray cluster.

One long-lived actor per worker slot builds the MediaPipe graph once (jobs.worker.ChunkWorker, the
class a local worker process uses) and is fed one chunk per call, so the parts, their completion
records and the resume rules are exactly those of a local run: a run started on Ray can be resumed
locally and the other way round. GPU pinning is Ray's: an actor asks for 1/workers_per_gpu of a GPU
and Ray sets CUDA_VISIBLE_DEVICES for it.

A small progress actor hears from every chunk actor which video it is in (a blocking call at each
video start, so that a crash is pinned on the right video) and how many frames it did; the driver
polls it for the one progress bar and the heartbeat. A chunk actor that dies (or raises) is replaced
and its chunk retried; a video that kills its actor `max_attempts` times is marked failed and the
rest of its chunk redone without it, as on the local path.

Ray is imported only here and only when asked for: it is the optional extra `[ray]`.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections import Counter, deque
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from jobs.devices import usable_cpus, visible_gpus
from jobs.local import HEARTBEAT_S, MAX_START_FAILURES, Outcome
from jobs.rundir import RunDir, RunError, write_json
from jobs.worker import ChunkWorker, _log_to_file

INSTALL_HINT = "pip install 'phoenix-keypoints[ray]'"


def require_ray() -> Any:
    """The ray module, or a RunError that says how to install the extra."""
    try:
        import ray
    except ImportError:
        raise RunError(f"--backend ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


class _Progress:
    """Where each slot's actor is (chunk, video, frames so far): the driver's view of the actors."""

    def __init__(self) -> None:
        self.slots: dict[int, dict[str, Any]] = {}

    def _slot(self, slot: int) -> dict[str, Any]:
        return self.slots.setdefault(slot, {"pid": None, "host": None, "chunk": None,
                                            "video": None, "frames": 0, "writing": False})

    def hello(self, slot: int, pid: int, host: str) -> None:
        self._slot(slot).update(pid=pid, host=host)

    def start(self, slot: int, chunk: int | None) -> None:
        self._slot(slot).update(chunk=chunk, video=None, frames=0, writing=False)

    def video(self, slot: int, chunk: int, video: str) -> None:
        self._slot(slot).update(chunk=chunk, video=video)

    def frames(self, slot: int, n: int) -> None:
        self._slot(slot)["frames"] += n

    def writing(self, slot: int, chunk: int) -> None:
        self._slot(slot).update(chunk=chunk, video=None, writing=True)

    def snapshot(self) -> dict[int, dict[str, Any]]:
        return {k: dict(v) for k, v in self.slots.items()}


class _ChunkActor:
    """One slot: a ChunkWorker for the actor's lifetime, one chunk per `run` call."""

    def __init__(self, run_dir: str, slot: int, progress: Any, log_name: str) -> None:
        import ray

        _log_to_file(Path(run_dir) / "logs" / f"{log_name}ray-worker-{slot}.log")
        self.slot, self.progress, self.ray = slot, progress, ray
        self.worker = ChunkWorker(Path(run_dir))
        ray.get(progress.hello.remote(slot, os.getpid(), socket.gethostname()))

    def run(self, chunk: int, failed: dict[str, str]) -> tuple:
        ray, progress, slot = self.ray, self.progress, self.slot

        def send(msg: tuple) -> None:
            if msg[0] == "video":  # waited for: a crash right after must be pinned on this video
                ray.get(progress.video.remote(slot, chunk, msg[2]))
            elif msg[0] == "frames":
                progress.frames.remote(slot, msg[1])
            elif msg[0] == "writing":
                ray.get(progress.writing.remote(slot, chunk))

        return self.worker.run(chunk, failed, send)


@dataclass
class _Slot:
    index: int
    actor: Any
    ref: Any = None
    chunk: int | None = None


def _how(e: BaseException) -> str:
    """A short why for a failed chunk call (Ray's own messages run to a paragraph)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if "creation task" in str(e) and lines:  # the actor's __init__ raised: its last line says why
        return f"its start failed: {lines[-1]}"[:300]
    if type(e).__name__ in ("ActorDiedError", "RayActorError", "ActorUnavailableError"):
        return "its process died"
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"[:300]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:300]


class RayExecutor:
    """Runs chunks on Ray actors; the interface of jobs.local.LocalExecutor."""

    def __init__(self, rd: RunDir, num_gpus: int | None, workers_per_gpu: int | None,
                 address: str | None = None, max_attempts: int = 3, label: str = "",
                 tag: str = "") -> None:
        self.rd = rd
        self.num_gpus = num_gpus
        self.workers_per_gpu = workers_per_gpu
        self.address = address
        self.max_attempts = max_attempts
        self.label = label
        self.tag = tag
        self._stop = 0
        self.workers = 0

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._stop = signum

    def _connect(self, ray: Any) -> bool:
        """Join the cluster at --address, or start a local one sized like a local run."""
        if ray.is_initialized():
            return False
        common = {"include_dashboard": False, "log_to_driver": False, "logging_level": "WARNING"}
        if self.address:
            try:
                ray.init(address=self.address, **common)
            except ConnectionError as e:
                raise RunError(f"cannot reach the Ray cluster at --address {self.address} ({e}). "
                               "Start it with `ray start --head` (and `ray start --address HEAD:6379` "
                               "on the other nodes), or leave out --address for a local one.") from None
            return True
        gpus = len(visible_gpus()) if self.num_gpus is None else self.num_gpus
        ray.init(num_cpus=len(usable_cpus()), num_gpus=gpus, **common)
        return True

    def actor_options(self, ray: Any) -> list[dict[str, float]]:
        """Resources per actor: one CPU each, 1/workers_per_gpu of a GPU when there are GPUs."""
        res = ray.cluster_resources()
        cpus = max(1, int(res.get("CPU", 1)))
        gpus = int(res.get("GPU", 0)) if self.num_gpus is None else self.num_gpus
        if gpus:
            per = self.workers_per_gpu or max(1, cpus // gpus)
            n = gpus * per
            opts = {"num_cpus": 1, "num_gpus": 1 / per}
        else:
            n = self.workers_per_gpu or cpus
            opts = {"num_cpus": 1, "num_gpus": 0}
        if n > cpus:
            tqdm.write(f"note: {n} workers asked, the Ray cluster has {cpus} CPUs: using {cpus}")
            n = cpus
        return [dict(opts) for _ in range(n)]

    def run(self, todo: list[int], chunk_frames: dict[int, int],
            failed: dict[int, dict[str, str]], frames_total: int, frames_done: int) -> Outcome:
        ray = require_ray()
        out = Outcome(failed={c: dict(failed.get(c, {})) for c in todo})
        if not todo:
            return out
        started_here = self._connect(ray)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        bar = tqdm(total=frames_total, initial=frames_done, unit="frame", dynamic_ncols=True,
                   desc=self.label or "frames (ray)", smoothing=0.05,
                   mininterval=0.5 if os.isatty(2) else 30)
        slots: list[_Slot] = []
        try:
            self._loop(ray, todo, out, bar, slots, frames_total, frames_done)
        finally:
            for s in slots:
                with suppress(Exception):  # already gone
                    ray.kill(s.actor)
            for s, h in old.items():
                signal.signal(s, h)
            bar.close()
            if started_here:
                ray.shutdown()
        if self._stop > 0:
            out.signal = self._stop
        return out

    def _loop(self, ray: Any, todo: list[int], out: Outcome, bar: tqdm, slots: list[_Slot],
              frames_total: int, frames_done: int) -> None:
        from ray.exceptions import RayActorError, RayTaskError

        actor_cls = ray.remote(_ChunkActor)
        progress = ray.remote(_Progress).options(num_cpus=0).remote()
        options = self.actor_options(ray)
        log_name = f"{self.tag}-" if self.tag else ""

        def new_actor(i: int) -> Any:
            return actor_cls.options(**options[i], max_restarts=0).remote(
                str(self.rd.path), i, progress, log_name)

        slots.extend(_Slot(i, new_actor(i)) for i in range(min(len(options), len(todo))))
        self.workers = len(slots)
        pending = deque(todo)
        crashes: Counter[tuple[int, str]] = Counter()
        start_failures = 0
        committed = frames_done
        started, last_beat = time.time(), 0.0
        rate_mark = (time.monotonic(), frames_done)
        snap: dict[int, dict[str, Any]] = {}

        def fatal(msg: str) -> None:
            if not out.error:
                out.error = msg
            self._stop = self._stop or -1

        def on_failure(s: _Slot, how: str) -> None:
            nonlocal start_failures
            chunk = s.chunk
            where = ray.get(progress.snapshot.remote()).get(s.index, {})
            video = where.get("video") if where.get("chunk") == chunk else None
            began = where.get("chunk") == chunk and (video is not None or where.get("writing"))
            pending.appendleft(chunk)
            if not began:
                start_failures += 1
                if start_failures >= MAX_START_FAILURES:
                    fatal(f"Ray actors die while starting ({how}); see {self.rd.path}/logs/ and "
                          "Ray's logs (/tmp/ray/session_latest/logs), and check that mediapipe "
                          "imports on every node.")
            else:
                start_failures = 0
                where_s = video or "<writing part>"
                crashes[(chunk, where_s)] += 1
                n = crashes[(chunk, where_s)]
                tqdm.write(f"ray actor {s.index} (pid {where.get('pid')}) failed ({how}) in chunk "
                           f"{chunk}, {'video ' + video if video else where_s}; attempt {n}/"
                           f"{self.max_attempts}")
                if n >= self.max_attempts:
                    if video is None:
                        fatal(f"writing the part of chunk {chunk} killed its actor {n} times "
                              f"({how}).")
                    else:
                        out.failed[chunk][video] = f"worker died {n} times on it ({how})"
                        tqdm.write(f"giving up on video {video}: marked failed; the rest of "
                                   f"chunk {chunk} is redone without it")
            with suppress(Exception):  # already gone
                ray.kill(s.actor)
            s.ref, s.chunk = None, None
            if not self._stop:
                s.actor = new_actor(s.index)

        def beat(final: bool = False) -> None:
            now = time.monotonic()
            rate = (bar.n - rate_mark[1]) / max(1e-9, now - rate_mark[0])
            write_json(self.rd.progress_file(self.tag), {
                "pid": os.getpid(), "host": socket.gethostname(), "label": self.label,
                "backend": "ray", "started": started, "updated": time.time(),
                "running": not final, "frames_total": frames_total, "frames_done": bar.n,
                "frames_per_s": rate, "chunks_todo": len(todo), "chunks_done": len(out.done),
                "workers": [{"slot": s.index, "pid": snap.get(s.index, {}).get("pid"),
                             "host": snap.get(s.index, {}).get("host"), "gpu": "ray",
                             "cpus": [], "chunk": s.chunk,
                             "video": snap.get(s.index, {}).get("video") if s.chunk is not None
                             else None} for s in slots],
            })

        try:
            while not self._stop:
                for s in slots:
                    if s.ref is None and pending:
                        s.chunk = pending.popleft()
                        ray.get(progress.start.remote(s.index, s.chunk))
                        s.ref = s.actor.run.remote(s.chunk, out.failed[s.chunk])
                busy = [s for s in slots if s.ref is not None]
                if not busy and not pending:
                    break
                ready, _ = ray.wait([s.ref for s in busy], num_returns=1, timeout=0.5)
                if ready:
                    ready, _ = ray.wait([s.ref for s in busy], num_returns=len(busy), timeout=0)
                for s in busy:
                    if s.ref not in ready:
                        continue
                    try:
                        res = ray.get(s.ref)
                    except (RayActorError, RayTaskError) as e:
                        on_failure(s, _how(e))
                        continue
                    if res[0] == "done":
                        out.done.append(res[1])
                        committed += res[2]
                        start_failures = 0
                    else:  # ("error", chunk, why): the part could not be written
                        fatal(f"chunk {res[1]}: {res[2]}. Free space or fix permissions, then run "
                              "the same command again to resume.")
                    s.ref, s.chunk = None, None
                    ray.get(progress.start.remote(s.index, None))
                snap = ray.get(progress.snapshot.remote())
                flying = sum(snap.get(s.index, {}).get("frames", 0) for s in slots
                             if s.chunk is not None and snap.get(s.index, {}).get("chunk") == s.chunk)
                bar.update(committed + flying - bar.n)
                if time.monotonic() - last_beat > HEARTBEAT_S:
                    beat()
                    last_beat = time.monotonic()
        finally:
            beat(final=True)
