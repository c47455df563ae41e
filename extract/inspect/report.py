"""The quality report of one extraction: RUN/report/videos.parquet and RUN/report/index.html.

One streaming pass over keypoints.parquet (extract.inspect.quality) gives every video's figures;
videos the plan lists but the file lacks (failed, not on disk, not merged) are added with why.
Tables per split and per signer, plots, and frame strips for the worst flagged videos are then built
from that small table and a few row groups read again (extract.inspect.rows). The page is one file:
pictures are embedded as data: URIs and nothing is fetched from the network.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.inspect.presence import FaceMask
from phoenix_keypoints.extract.inspect.quality import (
    EVENTS,
    Rated,
    Thresholds,
    block_figures,
    flags,
    iter_video_blocks,
    status_counts,
)
from phoenix_keypoints.extract.inspect.rows import (
    ReportError,
    open_keypoints,
    rate_said,
    video_rates,
    video_rows,
)
from phoenix_keypoints.extract.keypoints.estimator import (
    Declaration,
    declaration_of_columns,
    family,
)

STRIP_FRAMES = 6
MAX_LISTED = 1000  # flagged videos listed in the page's table (all are in videos.parquet)


@dataclass
class ReportInput:
    """What a report is made from; jobs.inspect fills it from a run folder."""

    keypoints: Path
    title: str
    plan: pd.DataFrame  # every planned video: split, video, speaker, problem (why it has no frames)
    failed: dict[str, str] = field(default_factory=dict)  # video -> why its extraction failed
    frames_root: Path | None = None  # dataset root holding the frames; None when gone
    frames_note: str = ""  # why there are no frame strips ("" when there are)
    tensors: Path | None = None  # the run's tensors/ (face presence without the face column)


@dataclass
class Scan:
    videos: pd.DataFrame
    timelines: dict[str, np.ndarray]  # flagged videos' per-frame BIT flags
    statuses: dict[str, dict[str, int]]  # videos with frames not ok: status -> frames
    face_source: str
    seconds: float


def scan(inp: ReportInput, rated: Rated, thr: Thresholds) -> Scan:
    """Stream keypoints.parquet once: one row of figures and flags per video with rows."""
    t0 = time.monotonic()
    open_keypoints(inp.keypoints)
    mask = (FaceMask.open(inp.tensors, inp.keypoints, rated.face_point)
            if inp.tensors and rated.face_point is not None else None)
    cols: dict[str, list] = {"split": [], "video": [], **{f: [] for f in rated.figures}}
    timelines: dict[str, np.ndarray] = {}
    statuses: dict[str, dict[str, int]] = {}
    flag_lists: list[list[str]] = []
    reason_lists: list[list[str]] = []
    severities: list[float] = []
    try:
        for keys, starts, feats in iter_video_blocks(inp.keypoints, rated, thr.outside_margin,
                                                     mask):
            figs, timeline = block_figures(feats, starts, rated, thr)
            bounds = np.append(starts, len(timeline))
            for i, (_split, video) in enumerate(keys):
                one = {k: v[i].item() for k, v in figs.items()}
                one["statuses"] = {}
                if one["not_ok"]:
                    a, b = bounds[i], bounds[i + 1]
                    one["statuses"] = statuses[video] = status_counts(feats["status"][a:b])
                codes, reasons, severity = flags(one, rated, thr)
                if codes:
                    timelines[video] = timeline[bounds[i]:bounds[i + 1]].copy()
                flag_lists.append(codes)
                reason_lists.append(reasons)
                severities.append(severity)
            cols["split"] += [k[0] for k in keys]
            cols["video"] += [k[1] for k in keys]
            for k in rated.figures:
                cols[k].append(figs[k])
    finally:
        if mask is not None:
            mask.close()
    videos = pd.DataFrame({k: v if k in ("split", "video") else
                           (np.concatenate(v) if v else np.zeros(0)) for k, v in cols.items()})
    videos["flags"], videos["reasons"], videos["severity"] = flag_lists, reason_lists, severities
    source = "tensor mask" if mask is not None else "face column"
    return Scan(videos, timelines, statuses, source, time.monotonic() - t0)


def with_planned(videos: pd.DataFrame, plan: pd.DataFrame, failed: dict[str, str],
                 rated: Rated) -> pd.DataFrame:
    """All planned videos: figures where there are rows, else frames 0 and why (problem)."""
    have = set(videos["video"])
    lost = plan[~plan["video"].isin(have)]
    why = [failed.get(v) or p or "no rows in keypoints.parquet (not extracted or not merged)"
           for v, p in zip(lost["video"], lost["problem"].fillna(""), strict=True)]
    kind = ["failed" if v in failed else "missing" for v in lost["video"]]
    extra = pd.DataFrame({"split": lost["split"].to_numpy(), "video": lost["video"].to_numpy(),
                          "frames": 0, "problem": why, "kind": kind})
    extra["flags"] = [["no_rows"] for _ in range(len(extra))]
    extra["reasons"] = [[f"{k}: {w}"] for k, w in zip(kind, why, strict=True)]
    extra["severity"] = float(len(rated.parts))  # as if no part were ever found
    out = pd.concat([videos.assign(problem=None, kind="ok"), extra], ignore_index=True)
    speakers = dict(zip(plan["video"], plan["speaker"].fillna(""), strict=True))
    out.insert(2, "speaker", out["video"].map(speakers).fillna(""))
    for c in ("frames", *rated.gaps, "swaps", "outside_frames", "not_ok"):
        out[c] = out[c].fillna(0).astype(np.int64)
    return out


def group_table(videos: pd.DataFrame, key: str, statuses: dict[str, dict[str, int]],
                rates: list[str]) -> pd.DataFrame:
    """Per split or signer: videos, frames, the parts' rates, frames not ok (by status), failed and
    missing videos, flagged videos."""
    rows = []
    for name, g in videos.groupby(key, sort=True):
        frames = int(g["frames"].sum())
        has = g[g["frames"] > 0]
        row: dict[str, Any] = {key: name, "videos": len(g), "frames": frames}
        for r in rates:
            row[r] = float((has[r] * has["frames"]).sum() / frames) if frames else float("nan")
        by_status = Counter()
        for v in has.loc[has["not_ok"] > 0, "video"]:
            by_status.update(statuses.get(v, {}))
        row["not_ok"] = int(g["not_ok"].sum())
        row["not_ok_by_status"] = ", ".join(f"{s} {n}" for s, n in sorted(by_status.items()))
        row["failed"] = int((g["kind"] == "failed").sum())
        row["missing"] = int((g["kind"] == "missing").sum())
        row["flagged"] = int((g["flags"].map(len) > 0).sum())
        rows.append(row)
    return pd.DataFrame(rows).set_index(key) if rows else pd.DataFrame()


def strip_indices(timeline: np.ndarray, k: int = STRIP_FRAMES) -> list[int]:
    """k frames spread over the video, two of them swapped for the first frames showing a problem
    (a swap, a point far outside, a bad frame) when there are any."""
    n = len(timeline)
    picks = sorted(set(np.linspace(0, n - 1, min(k, n)).round().astype(int).tolist()))
    events = np.flatnonzero(timeline & (EVENTS["swap"] | EVENTS["outside"] | EVENTS["not_ok"]))[:2]
    for j, e in enumerate(events):
        if int(e) not in picks:
            picks[min(len(picks) - 1, 1 + 2 * j)] = int(e)
    return sorted(set(picks))


def frame_strips(inp: ReportInput, decl: Declaration, shown: list[str],
                 timelines: dict[str, np.ndarray]) -> dict[str, str]:
    """video -> JPEG data URI of a few of its frames with the skeleton drawn."""
    from phoenix_keypoints.extract.inspect.draw import draw_frame, load_frame
    from phoenix_keypoints.extract.inspect.overlay import contact_sheet, video_size
    from phoenix_keypoints.extract.inspect.plots import data_uri
    from phoenix_keypoints.extract.inspect.rows import part_arrays

    if not shown or inp.frames_root is None:
        return {}
    out = {}
    parts = dict.fromkeys(col for col, _, _ in decl.regions.values())
    rows = video_rows(inp.keypoints, shown, ["frame", "image", "width", "height", *parts])
    vids = rows["video"].to_numpy(zero_copy_only=False)
    for video in shown:
        t = rows.filter(pa.array(vids == video))
        picks = [i for i in strip_indices(timelines[video]) if i < t.num_rows]
        t = t.take(pa.array(picks, pa.int64()))
        arrays = part_arrays(t)
        w, h = video_size(t)
        tiles = [draw_frame(decl, load_frame(inp.frames_root, img),
                            {p: a[i] for p, a in arrays.items()}, w, h, 1, f"{fr}")
                 for i, (img, fr) in enumerate(zip(t["image"].to_pylist(), t["frame"].to_pylist(),
                                                   strict=True))]
        ok, jpg = cv2.imencode(".jpg", cv2.cvtColor(contact_sheet(tiles, len(tiles)),
                                                    cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 85])
        if ok:
            out[video] = data_uri(jpg.tobytes(), "image/jpeg")
    return out


def videos_table(videos: pd.DataFrame, rated: Rated) -> pa.Table:
    """videos.parquet: one row per planned video, every figure the page shows."""
    df = videos.copy()
    df["statuses"] = df.get("statuses_text", "")
    cols = ["video", "split", "speaker", "frames", *rated.rates, *rated.gaps,
            "swaps", "jitter_px", "outside_frames", "not_ok", "statuses", "problem", "flags",
            "reasons", "severity"]
    schema = pa.schema([("video", pa.string()), ("split", pa.string()), ("speaker", pa.string()),
                        ("frames", pa.int64()), *[(r, pa.float64()) for r in rated.rates],
                        *[(g, pa.int64()) for g in rated.gaps],
                        ("swaps", pa.int64()), ("jitter_px", pa.float64()),
                        ("outside_frames", pa.int64()), ("not_ok", pa.int64()),
                        ("statuses", pa.string()), ("problem", pa.string()),
                        ("flags", pa.list_(pa.string())), ("reasons", pa.list_(pa.string())),
                        ("severity", pa.float64())])
    return pa.Table.from_pandas(df[cols], schema=schema, preserve_index=False)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _cells(row: dict[str, Any], rated: Rated, thr: Thresholds) -> dict[str, Any]:
    """One video as the page shows it: names, reasons, and (text, above threshold) per figure."""
    from phoenix_keypoints.extract.inspect.page import num, pct

    n = row["frames"]
    limits = rated.limits(thr)
    cells = [(num(n), False)]
    cells += [(pct(row[r]), bool(row[r] < limits[r])) for r in rated.rates]
    cells += [(str(row[g]), bool(row[g] > thr.max_hand_gap)) for g in rated.gaps]
    cells += [(str(row["swaps"]), bool(row["swaps"] > thr.max_swaps)),
              (num(row["jitter_px"], 1), bool(row["jitter_px"] > thr.max_jitter)),
              (str(row["outside_frames"]), bool(row["outside_frames"] > thr.max_outside * n)),
              (f"{row['not_ok']}" + (f" ({row['statuses_text']})" if row["statuses_text"] else ""),
               bool(row["not_ok"] > thr.max_not_ok))]
    return {"video": row["video"], "split": row["split"], "speaker": row["speaker"], "frames": n,
            "reasons": row["reasons"], "cells": cells}


def page_context(inp: ReportInput, rated: Rated, thr: Thresholds, videos: pd.DataFrame,
                 flagged: pd.DataFrame, groups: tuple[pd.DataFrame, pd.DataFrame], shown: list[str],
                 strips: dict[str, str], res: Scan) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    from phoenix_keypoints.extract.inspect.plots import coverage_plot, rates_plot, timeline_plot

    by_split, by_signer = groups
    lost = videos[videos["kind"] != "ok"]
    rows_of = {r["video"]: _cells(r, rated, thr) for r in videos.to_dict("records")}
    rates = video_rates(inp.keypoints)  # the videos' own rates; frame folders have none
    cards = [{**rows_of[v], "strip": strips.get(v),
              "timeline": timeline_plot(rated, res.timelines[v], rates.get(v))} for v in shown]
    with_rows = videos.loc[videos["frames"] > 0, "video"]
    return {
        "title": inp.title, "keypoints": str(inp.keypoints),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "videos": len(videos), "with_rows": int((videos["frames"] > 0).sum()),
        "frames": int(videos["frames"].sum()), "flagged": len(flagged),
        "failed": int((videos["kind"] == "failed").sum()),
        "missing": int((videos["kind"] == "missing").sum()),
        "groups": [("split", _group_rows(by_split)), ("signer", _group_rows(by_signer))],
        "rates_plot": rates_plot(rated, by_split, by_signer) if len(by_split) else None,
        "coverage_plot": coverage_plot(rated, videos) if len(videos) and rated.hands else None,
        "lost": [rows_of[v] for v in lost["video"]],
        "flagged_rows": [rows_of[v] for v in flagged["video"][:MAX_LISTED]],
        "flagged_more": max(0, len(flagged) - MAX_LISTED),
        "cards": cards, "frames_note": inp.frames_note,
        "all_rows": [rows_of[v] for v in videos.loc[videos["frames"] > 0, "video"]],
        "thresholds": [(n.replace("_", "-"), getattr(thr, n),
                        h + gap_seconds(thr.max_hand_gap, [rates.get(v) for v in with_rows])
                        if n == "max_hand_gap" else h) for n, _, _, h in thr.options()],
        "face_source": res.face_source, "scan_seconds": round(res.seconds, 1),
        "rates": rated.rates, "rate_names": [label(p) for p in rated.parts],
        "gap_names": [label(h).removesuffix(" hand") for h in rated.hands],
        "table_columns": 4 + len(rated.rates) + len(rated.gaps) + 4,
        "engine": rated.spec.engine, "body": label(rated.roles.get("body", "body")),
        "limits": {**rated.limits(thr), "gap": thr.max_hand_gap, "swaps": thr.max_swaps,
                   "jitter": thr.max_jitter, "outside": thr.max_outside, "not_ok": thr.max_not_ok},
    }


def gap_seconds(frames: int, rates: list[float | None]) -> str:
    """What `frames` in a row are in seconds at this run's rates (a video file's own; frame
    folders PHOENIX's 25, said so): `; here 1.7 s (at 29.92 fps)`."""
    said = {}
    for rate in rates:
        fps, words = rate_said(rate)
        said.setdefault(round(fps, 1), words)
    if not said:
        return ""
    return "; here " + ", ".join(f"{frames / fps:.1f} s at {words}" for fps, words in
                                 sorted(said.items())[:4]) + (" ..." if len(said) > 4 else "")


