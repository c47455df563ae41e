"""The Ray backend (`run --backend ray`): one long-lived actor per worker slot on a Ray cluster.

Each actor builds a jobs.schedule.worker.ChunkWorker once and is fed one chunk per call, so parts
and their completion records are those of a local run: a run started on Ray resumes locally and the
other way round. GPU pinning is Ray's: an actor asks for 1/workers_per_gpu of a GPU and Ray sets its
CUDA_VISIBLE_DEVICES. Actors report video starts, frames and part writes to a small event-log actor
(a video start is waited for, so a crash right after it is pinned on that video); this adapter turns
that log, the chunk calls' results and actor deaths into the scheduler's events.

Ray is imported only here and only when asked for: it is the optional extra `[ray]`.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.keypoints.environ import FORCED, spawning
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.rundir.folder import RunError
from phoenix_keypoints.jobs.schedule.devices import Card, gpu_cards, usable_cpus, visible_gpus
from phoenix_keypoints.jobs.schedule.events import ChunkTask, Died, Event, FramesDone
from phoenix_keypoints.jobs.schedule.worker import ChunkWorker, log_to_file

INSTALL_HINT = "pip install 'phoenix-keypoints[ray]'"


def require_ray() -> Any:
    """The ray module, or a RunError that says how to install the extra."""
    try:
        import ray
    except ImportError:
        raise RunError(f"--backend ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


class _EventLog:
    """An actor that keeps what chunk actors report until the driver collects it."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def report(self, ev: Event) -> None:
        self.events.append(ev)

    def drain(self) -> list[Event]:
        out, self.events = self.events, []
        return out


class _ChunkActor:
    """One slot: a ChunkWorker for the actor's lifetime, one chunk per `run` call."""

    def __init__(self, run_dir: str, slot: int, settings: dict, log: Any, log_path: str) -> None:
        import ray

        log_to_file(Path(log_path))
        self.ray, self.log = ray, log
        self.worker = ChunkWorker(slot, Path(run_dir), settings)

    def ready(self) -> Event:
        return self.worker.ready()

    def run(self, task: ChunkTask) -> Event:
        def send(ev: Event) -> None:
            if isinstance(ev, FramesDone):
                self.log.report.remote(ev)
            else:  # waited for: a crash right after must be pinned on this video (or the write)
                self.ray.get(self.log.report.remote(ev))

        return self.worker.run(task, send)


def short_reason(e: BaseException) -> str:
    """A short why for a failed actor call (Ray's own messages run to a paragraph)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if "creation task" in str(e) and lines:  # the actor's __init__ raised: its last line says why
        return f"its start failed: {lines[-1]}"[:300]
    if type(e).__name__ in ("ActorDiedError", "RayActorError", "ActorUnavailableError"):
        return "its process died"
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"[:300]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:300]


def actor_options(cluster: Any, num_gpus: int | None,
                  workers_per_gpu: int | None) -> list[dict[str, float]]:
    """Resources per actor: one CPU each, 1/workers_per_gpu of a GPU when there are GPUs."""
    res = cluster.cluster_resources()
    cpus = max(1, int(res.get("CPU", 1)))
    gpus = int(res.get("GPU", 0)) if num_gpus is None else num_gpus
    if gpus:
        per = workers_per_gpu or max(1, cpus // gpus)
        n = gpus * per
        opts = {"num_cpus": 1, "num_gpus": 1 / per}
    else:
        n = workers_per_gpu or cpus
        opts = {"num_cpus": 1, "num_gpus": 0}
    if n > cpus:
        messages.note(f"{n} workers asked, the Ray cluster has {cpus} CPUs: using {cpus}")
        n = cpus
    return [dict(opts) for _ in range(n)]


_STARTED: list[bool] = []  # [True] once this process started (or joined) the Ray it uses


def connect(ray: Any, address: str | None, num_gpus: int | None) -> bool:
    """Join the cluster at address, or start a local one; True when this process did (once: the
    GPU check before the run, cluster_cards, may have connected already), so it shuts it down."""
    if ray.is_initialized():
        return bool(_STARTED)
    # actors on any node get onnxruntime's telemetry off and no import from their folder; a
    # local cluster's processes also inherit this process's environment, cleaned (spawning)
    common = {"include_dashboard": False, "log_to_driver": False, "logging_level": "WARNING",
              "runtime_env": {"env_vars": dict(FORCED)}}
    if address:
        try:
            ray.init(address=address, **common)
        except ConnectionError as e:
            raise RunError(f"cannot reach the Ray cluster at --address {address} ({e}). Start it "
                           "with `ray start --head` (and `ray start --address HEAD:6379` on the "
                           "other nodes), or leave out --address for a local one.") from None
    else:
        gpus = len(visible_gpus()) if num_gpus is None else num_gpus
        with spawning():
            ray.init(num_cpus=len(usable_cpus()), num_gpus=gpus, **common)
    _STARTED[:] = [True]
    return True


def _node_cards() -> list[Card]:
    """This node's cards as its nvidia-smi reports them (run as a Ray task on each GPU node)."""
    return sorted(gpu_cards().values(), key=lambda c: int(c.index))


