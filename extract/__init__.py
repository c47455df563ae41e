"""What happens to frames. Rooms, lowest first: keypoints/ (frames to keypoints), sources/ (where
a video's frames come from), corpora/ (which videos a corpus lists), outputs/ (tensors and
exports), inspect/ (report and pictures); sample.py writes the embedded demo dataset. A room
imports only the rooms its __init__ names; extract/ never imports jobs/ (tests/test_codebase.py).

The public face, for a notebook's one clip and for code that reads a run's outputs
(docs/python.md):

    from extract import extract_keypoints, load_split, as_fixed_size, changed_frames

- `extract_keypoints(source, estimator="holistic", fps=None, **options)`: one video file, folder
  of frames, list of images or RGB array to keypoints in this process, the numbers a run gives
  (extract.clip)
- `load_split(run_dir, split, tag=None)`: a tensor set's split, memory-mapped (extract.outputs.loader)
- `as_fixed_size(column, width)`: a landmark column as fixed-size lists (extract.keypoints.schema)
- `changed_frames(root, recorded, content=False)`: frames on disk no longer what their rows were
  made from (extract.sources.provenance)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

PUBLIC = {
    "extract_keypoints": "extract.clip",
    "Keypoints": "extract.clip",
    "load_split": "extract.outputs.loader",
    "SplitData": "extract.outputs.loader",
    "as_fixed_size": "extract.keypoints.schema",
    "changed_frames": "extract.sources.provenance",
}
__all__ = list(PUBLIC)


def __getattr__(name: str) -> Any:
    """Imported when first asked for: `import extract` stays free of numpy and pyarrow."""
    if name in PUBLIC:
        return getattr(import_module(PUBLIC[name]), name)
    raise AttributeError(f"module 'extract' has no attribute {name!r}")
