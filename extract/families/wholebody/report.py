"""`report` and `show` for a whole-body run (COCO-WholeBody 133 points with scores).

A part (body, face, each hand) counts as found on a frame when at least half of its points score
SCORE_THRESHOLD or more, the cut rtmlib's drawing uses for single points. The report is one table
per video (frames, frames read, how often each part was found, frames with more than one person)
in `videos.parquet` and a plain page; `show` draws the 133-point skeleton (COCO-WholeBody's limbs,
points under the threshold left out) with the same legend band as Holistic's drawing.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from extract.families.wholebody.declaration import DECLARATION, SCORE_THRESHOLD, WHOLEBODY
from extract.inspect.draw import _canvas, _label, _legend, load_frame
from extract.inspect.rows import iter_tables, part_arrays

# the report's and the legend's parts: (first, last + 1) point of COCO-WholeBody's order
PARTS = {p: (lo, hi) for p, (_, lo, hi) in DECLARATION.regions.items()}
LEGEND = {"body": "pose", "face": "face", "left_hand": "left_hand", "right_hand": "right_hand"}
COLOURS = DECLARATION.colours
LIMBS = DECLARATION.skeleton


def found(values: np.ndarray) -> dict[str, np.ndarray]:
    """part -> bool [frames]: at least half its points score >= SCORE_THRESHOLD (NaN: not read)."""
    scores = np.nan_to_num(values[:, :, 2], nan=0.0)
    return {p: (scores[:, lo:hi] >= SCORE_THRESHOLD).mean(axis=1) >= 0.5
            for p, (lo, hi) in PARTS.items()}


def video_figures(keypoints: Path) -> pd.DataFrame:
    """One row per video: frames, frames read, each part's found fraction, frames with 2+ persons."""
    rows: list[dict[str, Any]] = []
    cols = ["split", "video", "status", WHOLEBODY, "persons"]
    tables = [t for t in iter_tables(keypoints, cols)]
    if not tables:
        return pd.DataFrame(columns=["split", "video", "frames"])
    table = pa.concat_tables(tables)
    keys = pd.DataFrame({"split": table["split"].to_pylist(), "video": table["video"].to_pylist()})
    values = part_arrays(table)[WHOLEBODY]
    parts = found(values)
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


def draw_wholebody(rgb: np.ndarray | None, values: np.ndarray, width: int, height: int,
                   scale: int = 1, label: str = "") -> np.ndarray:
    """The frame with the 133 points (score >= threshold) and their limbs, plus the legend band."""
    img = _canvas(rgb, width * scale, height * scale)
    parts = found(values[None])
    keep = np.nan_to_num(values[:, 2], nan=0.0) >= SCORE_THRESHOLD
    xy = np.nan_to_num(values[:, :2]) * scale
    for part in ("face", "body", "left_hand", "right_hand"):  # hands on top
        colour = COLOURS[part]
        for a, b in LIMBS[part]:
            if keep[a] and keep[b]:
                cv2.line(img, _pt(xy[a]), _pt(xy[b]), colour, scale, cv2.LINE_AA)
        lo, hi = PARTS[part]
        for i in range(lo, hi):
            if keep[i]:
                cv2.circle(img, _pt(xy[i]), scale, colour, -1, cv2.LINE_AA)
    if label:
        _label(img, label, scale)
    return np.vstack([img, _legend(img.shape[1], {LEGEND[p]: bool(f[0]) for p, f in parts.items()},
                                   scale)])


def _pt(p: np.ndarray) -> tuple[int, int]:
    return int(round(float(p[0]))), int(round(float(p[1])))


def drawn_wholebody_frames(rows: pa.Table, frames_root: Path | None, width: int, height: int,
                           scale: int, seen: list[int] | None = None) -> Iterator[np.ndarray]:
    """Each row's frame with its whole-body skeleton (RGB); seen gets 1 per frame found on disk."""
    values = part_arrays(rows)[WHOLEBODY]
    for i, (image, frame) in enumerate(zip(rows["image"].to_pylist(), rows["frame"].to_pylist(),
                                           strict=True)):
        rgb = load_frame(frames_root, image)
        if seen is not None:
            seen.append(rgb is not None)
        yield draw_wholebody(rgb, values[i], width, height, scale, f"{frame}")