def cluster_cards(address: str | None, num_gpus: int | None) -> tuple[list[Card], int] | None:
    """The cards Ray actors of a run on the cluster at `address` may be given, each GPU node's
    read by a task on that node (its nvidia-smi: the driver's says nothing of other nodes), and
    the CPUs a GPU's workers share there (the fewest of any node). Every card of every GPU node
    counts (Ray places actors on any; a node whose nvidia-smi lists more cards than Ray gives it
    counts them all): the tightest bounds the run. None: no GPU in the cluster (or --num-gpus 0);
    no card where no node could say."""
    if num_gpus == 0:
        return None
    ray = require_ray()
    connect(ray, address, num_gpus)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    read = ray.remote(num_cpus=0, num_gpus=0)(_node_cards)
    cards: list[Card] = []
    cpus: list[int] = []
    for node in ray.nodes():
        gpus = int(node.get("Resources", {}).get("GPU", 0))
        if not node.get("Alive") or not gpus:
            continue
        strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        try:
            here = ray.get(read.options(scheduling_strategy=strategy).remote(), timeout=60)
        except Exception:  # noqa: BLE001 (a node that cannot answer: its cards are not known)
            here = []
        cards += here
        cpus.append(max(1, int(node["Resources"].get("CPU", 1)) // gpus))
    return (cards, min(cpus)) if cpus else None


class RayBackend:
    """Actors on a Ray cluster (the one at `address`, or a local one sized like a local run)."""

    name = "ray"

    def __init__(self, run_dir: Path, settings: dict, num_gpus: int | None,
                 workers_per_gpu: int | None, address: str | None = None, log_prefix: str = "") -> None:
        self.ray = require_ray()
        self.run_dir, self.settings, self.log_prefix = Path(run_dir), settings, log_prefix
        self._started_here = connect(self.ray, address, num_gpus)
        self.options = actor_options(self.ray, num_gpus, workers_per_gpu)
        self._actor_cls = self.ray.remote(_ChunkActor)
        self._log = self.ray.remote(_EventLog).options(num_cpus=0).remote()
        self._actors: dict[int, Any] = {}
        self._calls: dict[Any, int] = {}  # pending ready()/run() ref -> slot

    def slot_count(self) -> int:
        return len(self.options)

    def start(self, slot: int) -> None:
        log = self.run_dir / "logs" / f"{self.log_prefix}ray-worker-{slot}.log"
        actor = self._actor_cls.options(**self.options[slot], max_restarts=0).remote(
            str(self.run_dir), slot, self.settings, self._log, str(log))
        self._actors[slot] = actor
        self._calls[actor.ready.remote()] = slot

    def started(self) -> set[int]:
        return set(self._actors)

    def assign(self, slot: int, task: ChunkTask) -> None:
        self._calls[self._actors[slot].run.remote(task)] = slot

    def wait(self, timeout: float) -> list[Event]:
        from ray.exceptions import RayActorError, RayTaskError

        refs = list(self._calls)
        done = []
        if refs:
            done, _ = self.ray.wait(refs, num_returns=1, timeout=timeout)
            if done:
                done, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        events: list[Event] = list(self.ray.get(self._log.drain.remote()))
        for ref in done:
            slot = self._calls.pop(ref)
            try:
                events.append(self.ray.get(ref))
            except (RayActorError, RayTaskError) as e:
                events += self.ray.get(self._log.drain.remote())  # its last words first
                self._kill(slot)
                events.append(Died(slot, short_reason(e)))
        return events

    def _kill(self, slot: int) -> None:
        actor = self._actors.pop(slot, None)
        for ref in [r for r, s in self._calls.items() if s == slot]:
            del self._calls[ref]
        if actor is not None:
            with suppress(Exception):  # already gone
                self.ray.kill(actor)

    def stop(self, slot: int) -> None:
        self._kill(slot)

    def close(self, grace: float) -> None:
        for slot in list(self._actors):
            self._kill(slot)
        if self._started_here:
            self.ray.shutdown()
            _STARTED.clear()

