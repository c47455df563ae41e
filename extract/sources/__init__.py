"""The frame sources by kind, and the dispatch of recorded rows to the source that made them.

See extract/sources/base.py for what a source is and how to add one.

May import: extract.keypoints.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.sources.base import FrameSource, Mismatch, parse_image

# kind -> "module:class"; modules are imported when first used (a decoder only where it is needed)
SOURCES: dict[str, str] = {
    "folder": "phoenix_keypoints.extract.sources.folder:FolderSource",
    "archive": "phoenix_keypoints.extract.sources.archive:ArchiveSource",
    "video": "phoenix_keypoints.extract.sources.video:VideoSource",
}


@cache
def get(kind: str) -> FrameSource:
    """The source of that kind (one instance per process: it may keep handles open)."""
    if kind not in SOURCES:
        raise KeyError(f"unknown frame source {kind!r}; known: {', '.join(SOURCES)}")
    module, cls = SOURCES[kind].split(":")
    return getattr(importlib.import_module(module), cls)()


@cache
def _fragments() -> dict[str, str]:
    """`#key=` of each source's images -> its kind (only sources whose images have one)."""
    out = {}
    for kind in SOURCES:
        frag = get(kind).fragment
        if frag:
            out[frag] = kind
    return out


def source_of_image(image: str) -> str:
    """The kind of source a recorded row's `image` came from: a plain path is a frame file."""
    if "#" not in image:
        return "folder"
    return _fragments().get(parse_image(image).fragment, "folder")


def load_image(root: Path, image: str) -> np.ndarray | None:
    """A recorded row's frame, from the source that made it; None when it cannot be had."""
    try:
        return get(source_of_image(image)).image(root, image)
    except (OSError, ValueError):
        return None


def changed_rows(root: Path, recorded: pa.Table, content: bool = False,
                 threads: int = 16) -> list[Mismatch]:
    """Every recorded row whose bytes changed on disk, asking each row's own source, in row order."""
    images = recorded["image"].to_pylist()
    kinds = [source_of_image(im) for im in images]
    if all(k == "folder" for k in kinds):  # the common case, without a copy of the table
        return get("folder").stale(root, recorded, content, threads)
    out: list[Mismatch] = []
    for kind in sorted(set(kinds)):
        rows = np.flatnonzero(np.array(kinds) == kind)
        found = get(kind).stale(root, recorded.take(pa.array(rows)), content, threads)
        out.extend(Mismatch(int(rows[m.row]), m.image, m.why) for m in found)
    return sorted(out)