def label(column: str) -> str:
    """How the page names a part: its column, in words ("left hand")."""
    return column.replace("_", " ")


def _group_rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [{"name": name, **row.to_dict()} for name, row in table.iterrows()]


def write_report(inp: ReportInput, out_dir: Path, thr: Thresholds | None = None,
                 cards: int = 24) -> dict[str, Any]:
    """Write out_dir/videos.parquet and out_dir/index.html; returns what the command prints. The
    report is the one the file's family declares: its own (write_report), the quality report
    (its QualitySpec) or else the plain one (its ReportSpec, or one made from its declaration:
    every family has a report)."""
    from phoenix_keypoints.extract.inspect.page import render_page

    found = declaration_of_columns(pq.read_schema(inp.keypoints).names)
    own = family(found.name).write_report(inp.keypoints, inp.title, out_dir) if found else None
    if own is not None:  # a family with a report of its own
        return own
    if found is not None and found.quality is None:  # the plain report, declared or made
        from phoenix_keypoints.extract.inspect.plain import plain_declaration, write_plain_report

        return write_plain_report(plain_declaration(found), inp.keypoints, inp.title, out_dir)
    if found is None:
        open_keypoints(inp.keypoints)  # says what the file lacks
        raise ReportError(f"{inp.keypoints}: no keypoint family this version knows wrote it")
    rated = Rated.of(found)
    thr = thr or Thresholds()
    out_dir = Path(out_dir)
    res = scan(inp, rated, thr)
    videos = with_planned(res.videos, inp.plan, inp.failed, rated)
    videos["statuses_text"] = videos["video"].map(
        lambda v: ", ".join(f"{s} {n}" for s, n in sorted(res.statuses.get(v, {}).items())))
    videos = videos.sort_values(["split", "video"], kind="stable", ignore_index=True)
    flagged = videos[videos["flags"].map(len) > 0].sort_values(
        ["severity", "split", "video"], ascending=[False, True, True], kind="stable")
    shown = [v for v in flagged["video"] if v in res.timelines][:cards]
    by_split = group_table(videos, "split", res.statuses, rated.rates)
    by_signer = group_table(videos, "speaker", res.statuses, rated.rates)
    strips = frame_strips(inp, found, shown, res.timelines)
    out_dir.mkdir(parents=True, exist_ok=True)
    sink = pa.BufferOutputStream()
    pq.write_table(videos_table(videos, rated), sink, compression="zstd")
    _replace(out_dir / "videos.parquet", sink.getvalue().to_pybytes())
    html = render_page(page_context(inp, rated, thr, videos, flagged, (by_split, by_signer), shown,
                                    strips, res))
    _replace(out_dir / "index.html", html.encode())
    return {"videos": len(videos), "frames": int(videos["frames"].sum()),
            "flagged": len(flagged), "shown": len(shown), "strips": len(strips),
            "face_source": res.face_source, "scan_seconds": round(res.seconds, 1),
            "thresholds": asdict(thr)}
