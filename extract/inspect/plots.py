"""The report's plots, drawn by matplotlib and returned as data: URIs to embed in the page.

Figures are made through matplotlib's object API (Figure + Agg), never pyplot: no global state, no
display needed, nothing left open between plots.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from phoenix_keypoints.extract.inspect.quality import EVENTS, Rated
from phoenix_keypoints.extract.inspect.rows import rate_said

GREY = (128, 128, 128)  # a part without a declared colour


def _name(part: str) -> str:
    return part.replace("_", " ")


def _rgb(rated: Rated, part: str) -> tuple[float, float, float]:
    r, g, b = rated.colours.get(part, GREY)
    return (r / 255 * 0.85, g / 255 * 0.85, b / 255 * 0.85)  # a shade darker: readable on white


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return data_uri(buf.getvalue(), "image/png")


def rates_plot(rated: Rated, by_split: pd.DataFrame, by_signer: pd.DataFrame) -> str:
    """Share of frames with each part found, grouped bars per split and per signer."""
    fig = Figure(figsize=(7.2, 3.0))
    widths = [max(1, len(by_split)), max(1, len(by_signer))]
    axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": widths}, sharey=True)
    for ax, table, title in ((axes[0], by_split, "per split"), (axes[1], by_signer, "per signer")):
        x = np.arange(len(table))
        w = 0.8 / len(rated.parts)
        middle = (len(rated.parts) - 1) / 2
        for j, part in enumerate(rated.parts):
            ax.bar(x + (j - middle) * w, table[f"{part}_rate"], w, label=_name(part),
                   color=_rgb(rated, part))
        ax.set_xticks(x, table.index.astype(str), rotation=30 if len(table) > 4 else 0, ha="right"
                      if len(table) > 4 else "center", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("share of frames found")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="upper center", ncols=len(rated.parts),
               frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return _png(fig)


def coverage_plot(rated: Rated, videos: pd.DataFrame) -> str:
    """How many videos found each hand in what share of their frames."""
    fig = Figure(figsize=(5.0, 3.0))
    ax = fig.subplots()
    bins = np.linspace(0, 1, 21)
    with_rows = videos[videos["frames"] > 0]
    for part in rated.hands:
        ax.hist(with_rows[f"{part}_rate"], bins=bins, histtype="step", linewidth=2,
                color=_rgb(rated, part), label=_name(part))
    ax.set_xlabel("share of its frames with the hand found", fontsize=9)
    ax.set_ylabel("videos", fontsize=9)
    ax.set_xlim(0, 1)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def timeline_plot(rated: Rated, timeline: np.ndarray, rate: float | None = None) -> str:
    """Per frame: which parts were found (a row each), swaps, far-outside points, bad frames.

    The rows are one image (a pixel per frame and part), not a bar per run of frames: a
    flickering detection makes thousands of runs, which matplotlib would draw one by one.
    """
    n = len(timeline)
    rows = [(_name(part), bit) for part, bit in rated.bits.items()]
    img = np.full((len(rows), max(1, n), 3), 0.93)
    for y, (part, bit) in enumerate(rated.bits.items()):
        img[y, (timeline & bit) > 0] = _rgb(rated, part)
    fig = Figure(figsize=(12, 1.3))
    ax = fig.add_axes((0.07, 0.32, 0.92, 0.5))
    ax.imshow(img, aspect="auto", interpolation="nearest", extent=(0, max(1, n), len(rows), 0))
    for bit, marker, colour, label in ((EVENTS["swap"], "v", "#d62728", "swap"),
                                       (EVENTS["outside"], "x", "#7f3fbf", "far outside"),
                                       (EVENTS["not_ok"], "s", "#000000", "not ok")):
        at = np.flatnonzero(timeline & bit)
        if at.size:
            ax.plot(at + 0.5, np.full(at.size, -0.3), marker, color=colour, markersize=4,
                    linestyle="none", label=label, clip_on=False)
    ax.set_yticks(np.arange(len(rows)) + 0.5, [r[0] for r in rows], fontsize=7)
    ax.set_xlim(0, max(1, n))
    ax.tick_params(axis="x", labelsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fps, said = rate_said(rate)  # the video's own rate (video files), else PHOENIX's, said so
    ax.set_xlabel(f"frame ({n} frames, {n / fps:.1f} s at {said})", fontsize=7)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="lower right", ncols=3, bbox_to_anchor=(1, 1.02), frameon=False)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)  # fixed layout: no tight bbox, which draws twice
    return data_uri(buf.getvalue(), "image/png")
