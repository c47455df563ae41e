"""`report` for a 3D whole-body run: one row per video in `videos.parquet` and a plain page. The
figures are the 2D family's (frames, frames read, each region's found fraction, frames with more
than one person or none), read through the declaration (regions, the score threshold), plus the
spread of z3d over the found points (a depth that never moves is a model answering its prior).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families.wholebody3d.declaration import (
    DECLARATION,
    WHOLEBODY3D,
    WHOLEBODY3D_CHANNELS,
)
from phoenix_keypoints.extract.inspect.declared import found, kept
from phoenix_keypoints.extract.inspect.rows import iter_tables, part_arrays

Z = WHOLEBODY3D_CHANNELS.index("z3d")


def video_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Each video's figures from its rows (split, video, status, the column, persons)."""
    values = part_arrays(table)[WHOLEBODY3D]
    regions = found(DECLARATION, {WHOLEBODY3D: values})
    z = np.where(kept(DECLARATION, values), values[..., Z], np.nan)
    persons = table["persons"].to_numpy(zero_copy_only=False).astype(float)
    ok = np.asarray(table["status"].to_pylist()) == "ok"
    keys = pd.DataFrame({"split": table["split"].to_pylist(), "video": table["video"].to_pylist()})
    rows = []
    for (split, video), idx in keys.groupby(["split", "video"], sort=False).indices.items():
        row = {"split": split, "video": video, "frames": len(idx), "frames_ok": int(ok[idx].sum())}
        row |= {f"{r}_found": float(f[idx].mean()) for r, f in regions.items()}
        zs = z[idx]
        row["z3d_std"] = float(np.nanstd(zs)) if np.isfinite(zs).any() else float("nan")
        row["frames_multi_person"] = int(np.nansum(persons[idx] > 1))
        row["frames_no_person"] = int(np.nansum(persons[idx] == 0))
        rows.append(row)
    return rows


def write_report(keypoints: Path, title: str, out_dir: Path) -> dict[str, Any]:
    """out_dir/videos.parquet and out_dir/index.html; returns what the command prints."""
    tables = list(iter_tables(keypoints, ["split", "video", "status", WHOLEBODY3D, "persons"]))
    videos = pd.DataFrame(video_rows(pa.concat_tables(tables)) if tables else [],
                          columns=None if tables else ["split", "video", "frames"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(videos, preserve_index=False), out_dir / "videos.parquet")
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in r]
             for r in videos.itertuples(index=False)]
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in cells)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in videos.columns)
    (out_dir / "index.html").write_text(
        f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title><h1>3D whole-body "
        f"keypoints: {html.escape(title)}</h1><p>A region is found on a frame when at least half its "
        f"points score {DECLARATION.score_threshold} or more; z3d_std: the spread of rtmlib's depth "
        f"over found points.</p><table border=1 cellspacing=0><tr>{head}</tr>{rows}</table>",
        encoding="utf-8")
    hands = videos.get("left_hand_found", 1) + videos.get("right_hand_found", 1)
    flagged = int(((videos.get("frames_multi_person", 0) > 0) | (hands == 0)).sum())
    return {"videos": len(videos), "frames": int(videos["frames"].sum()) if len(videos) else 0,
            "flagged": flagged}
