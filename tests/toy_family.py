"""A third keypoint family, written in the tests only (issue 38): the proof that a family is one
module. Nothing outside this file knows it; tests/test_families.py makes it known the way an
installed package would (an entry point of group `phoenix_keypoints.families`).

Its runner computes points from pixels: each quarter of the frame gives one point, the centre of
its brightness (x, y in pixels of the frame) and a score (its mean brightness / 255); `bright`
counts the quarters scoring at least 0.5, or the score its own option of `run` gives
(`--toy-bright F`: the hooks add_run_options, asked_settings, settings_conflicts). `show`
draws it from its declaration (regions, skeleton, colours); its own report is deliberately small.
"""

from __future__ import annotations

import argparse
import html
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.families import Family
from phoenix_keypoints.extract.keypoints.estimator import Declaration
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS

NAME = "toy"
SCHEMA = pa.schema([*BASE_FIELDS, pa.field(NAME, pa.list_(pa.float32())),
                    pa.field("bright", pa.int32())])
DECLARATION = Declaration(
    name=NAME, parts={NAME: (4, 3)}, counts=("bright",), values=("x", "y", "score"), schema=SCHEMA,
    title="toy quarter points",
    score_threshold=0.5, regions={"top": (NAME, 0, 2), "bottom": (NAME, 2, 4)},
    exports=("pose",), units="x, y: pixels of the frame (origin top left); score: brightness",
    names=("top_left", "top_right", "bottom_left", "bottom_right"),
    subparts={"top": (0, 2), "bottom": (2, 4)}, skeleton={"top": ((0, 1),), "bottom": ((2, 3),)},
    colours={"top": (255, 210, 0), "bottom": (40, 230, 40)})


def declaration(settings: dict[str, Any] | None = None) -> Declaration:
    return DECLARATION


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    return DECLARATION if schema.equals(SCHEMA) else None


class ToyEstimator:
    declaration = DECLARATION

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings = {"estimator": NAME, **{k: v for k, v in (settings or {}).items()
                                                if k == "bright_at"}}
        self.bright_at = float(self.settings.get("bright_at", 0.5))

    def start_video(self) -> None:
        pass

    def process(self, rgb: np.ndarray) -> dict[str, Any]:
        grey = rgb.astype(np.float64).mean(axis=2)
        h, w = grey.shape
        points = []
        for y0, y1 in ((0, h // 2), (h // 2, h)):
            for x0, x1 in ((0, w // 2), (w // 2, w)):
                q = grey[y0:y1, x0:x1]
                ys, xs = np.mgrid[y0:y1, x0:x1]
                total = q.sum() or 1.0
                points.append(((xs * q).sum() / total, (ys * q).sum() / total, q.mean() / 255))
        values = np.array(points, np.float32)
        return {NAME: values.reshape(-1), "bright": int((values[:, 2] >= self.bright_at).sum())}

    def close(self) -> None:
        pass


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> ToyEstimator:
    return ToyEstimator(settings)


# --- its own option of `run` ---------------------------------------------------------------------
def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--toy-bright", type=float, metavar="F",
                   help="toy: a quarter counts as bright from this score (default 0.5)")


def asked_settings(args: argparse.Namespace, estimator: str | None,
                   fetched: Any = None) -> dict[str, Any] | None:
    value = getattr(args, "toy_bright", None)
    return None if value is None else {"bright_at": value}


def settings_conflicts(asked: dict[str, Any] | None, recorded: dict[str, Any]) -> list[str]:
    have = recorded.get("bright_at", 0.5)
    if asked and asked["bright_at"] != have:
        return [f"--toy-bright ({have} when planned, {asked['bright_at']} asked)"]
    return []


def file_record(settings: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    return {"estimator": NAME, "layout": {NAME: {"points": 4, "values": ["x", "y", "score"]}}}


def clip_options() -> tuple[str, ...]:
    return ()


def clip_settings(options: dict[str, Any]) -> dict[str, Any]:
    return {"estimator": NAME}


def clip_parts(parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return parts


def write_report(keypoints: Path, title: str, out_dir: Path) -> dict[str, Any]:
    """Frames and mean score per video: videos.parquet and a one-table page."""
    t = pq.read_table(keypoints, columns=["split", "video", NAME]).to_pandas()
    t["score"] = [np.mean(v[2::3]) if v is not None else np.nan for v in t[NAME]]
    videos = t.groupby(["split", "video"], as_index=False).agg(frames=(NAME, "size"),
                                                               score=("score", "mean"))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    videos.to_parquet(out_dir / "videos.parquet")
    (out_dir / "index.html").write_text(f"<h1>{html.escape(title)}</h1>" + videos.to_html())
    return {"videos": len(videos), "frames": int(videos["frames"].sum()), "flagged": 0}


class Toy(Family):
    """The toy family as the registry makes it: this module's functions, each the member of
    Family of its name (the entry point names this class: `toy = toy_family:Toy`)."""

    declaration = staticmethod(declaration)
    declaration_of_schema = staticmethod(declaration_of_schema)
    open_estimator = staticmethod(open_estimator)
    file_record = staticmethod(file_record)
    add_run_options = staticmethod(add_run_options)
    asked_settings = staticmethod(asked_settings)
    settings_conflicts = staticmethod(settings_conflicts)
    clip_options = staticmethod(clip_options)
    clip_settings = staticmethod(clip_settings)
    clip_parts = staticmethod(clip_parts)
    write_report = staticmethod(write_report)
