"""The GPU memory a whole-body worker takes at a batch size, estimated from its models before any
worker starts (jobs/schedule/devices.py checks workers x this against each card's free memory and
picks the defaults from it), and the split of a worker's share between its two sessions (each
session's arena limit, onnxruntime's gpu_mem_limit).

The estimate: CONTEXT (the CUDA context, cuDNN's and cuBLAS's handles and workspaces: a worker's,
whatever its models) + twice each model's weights (the file and its external data; onnxruntime's
copies while it places them) + batch x PER_PIXEL x each model's input pixels (the activations of
one item). Measured on an H200 (issue 47; onnxruntime-gpu 1.31.1, realistic-cost stand-ins of
rtmlib's models, the arena then grown by powers of two): the light pair (YOLOX-tiny 416 + RTMW-m
256x192) took 1.0 / 1.9 / 4.1 GB a worker at batch 1 / 8 / 32, the heavy pair (YOLOX-m 640 +
RTMW-x-l 384x288) 1.6 / 3.5-5 / 15.6 GB. The estimate gives 1.3 / 2.4 / 6.2 and 1.5 / 4.2 / 13.1 GiB:
above the light pair's, near the heavy pair's (whose batch-32 figure was the power-of-two arena's,
which runs now grow as asked instead). scripts/bench/gpu.py reports each run's measured peak beside
the estimate (docs/gpu.md).
"""

from __future__ import annotations

from typing import Any

MIB = 2**20
CONTEXT = 1024 * MIB
PER_PIXEL = 768  # bytes of activations per input pixel of one item
MODELS = ("detector", "pose_model")


def model_need(record: dict[str, Any], batch: int) -> int:
    """Bytes one model's session takes at `batch` items a call (its arena, besides CONTEXT)."""
    weights = int(record.get("size", 0)) + sum(int(e.get("size", 0))
                                                for e in record.get("external_data", []))
    size = record.get("input_size") or {}
    pixels = int(size.get("height", 0)) * int(size.get("width", 0))
    return 2 * weights + int(batch) * PER_PIXEL * pixels


def worker_need(settings: dict[str, Any], batch: int) -> int:
    """Bytes of GPU memory one worker takes at `batch` (its recorded model files' sizes)."""
    return CONTEXT + sum(model_need(settings[k], batch) for k in MODELS if k in settings)


def session_limits(settings: dict[str, Any], run: dict[str, Any]) -> dict[str, int] | None:
    """Each model's arena limit (bytes) from the worker's share of its card (runtime
    `gpu_memory`, decided by the coordinator): the share less CONTEXT, split as their needs are,
    but each at least 1.5 x its own estimate (within the share): an estimate that falls short
    then costs some of the margin the check left, not the run; None: no share given."""
    share = run.get("gpu_memory")
    if not share:
        return None
    batch = int(run.get("batch_size") or 1)
    needs = {k: model_need(settings[k], batch) for k in MODELS if k in settings}
    total = sum(needs.values()) or 1
    arena = max(int(share) - CONTEXT, total)
    return {k: min(arena, max(arena * n // total, n * 3 // 2)) for k, n in needs.items()}
