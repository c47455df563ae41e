"""`report` for a family without a quality report (a QualitySpec) or one of its own: what its
declaration's `report` (a ReportSpec) says, or one made from its declaration. One row per video
in videos.parquet (frames, frames read, how often each declared region is found, the declared
count figures) and a one-table page.

A region counts as found on a frame when at least half of its points are found (the presence
rule of extract/inspect/declared.py: score at least the declared threshold). A video is flagged
where a flagging count figure is above 0, or where none of the flag_lost regions is found on any
of its frames.
"""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phoenix_keypoints.extract.inspect.declared import found
from phoenix_keypoints.extract.inspect.rows import iter_tables, part_arrays
from phoenix_keypoints.extract.keypoints.estimator import Declaration, ReportSpec

_COMPARE = {">": np.greater, "==": np.equal}


def plain_declaration(decl: Declaration) -> Declaration:
    """The declaration with what its plain report needs: its own ReportSpec, or one made from
    what it declares (a family that declares no report still gets this one); and its regions,
    or each landmark column as one."""
    if decl.report is not None and decl.regions:
        return decl
    regions = decl.regions or {col: (col, 0, n) for col, (n, _) in decl.parts.items()}
    rule = ("where its list exists" if decl.score_threshold is None
            else f"where its score is at least {decl.score_threshold}")
    spec = decl.report or ReportSpec(
        # a title names its points ("OpenPose BODY_25 points"): after "Keypoints:", as wholebody's
        heading=f"Keypoints: {decl.title}" if decl.title else f"{decl.name} keypoints",
        note=f"A region ({', '.join(regions)}) is found on a frame when at least half its points "
             f"are found ({rule}). frames_ok: frames read and run.")
    return replace(decl, report=spec, regions=regions)


def video_figures(decl: Declaration, keypoints: Path) -> pd.DataFrame:
    """One row per video: frames, frames read, each region's found fraction, the count figures."""
    spec = decl.report
    assert spec is not None, "a family with a plain report declares it"
    counts = list(dict.fromkeys(column for _, column, _, _ in spec.counts))
    crowd = next(iter(decl.people), None)  # every person's list (people): the most a frame
    tables = list(iter_tables(keypoints, ["split", "video", "status", *decl.parts, *counts,
                                          *([crowd] if crowd else [])]))
    if not tables:
        return pd.DataFrame(columns=["split", "video", "frames"])
    table = pa.concat_tables(tables)
    keys = pd.DataFrame({"split": table["split"].to_pylist(), "video": table["video"].to_pylist()})
    regions = found(decl, part_arrays(table))
    values = {c: table[c].to_numpy(zero_copy_only=False).astype(float) for c in counts}
    ok = np.asarray(table["status"].to_pylist()) == "ok"
    if crowd:
        values["people"] = np.asarray(pc.list_value_length(table[crowd]).fill_null(0), float) \
            // decl.lists[crowd]
    rows: list[dict[str, Any]] = []
    for (split, video), idx in keys.groupby(["split", "video"], sort=False).indices.items():
        row = {"split": split, "video": video, "frames": len(idx), "frames_ok": int(ok[idx].sum())}
        for region, f in regions.items():
            row[f"{region}_found"] = float(f[idx].mean())
        for figure, column, op, value in spec.counts:
            row[figure] = int(np.nansum(_COMPARE[op](values[column][idx], value)))
        if crowd:  # the regions above are the signer's; this, how many a frame held at most
            row["people"] = int(values["people"][idx].max(initial=0))
        rows.append(row)
    return pd.DataFrame(rows)


def flagged(decl: Declaration, videos: pd.DataFrame) -> int:
    """Videos with a flagging count figure above 0, or none of the flag_lost regions found."""
    spec = decl.report
    assert spec is not None
    rules = [videos.get(figure, 0) > 0 for figure in spec.flag_counts]
    if spec.flag_lost:
        rules.append(sum(videos.get(f"{r}_found", 1) for r in spec.flag_lost) == 0)
    if not rules:
        return 0
    out = rules[0]
    for rule in rules[1:]:
        out = out | rule
    return int(out.sum())


def write_plain_report(decl: Declaration, keypoints: Path, title: str, out_dir: Path,
                       videos: pd.DataFrame | None = None) -> dict[str, Any]:
    """out_dir/videos.parquet and a plain out_dir/index.html; returns what the command prints.
    `videos`: video_figures with columns a family's own write_report adds (its note says them)."""
    spec = decl.report
    assert spec is not None
    videos = video_figures(decl, keypoints) if videos is None else videos
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(videos, preserve_index=False), out_dir / "videos.parquet")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in videos.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in r) + "</tr>"
                   for r in videos.itertuples(index=False))
    most = int(videos["people"].max()) if decl.people and len(videos) else None
    person = f" Person: {decl.person_note(most)}." if decl.people else ""
    page = (f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<h1>{html.escape(spec.heading)}: {html.escape(title)}</h1><p>{html.escape(spec.note)}"
            f"{html.escape(person)}</p><table border=1 cellspacing=0><tr>{head}</tr>{body}</table>")
    (out_dir / "index.html").write_text(page, encoding="utf-8")
    return {"videos": len(videos), "frames": int(videos["frames"].sum()) if len(videos) else 0,
            "flagged": flagged(decl, videos),
            **({"person": decl.person_note(most)} if decl.people else {})}


def _cell(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)
