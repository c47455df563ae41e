"""`report` for a whole-body run (COCO-WholeBody 133 points with scores); `show` draws it from its
declaration (regions, skeleton, colours: extract/inspect/declared.py).

A part (body, face, each hand) counts as found on a frame when at least half of its points score
SCORE_THRESHOLD or more, the cut rtmlib's drawing uses for single points. The report is one table
per video (frames, frames read, how often each part was found, frames with more than one person)
in `videos.parquet` and a plain page.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families.wholebody.declaration import (
    DECLARATION,
    SCORE_THRESHOLD,
    declaration_for,
)
from phoenix_keypoints.extract.families.wholebody.layouts import WHOLEBODY_LAYOUT, layout_of_column
from phoenix_keypoints.extract.inspect.declared import found as declared_found
from phoenix_keypoints.extract.inspect.rows import iter_tables, part_arrays
from phoenix_keypoints.extract.keypoints.estimator import Declaration


def found(values: np.ndarray, decl: Declaration = DECLARATION) -> dict[str, np.ndarray]:
    """part -> bool [frames]: at least half its points score >= SCORE_THRESHOLD (NaN: not read)."""
    return declared_found(decl, {next(iter(decl.parts)): values})


def video_figures(keypoints: Path) -> pd.DataFrame:
    """One row per video: frames, frames read, each part's found fraction, frames with 2+ persons."""
    rows: list[dict[str, Any]] = []
    layout = layout_of_column(pq.read_schema(keypoints).names) or WHOLEBODY_LAYOUT
    cols = ["split", "video", "status", layout.column, "persons"]
    tables = [t for t in iter_tables(keypoints, cols)]
    if not tables:
        return pd.DataFrame(columns=["split", "video", "frames"])
    table = pa.concat_tables(tables)
    keys = pd.DataFrame({"split": table["split"].to_pylist(), "video": table["video"].to_pylist()})
    values = part_arrays(table)[layout.column]
    parts = found(values, declaration_for(layout))
    persons = table["persons"].to_numpy(zero_copy_only=False).astype(float)
    ok = np.asarray(table["status"].to_pylist()) == "ok"
    for (split, video), idx in keys.groupby(["split", "video"], sort=False).indices.items():
        row = {"split": split, "video": video, "frames": len(idx), "frames_ok": int(ok[idx].sum())}
        for p, f in parts.items():
            row[f"{p}_found"] = float(f[idx].mean())
        row["frames_multi_person"] = int(np.nansum(persons[idx] > 1))
        row["frames_no_person"] = int(np.nansum(persons[idx] == 0))
        rows.append(row)
    return pd.DataFrame(rows)


def write_wholebody_report(keypoints: Path, title: str, out_dir: Path) -> dict[str, Any]:
    """out_dir/videos.parquet and a plain out_dir/index.html; returns what the command prints."""
    videos = video_figures(keypoints)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(videos, preserve_index=False), out_dir / "videos.parquet")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in videos.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in r) + "</tr>"
                   for r in videos.itertuples(index=False))
    page = (f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<h1>Whole-body keypoints: {html.escape(title)}</h1><p>A part is found on a frame "
            f"when at least half its points score {SCORE_THRESHOLD} or more. Persons: boxes the "
            f"detector kept (the signer is the largest).</p><table border=1 cellspacing=0>"
            f"<tr>{head}</tr>{body}</table>")
    (out_dir / "index.html").write_text(page, encoding="utf-8")
    flagged = int(((videos.get("frames_multi_person", 0) > 0)
                   | (videos.get("left_hand_found", 1) + videos.get("right_hand_found", 1) == 0)).sum())
    return {"videos": len(videos), "frames": int(videos["frames"].sum()) if len(videos) else 0,
            "flagged": flagged}


def _cell(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)
