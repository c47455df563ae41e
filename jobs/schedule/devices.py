"""What this process may use: CPUs (affinity, not the machine's count) and GPUs to pin workers to."""

from __future__ import annotations

import os
import shutil
import subprocess
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
