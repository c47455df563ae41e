"""`report` for a 3D whole-body run: the plain report its declaration says (extract/inspect/
plain.py: frames, frames read, each region's found fraction, frames with more than one person or
none, the 2D family's flags) plus the spread of z3d over the found points per video (a depth that
never moves is a model answering its prior).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.families.wholebody3d.declaration import (
    DECLARATION,
    WHOLEBODY3D,
    WHOLEBODY3D_CHANNELS,
)
from phoenix_keypoints.extract.inspect.declared import kept
from phoenix_keypoints.extract.inspect.plain import video_figures, write_plain_report
from phoenix_keypoints.extract.inspect.rows import iter_tables, part_arrays

Z = WHOLEBODY3D_CHANNELS.index("z3d")


def z_spread(keypoints: Path) -> dict[tuple[str, str], float]:
    """(split, video) -> the standard deviation of z3d over its found points (NaN: none found)."""
    tables = list(iter_tables(keypoints, ["split", "video", WHOLEBODY3D]))
    if not tables:
        return {}
    table = pa.concat_tables(tables)
    values = part_arrays(table)[WHOLEBODY3D]
    z = np.where(kept(DECLARATION, values), values[..., Z], np.nan).reshape(len(table), -1)
    keys = list(zip(table["split"].to_pylist(), table["video"].to_pylist(), strict=True))
    out: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return {key: float(np.nanstd(z[idx])) if np.isfinite(z[idx]).any() else float("nan")
            for key, idx in out.items()}


def write_report(keypoints: Path, title: str, out_dir: Path) -> dict[str, Any]:
    """out_dir/videos.parquet and out_dir/index.html (the declared plain report with z3d_std);
    returns what the command prints."""
    videos = video_figures(DECLARATION, keypoints)
    spread = z_spread(keypoints)
    videos["z3d_std"] = [spread.get((s, v), float("nan"))
                         for s, v in zip(videos["split"], videos["video"], strict=True)]
    return write_plain_report(DECLARATION, keypoints, title, out_dir, videos)
