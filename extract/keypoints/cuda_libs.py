"""The CUDA and cuDNN libraries onnxruntime-gpu needs, found where pip puts them (the nvidia-*
wheels: `pip install 'onnxruntime-gpu[cuda,cudnn]'`, or PyTorch's) and loaded before onnxruntime is.

onnxruntime-gpu 1.31 is built for CUDA 13 and cuDNN 9 and finds their libraries by name, through
the dynamic loader: on a node without a system CUDA they sit in site-packages (nvidia/cu13/lib for
CUDA 13, nvidia/<component>/lib for CUDA 12, nvidia/cudnn/lib), where the loader does not look, and
CUDA then falls back to the CPU with a warning only. `onnxruntime.preload_dlls()` finds them only
in the site-packages onnxruntime itself is in. So every process of the tool that may run CUDA (the
coordinator, which asks onnxruntime for its providers, and each worker) loads them here first, by
full path, from the absolute entries of sys.path only (never the current folder, often the corpus:
environ.py), where a GPU is there to use (nvidia-smi on the clean PATH, or CUDA_VISIBLE_DEVICES
naming one). A system CUDA on the loader's path needs none of this; a library found neither way is
left to onnxruntime's own message.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
from pathlib import Path

# (folder under site-packages, library file), in load order: cuBLASLt before cuBLAS (it needs it),
# as onnxruntime-gpu's own preload_dlls orders them on Linux
LIBRARIES = (
    ("nvidia/cu13/lib", "libcublasLt.so.13"), ("nvidia/cu13/lib", "libcublas.so.13"),
    ("nvidia/cu13/lib", "libcurand.so.10"), ("nvidia/cu13/lib", "libcufft.so.12"),
    ("nvidia/cu13/lib", "libcudart.so.13"), ("nvidia/cu13/lib", "libnvrtc.so.13"),
    ("nvidia/cublas/lib", "libcublasLt.so.12"), ("nvidia/cublas/lib", "libcublas.so.12"),
    ("nvidia/curand/lib", "libcurand.so.10"), ("nvidia/cufft/lib", "libcufft.so.11"),
    ("nvidia/cuda_runtime/lib", "libcudart.so.12"), ("nvidia/cuda_nvrtc/lib", "libnvrtc.so.12"),
    ("nvidia/cudnn/lib", "libcudnn.so.9"),
)
_loaded: list[str] = []


def found(paths: list[str] | None = None) -> list[Path]:
    """The libraries of LIBRARIES under the absolute entries of `paths` (default sys.path), the
    first of each name, in load order."""
    roots = [Path(p) for p in (sys.path if paths is None else paths) if os.path.isabs(p)]
    out: dict[str, Path] = {}
    for folder, name in LIBRARIES:
        if name in out:
            continue
        for root in roots:
            lib = root / folder / name
            if lib.is_file():
                out[name] = lib
                break
    return list(out.values())


def gpu_here() -> bool:
    """Whether this process may use a GPU: CUDA_VISIBLE_DEVICES names one, or (unset) an
    nvidia-smi is on the clean PATH."""
    from phoenix_keypoints.extract.keypoints.environ import clean_environment

    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        first = env.split(",")[0].strip()
        return bool(first) and not first.startswith("-")
    return shutil.which("nvidia-smi", path=clean_environment().get("PATH", os.defpath)) is not None


def preload(paths: list[str] | None = None) -> list[str]:
    """Load the CUDA and cuDNN libraries found (once a process), where a GPU is here and
    onnxruntime is not loaded yet; returns the files loaded. A library that will not load (another
    CUDA's) is skipped: onnxruntime then says what it misses."""
    if _loaded or "onnxruntime" in sys.modules or not gpu_here():
        return list(_loaded)
    for lib in found(paths):
        try:
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        _loaded.append(str(lib))
    return list(_loaded)
