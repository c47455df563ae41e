"""phoenix-keypoints: sign-language corpora to keypoints and model-input tensors (README.md).

The import name is the tool's own, so that a researcher's `extract.py` or `jobs.py` beside a
notebook cannot stand in for the tool's modules: every internal import goes through
`phoenix_keypoints.extract` / `phoenix_keypoints.jobs`. The face (docs/python.md):

    from phoenix_keypoints import extract_keypoints, run_job, load_split

The code lives in the repository's top-level folders extract/ (what happens to frames) and jobs/
(how the work is split, run, recovered and merged); in a checkout this folder's committed links
extract -> ../extract and jobs -> ../jobs make them its subpackages by path alone (so pyright and
jedi follow every import), and the wheel holds the files behind the links.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

_HERE = Path(__file__).parent
if not (_HERE / "extract").is_dir():  # a checkout whose links came out as files (Windows)
    raise ImportError(
        f"{_HERE / 'extract'} is not a folder: this checkout's links phoenix_keypoints/extract and "
        "phoenix_keypoints/jobs were checked out as plain files; clone again with "
        "`git clone -c core.symlinks=true` (on Windows with Developer Mode on) "
        "(docs/development.md#a-checkout)")

PUBLIC = {
    "extract_keypoints": "phoenix_keypoints.extract.clip",
    "Keypoints": "phoenix_keypoints.extract.clip",
    "load_split": "phoenix_keypoints.extract.outputs.loader",
    "SplitData": "phoenix_keypoints.extract.outputs.loader",
    "as_fixed_size": "phoenix_keypoints.extract.keypoints.schema",
    "changed_frames": "phoenix_keypoints.extract.sources.provenance",
    "run_job": "phoenix_keypoints.jobs.api",
    "RunResult": "phoenix_keypoints.jobs.api",
    "RunRefused": "phoenix_keypoints.jobs.api",
}
__all__ = [*PUBLIC, "__version__"]


def __getattr__(name: str) -> Any:
    """Imported when first asked for: `import phoenix_keypoints` stays free of numpy and pyarrow."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("phoenix-keypoints")
        except PackageNotFoundError:
            return "unknown"
    if name in PUBLIC:
        return getattr(import_module(PUBLIC[name]), name)
    raise AttributeError(f"module 'phoenix_keypoints' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
