"""The environment the tool's processes run with and hand on: no search path that reaches the
current folder, and onnxruntime's telemetry off.

Why: the current folder is often the corpus (`cd corpus && phoenix-keypoints run --dataset .`),
which is untrusted input, and libraries change os.environ when imported: `import cv2` sets
`LD_LIBRARY_PATH=<site-packages>/cv2/../../lib64:`, whose empty last entry the dynamic loader reads
as the current folder, so a `libpthread.so.0` in the corpus would run in every worker spawned
after it. An empty or relative entry of any search path below is the current folder (or a folder
under it) for whoever reads it; only absolute entries are kept. Children also get:
- `PYTHONSAFEPATH=1`: a spawned interpreter (`python -c ...`, as multiprocessing starts its
  workers and resource tracker; `python -m phoenix_keypoints` in an sbatch script) would otherwise import
  from the current folder first, so a `multiprocessing.py` there would run. Python 3.11+ reads it;
  3.10 has no such switch.
- `ORT_DISABLE_TELEMETRY=1`: onnxruntime (1.32 at least) sends usage events to Microsoft about 10 s
  after it loads and keeps a device id under ~/.cache/Microsoft; only this variable, set before
  the library loads, stops it (`onnxruntime.disable_telemetry_events()` does not).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

TELEMETRY_OFF = {"ORT_DISABLE_TELEMETRY": "1"}
FORCED = {**TELEMETRY_OFF, "PYTHONSAFEPATH": "1"}

# variable: (the characters that separate its entries, whether a bare file name is allowed)
SEARCH_PATHS: dict[str, tuple[str, bool]] = {
    "LD_LIBRARY_PATH": (":;", False),  # the dynamic loader: glibc splits at both
    "LD_PRELOAD": (": ", True),  # a bare name is looked up on the (cleaned) library path
    "LD_AUDIT": (":", True),
    "PYTHONPATH": (os.pathsep, False),  # an empty entry becomes the current folder
    "PATH": (os.pathsep, False),  # programs started by name: nvidia-smi, sbatch
    "GCONV_PATH": (":", False),  # glibc's iconv modules
}


def _entries(value: str, separators: str) -> list[str]:
    for sep in separators[1:]:
        value = value.replace(sep, separators[0])
    return value.split(separators[0])


def _kept(entry: str, bare_ok: bool) -> bool:
    """An entry that cannot mean the current folder: absolute, or (where allowed) a bare file name
    that the loader looks up on its search path."""
    return entry.startswith("/") or (bare_ok and bool(entry) and "/" not in entry)


def clean_search_path(name: str, value: str) -> str | None:
    """`value` of search path `name` with its empty and relative entries left out; None when no
    entry is left (the variable is better unset than empty: an empty PATH finds nothing)."""
    separators, bare_ok = SEARCH_PATHS[name]
    kept = [e for e in _entries(value, separators) if _kept(e, bare_ok)]
    return separators[0].join(kept) if kept else None


def clean_environment(env: Mapping[str, str] | None = None,
                      forced: Mapping[str, str] = FORCED) -> dict[str, str]:
    """A copy of `env` (default os.environ) for a child process: search paths cleaned, `forced` set."""
    out = dict(os.environ if env is None else env)
    for name in SEARCH_PATHS:
        if name in out:
            value = clean_search_path(name, out.pop(name))
            if value is not None:
                out[name] = value
    out.update(forced)
    return out


def _apply(env: Mapping[str, str]) -> dict[str, str | None]:
    """Make os.environ hold `env`'s values for the keys that differ; return their old values."""
    old: dict[str, str | None] = {}
    for key in set(os.environ) | set(env):
        if os.environ.get(key) != env.get(key):
            old[key] = os.environ.get(key)
            if env.get(key) is None:
                del os.environ[key]
            else:
                os.environ[key] = env[key]
    return old


def clean_os_environ() -> None:
    """This process's own search paths cleaned and telemetry off, for good: what the command line
    does first. PYTHONSAFEPATH is left to the children the tool starts (spawning): a program that
    calls jobs.cli.main in its own process may go on to run scripts that import from their folder."""
    _apply(clean_environment(forced=TELEMETRY_OFF))


@contextmanager
def spawning(**extra: str) -> Iterator[None]:
    """os.environ clean (plus `extra`) while children start, then as it was.

    For spawn points inside someone else's process (`run_job`, `extract_keypoints` in a notebook):
    multiprocessing and Ray's local start take no environment, they inherit os.environ, which a
    library may have changed since (cv2 sets LD_LIBRARY_PATH again on every fresh import)."""
    old = _apply({**clean_environment(), **extra})
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def telemetry_off() -> None:
    """ORT_DISABLE_TELEMETRY=1 in this process, before onnxruntime loads; a warning where it
    already has loaded without it (imported by the caller first), as then nothing can stop it."""
    if "onnxruntime" in sys.modules and os.environ.get("ORT_DISABLE_TELEMETRY") != "1":
        warnings.warn("onnxruntime was imported before phoenix-keypoints could turn its telemetry "
                      "off, so it may send usage events to Microsoft from this process: set "
                      "ORT_DISABLE_TELEMETRY=1 before importing onnxruntime.", RuntimeWarning,
                      stacklevel=3)
    os.environ.update(TELEMETRY_OFF)
