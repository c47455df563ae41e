"""What this process may use: CPUs (affinity, not the machine's count) and GPUs to pin workers to."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from phoenix_keypoints.extract.keypoints.environ import clean_environment


def usable_cpus() -> list[int]:
    """CPUs this process may run on (cgroup/affinity aware, unlike os.cpu_count())."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def visible_gpus() -> list[str]:
    """GPU ids a worker can be pinned to: CUDA_VISIBLE_DEVICES if set, else what nvidia-smi lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [g.strip() for g in env.split(",") if g.strip()]
        # "-1" or "" mean no GPU; ids after an invalid one are invisible to CUDA as well
        out = []
        for g in ids:
            if g.startswith("-"):
                break
            out.append(g)
        return out
    clean = clean_environment()  # not a nvidia-smi in the current folder (an empty PATH entry)
    exe = shutil.which("nvidia-smi", path=clean.get("PATH", os.defpath))
    if exe:
        try:
            res = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20, env=clean)
        except (OSError, subprocess.SubprocessError):
            return []
        if res.returncode == 0:
            return [str(i) for i, line in enumerate(res.stdout.splitlines())
                    if line.startswith("GPU ")]
    return []


@dataclass(frozen=True)
class Slot:
    """One worker: its index, the CUDA_VISIBLE_DEVICES value it gets, the CPUs it is pinned to."""

    index: int
    gpu: str
    cpus: tuple[int, ...]


def worker_slots(num_gpus: int | None, workers_per_gpu: int | None) -> list[Slot]:
    """num_gpus x workers_per_gpu slots (workers_per_gpu CPU-only slots when there is no GPU).

    Defaults: every visible GPU, and as many workers in total as CPUs this process may use. Worker i
    gets GPU i mod num_gpus and CPU i mod cpus: one graph per core, never two sharing one while
    another core idles.
    """
    gpus = visible_gpus()
    if num_gpus is None:
        num_gpus = len(gpus)
    cpus = usable_cpus()
    if workers_per_gpu is None:
        workers_per_gpu = max(1, len(cpus) // num_gpus) if num_gpus else len(cpus)
    total = num_gpus * workers_per_gpu if num_gpus else workers_per_gpu
    ids = gpus if len(gpus) >= num_gpus else [str(i) for i in range(num_gpus)]
    return [
        Slot(i, ids[i % num_gpus] if num_gpus else "", (cpus[i % len(cpus)],))
        for i in range(total)
    ]


# --- the GPUs' memory: what fits, and the defaults of a GPU node (issue 47) ---------------------
MIB = 2**20
USABLE = 0.9  # of a card's free memory the workers may take together (the rest: the driver,
# fragmentation, an estimate that falls short)
GPU_BATCHES = (16, 8, 4, 2, 1)  # the default batch on a GPU: the largest that fits (16: below)
# 16, not more: every call is padded to the batch size on a GPU (fixed shapes), so a video's last
# batch costs up to batch - 1 frames of padding (PHOENIX videos hold ~110 frames), and issue 47's
# H200 gained little past 8-16 at 16 workers; scripts/bench/gpu.py measures 8, 16 and 32.


@dataclass(frozen=True)
class Card:
    """One GPU as nvidia-smi lists it: its index, name, total and free memory (MiB)."""

    index: str
    name: str
    total_mib: int
    free_mib: int

    def said(self) -> str:
        return (f"GPU {self.index} ({self.name}, {self.free_mib / 1024:.1f} of "
                f"{self.total_mib / 1024:.1f} GiB free)")


def gpu_cards() -> dict[str, Card]:
    """Each GPU's memory as nvidia-smi reports it now ({} without nvidia-smi or a GPU)."""
    clean = clean_environment()
    exe = shutil.which("nvidia-smi", path=clean.get("PATH", os.defpath))
    if exe is None:
        return {}
    try:
        res = subprocess.run([exe, "--query-gpu=index,name,memory.total,memory.free",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20, env=clean)
    except (OSError, subprocess.SubprocessError):
        return {}
    cards = {}
    for line in res.stdout.splitlines() if res.returncode == 0 else []:
        cols = [c.strip() for c in line.split(",")]
        if len(cols) == 4 and cols[0].isdigit() and cols[2].isdigit() and cols[3].isdigit():
            cards[cols[0]] = Card(cols[0], cols[1], int(cols[2]), int(cols[3]))
    return cards


@dataclass(frozen=True)
class GpuPlan:
    """Workers per GPU and batch size for a run on GPUs, each worker's share of its card (bytes:
    its sessions' arena limit) and the lines that say so at start."""

    workers_per_gpu: int
    batch_size: int
    share: int
    lines: tuple[str, ...]


class DoesNotFit(Exception):
    """What was asked cannot fit the cards' memory; the message says what does (exit 2)."""


def _fits(need: Callable[[int], int], room: int, workers: int, batch: int) -> bool:
    return workers * need(batch) <= room


def gpu_plan(cards: list[Card], cpus: int, workers_per_gpu: int | None, batch_size: int | None,
             need: Callable[[int], int]) -> GpuPlan:
    """The workers per GPU and batch size that fit every card's free memory, each worker taking
    need(batch) bytes: what was asked where it fits (refused, DoesNotFit, where not), and for what
    was not asked the defaults of a GPU node: a worker per CPU core (cpus: the cores for each GPU)
    and the largest batch of GPU_BATCHES that fits them, fewer workers where even a batch of 1
    does not."""
    room = int(min(c.free_mib for c in cards) * MIB * USABLE)
    tightest = min(cards, key=lambda c: c.free_mib)
    workers = workers_per_gpu or max(1, cpus)
    batches = [batch_size] if batch_size else list(GPU_BATCHES)
    batch = next((b for b in batches if _fits(need, room, workers, b)), None)
    if batch is None and workers_per_gpu is None:
        batch = batches[-1]
        workers = room // need(batch)
    if batch is None or workers < 1:
        raise DoesNotFit(_does_not_fit(tightest, room, workers_per_gpu or max(1, cpus),
                                       batch_size or 1, need))
    lowered = workers < (workers_per_gpu or max(1, cpus))
    lines = (f"{tightest.said()}: {workers} worker(s) a GPU x batch {batch}, each ~"
             f"{need(batch) / 2**30:.1f} GiB (estimated from the models), "
             f"{workers * need(batch) / 2**30:.1f} of {room / 2**30:.1f} GiB usable"
             + ("" if batch_size else "; batch chosen to fit")
             + (f"; {workers} workers, not one per core: more do not fit" if lowered else ""),)
    return GpuPlan(workers, batch, room // workers, lines)



def _does_not_fit(card: Card, room: int, workers: int, batch: int,
                  need: Callable[[int], int]) -> str:
    """Why workers x batch does not fit `card`, and what does."""
    most_workers = room // need(batch)
    most_batch = next((b for b in range(batch, 0, -1) if _fits(need, room, workers, b)), 0)
    fits = [f"--workers-per-gpu {most_workers} at --batch-size {batch}" if most_workers else "",
            f"--batch-size {most_batch} at --workers-per-gpu {workers}" if most_batch else ""]
    what = " or ".join(f for f in fits if f) or "no worker: the models alone do not fit"
    total = workers * need(batch) / 2**30
    return (f"{workers} worker(s) a GPU at --batch-size {batch} need ~{total:.1f} GiB "
            f"({need(batch) / 2**30:.1f} GiB each, estimated from the models), more than "
            f"{card.said()} can give them ({room / 2**30:.1f} GiB, {USABLE:.0%} of what is free). "
            f"What fits: {what}; or free the GPU's memory.")
