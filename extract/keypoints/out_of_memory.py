"""onnxruntime running out of a GPU's memory, said as memory: what the worker asked, what its
card had, what fits (issue 54 item 4), not "the model file is at fault".

A session call that raises is the model's fault on the CPU (an output of 10^12 floats: the model
asks for it, whatever the run). On a GPU the same words mean the run's workers x batch did not
fit the card: the session's arena reached its limit (`gpu_mem_limit`, the worker's share of its
card: BFCArena's "Available memory of A is smaller than requested bytes of R"), or the card itself
had no more (cudaMalloc's "CUDA failure 2: out of memory", BFCArena's "Failed to allocate memory
for requested buffer of size R" when it cannot grow, cuBLAS's and cuDNN's ALLOC_FAILED). So each
session made on CUDA is noted here (extract/families/wholebody/runner.py), and a call of one
whose error says so is refused as memory (GpuMemoryError, exit 2), naming the flags that fit.
"""

from __future__ import annotations

import re
from pathlib import Path

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.execution import gpu_memory_now

# onnxruntime's words when memory runs out (the CUDA provider's, its arena's, cuBLAS's, cuDNN's)
ARENA = re.compile(r"Available memory of (\d+) is smaller than requested bytes of (\d+)")
BUFFER = re.compile(r"Failed to allocate memory for requested buffer of size (\d+)")
CARD = re.compile(r"CUDA failure 2: out of memory|cudaErrorMemoryAllocation|"
                  r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|CUDA error.*out of memory",
                  re.I)

_on_gpu: dict[tuple[str, str], tuple[int | None, int]] = {}  # (flag, path) -> (arena limit, batch)


class GpuMemoryError(ModelFileError):
    """A model call ran out of its GPU's memory: the run's workers x batch size did not fit the
    card, not the model file; the message says what fits (exit 2)."""


def note_gpu_session(flag: str, path: Path, limit: int | None, batch: int | None) -> None:
    """A session of this model runs on CUDA here, with this arena limit (bytes; None: none) and
    `batch` items a call."""
    _on_gpu[(flag, str(path))] = (limit, max(1, int(batch or 1)))


def _mib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _asked(text: str, limit: int | None) -> tuple[str, int | None]:
    """(what the call asked in words, the bytes the session needed at least), from the error."""
    if m := ARENA.search(text):
        left, asked = int(m[1]), int(m[2])
        if limit:
            return (f"asked {_mib(asked)} more with {_mib(left)} of its session's {_mib(limit)} "
                    "arena left", limit - left + asked)
        return f"asked {_mib(asked)} more with {_mib(left)} of its arena left", None
    if m := BUFFER.search(text):
        return f"asked {_mib(int(m[1]))} more, which the card could not give", None
    return "asked more than the card could give", None


def _fits(batch: int, limit: int | None, needed: int | None) -> str:
    """The flags that fit: a batch the session's limit holds (its need taken to grow with the
    batch, which overstates it), or fewer workers per GPU (each share then larger)."""
    smaller = (max(1, batch * limit // needed) if limit and needed and needed > limit
               else batch // 2)
    fewer = "fewer --workers-per-gpu (each worker's share of the card is then larger)"
    if batch > 1 and smaller < batch:
        return f"--batch-size {smaller} or {fewer}"
    return fewer


def gpu_memory_refusal(error: BaseException, flag: str, path: Path, inputs: int = 1) -> str:
    """Why a call of a session on CUDA failed, in words of memory, where onnxruntime's error says
    memory ran out ("" otherwise, or where the session runs on the CPU)."""
    noted = _on_gpu.get((flag, str(path)))
    text = str(error)
    if noted is None or not (ARENA.search(text) or BUFFER.search(text) or CARD.search(text)):
        return ""
    limit, batch = noted
    asked, needed = _asked(text, limit)
    card = gpu_memory_now()
    had = (f"GPU {card[0]} ({card[1]}, {card[3] / 1024:.1f} of {card[2] / 1024:.1f} GiB free now)"
           if card else "its GPU (nvidia-smi cannot say how much is free)")
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    words = re.sub(r"^.*Status Message: (?:\S+ )?(?:void\* \S+\([^)]*\) )?", "", first)[:200]
    return (f"{flag} {path}: the GPU ran out of memory in a call of {inputs} input(s) at "
            f"--batch-size {batch}: this worker {asked}; {had}. It is memory, not the model "
            f"file (onnxruntime: {words!r}): what fits is {_fits(batch, limit, needed)}, or "
            "freeing the card of other processes; then run the same command again (docs/gpu.md).")
