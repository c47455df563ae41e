"""How a batching family's values were computed, besides the versions (versions.py): the device,
the GPU's model, the execution provider with the options that decide its kernels, and the shape of
every model call. Recorded in every part, compared on resume.

Why (issue 47, measured on an H200): on CUDA the same frame gives other points at another batch
shape (pose logits up to 4.4e-3 apart, SimCC maxima flipping, detector boxes 0.69 px), on another
device (CPU against CUDA: up to 304 px on random-weight models), and under other kernels. At one
fixed shape an item's outputs do not depend on its neighbours or on zero padding and repeat
exactly, so the family pads every call to one shape on a GPU, and this record is what a part's
values were made under. A resume, a shard or a Ray actor computing under another record is
refused before its first frame (jobs/schedule/worker.py), naming both and how to go on, as for
versions. On the CPU an item's values are the same bytes in a call of any size (the family's
tests prove it on its models), so there the batch shape does not bind: a CPU run may resume with
another --batch-size.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

# the record's keys, in the order a message says them
KEYS = ("device", "gpu", "provider", "provider_options", "batch_shape")
# provider options that decide memory or streams, not which kernels compute the values: left out
# of the record (run.json's runtime has them)
NOT_VALUES = frozenset({"device_id", "gpu_mem_limit", "arena_extend_strategy", "user_compute_stream",
                        "has_user_compute_stream", "gpu_external_alloc", "gpu_external_free",
                        "gpu_external_empty_cache", "do_copy_in_default_stream",
                        "tunable_op_max_tuning_duration_ms", "enable_cuda_graph",
                        "sdpa_kernel", "user_sdpa_kernel"})


def value_options(options: dict[str, Any]) -> dict[str, str]:
    """The provider options that decide values, as text (onnxruntime gives them so)."""
    return {str(k): str(v) for k, v in sorted(options.items()) if k not in NOT_VALUES}


def _smi(query: str, env: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """(this process's GPU id: the first of CUDA_VISIBLE_DEVICES, nvidia-smi's lines for
    --query-gpu=`query` about it), [] where nvidia-smi cannot say."""
    from phoenix_keypoints.extract.keypoints.environ import clean_environment

    clean = clean_environment(env)
    first = (env or os.environ).get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    exe = shutil.which("nvidia-smi", path=clean.get("PATH", os.defpath))
    if exe is None:
        return first, []
    try:
        out = subprocess.run([exe, f"--query-gpu={query}", "--format=csv,noheader,nounits",
                              "-i", first], capture_output=True, text=True, timeout=20, env=clean)
    except (OSError, subprocess.SubprocessError):
        return first, []
    return first, out.stdout.strip().splitlines() if out.returncode == 0 else []


def gpu_name(env: dict[str, str] | None = None) -> str:
    """The model of this process's GPU (the first of CUDA_VISIBLE_DEVICES, as nvidia-smi names
    it), "" where it cannot be told (no nvidia-smi): then it does not bind."""
    _, lines = _smi("name", env)
    return lines[0].strip() if lines else ""


def gpu_memory_now(env: dict[str, str] | None = None) -> tuple[str, str, int, int] | None:
    """This process's GPU as nvidia-smi sees it now: (its id, name, total MiB, free MiB); None
    where it cannot say (what an out-of-memory refusal says the card had)."""
    first, lines = _smi("index,name,memory.total,memory.free", env)
    for line in lines:  # `-i` leaves one line (an id given as a UUID too); else the id's own
        cols = [c.strip() for c in line.split(",")]
        if len(cols) == 4 and (cols[0] == first or len(lines) == 1) and cols[2].isdigit() \
                and cols[3].isdigit():
            return cols[0], cols[1], int(cols[2]), int(cols[3])
    return None


def differences(made: dict[str, Any], now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{key: (made, now)} where a part made under `made` and a worker computing under `now` would
    give other values: the device, the provider, its value options, the GPU's model (where both
    are known) and, off the CPU, the batch shape. An empty record (a part written before parts
    recorded it) binds nothing."""
    if not made or not now:
        return {}
    out = {}
    for key in KEYS:
        a, b = made.get(key), now.get(key)
        if key == "gpu" and not (a and b):
            continue
        if key == "batch_shape" and made.get("device") == now.get("device") == "cpu":
            continue  # the CPU gives the same bytes in a call of any size
        if a != b:
            out[key] = (a, b)
    return out


def said(record: dict[str, Any]) -> str:
    """A record in words: 'cuda (NVIDIA H200; CUDAExecutionProvider, cudnn_conv_algo_search
    HEURISTIC), calls of 8 frames'."""
    if not record:
        return "not recorded"
    opts = ", ".join(f"{k} {v}" for k, v in (record.get("provider_options") or {}).items())
    inside = "; ".join(x for x in (record.get("gpu"), f"{record.get('provider')}"
                                   + (f", {opts}" if opts else "")) if x)
    shape = record.get("batch_shape")
    calls = ("calls of any size" if not shape else
             "calls of " + ", ".join(f"{n} ({k.replace('_', ' ')})" for k, n in shape.items()))
    return f"{record.get('device')} ({inside}), {calls}"


def flags(record: dict[str, Any]) -> str:
    """The options that compute under `record` again: '--device cuda --batch-size 8'."""
    shape = record.get("batch_shape") or {}
    batch = max(shape.values(), default=0)
    return f"--device {record.get('device')}" + (f" --batch-size {batch}" if batch > 1 else "")


def binding(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The record committed parts bind a run to: the first part's that has one ({}: none)."""
    return next((r for r in records if r), {})
