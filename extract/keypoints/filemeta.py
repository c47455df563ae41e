"""What keypoints.parquet says about itself in its own Parquet key-value metadata, so that a copy
taken away from its run folder still names the tool, versions, Holistic options, dataset and point
layout it was made with. Read back with pyarrow alone:

    json.loads(pq.read_schema(path).metadata[b"phoenix_keypoints.file"])

Only what decides the numbers goes in (no times, no worker counts, no plan cuts), so the file stays
the same bytes however many workers made it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from extract.families.holistic.runner import HolisticOptions
from extract.keypoints.estimator import (
    SCORE_THRESHOLD,
    WHOLEBODY,
    WHOLEBODY_NAMES,
    WHOLEBODY_PARTS,
    WHOLEBODY_POINTS,
    estimator_name,
)
from extract.keypoints.points import HAND_NAMES, POSE_NAMES
from extract.keypoints.schema import FACE_POINTS_REFINED, layout

FILE_KEY = b"phoenix_keypoints.file"
# 1: landmark lists of PARTS, no file metadata. 2: + pose_world, a 478-point face when refined,
# and this metadata (landmark columns are still Parquet lists: see docs/outputs.md).
SCHEMA_VERSION = 2
VALUES = {3: ["x", "y", "z"], 4: ["x", "y", "z", "visibility"]}


def point_names(part: str, points: int) -> list[str]:
    """Names of a part's points in column order (face: mesh indices; 468-477 are the iris)."""
    if part in ("pose", "pose_world"):
        return list(POSE_NAMES)
    if part in ("left_hand", "right_hand"):
        return list(HAND_NAMES)
    return [f"iris.{i}" if i >= 468 else str(i) for i in range(points)]


def _made_by(versions: dict[str, str]) -> dict[str, Any]:
    """What every record starts with: the schema, the tool and the versions it ran with."""
    return {"schema_version": SCHEMA_VERSION, "tool": "phoenix-keypoints",
            "tool_version": versions.get("phoenix-keypoints", "unknown"),
            "versions": {k: versions[k] for k in sorted(versions)}}


def file_metadata(versions: dict[str, str], holistic: dict[str, Any],
                  dataset_fingerprint: str, settings: dict[str, Any] | None = None
                  ) -> dict[bytes, bytes]:
    """The key-value metadata merge writes into keypoints.parquet.

    `settings`: the run's estimator settings (None or Holistic's: the record Holistic files have
    always had, byte for byte; its `holistic` key names the estimator)."""
    if estimator_name(settings) == WHOLEBODY:
        return _wholebody_metadata(versions, settings or {}, dataset_fingerprint)
    holistic = HolisticOptions.from_dict(holistic).as_dict()  # every option, old run.json too
    parts = layout(bool(holistic["refine_face_landmarks"]))
    record = {
        **_made_by(versions),
        "holistic": holistic,
        "dataset_fingerprint": dataset_fingerprint,
        "layout": {p: {"points": n, "values": VALUES[c], "width": n * c,
                       "coordinates": ("metres around the hip midpoint" if p == "pose_world"
                                       else "x, y normalised by image width and height"),
                       "names": point_names(p, n)}
                   for p, (n, c) in parts.items()},
        "face_points": parts["face"][0],
        "iris_points": parts["face"][0] == FACE_POINTS_REFINED,
    }
    return {FILE_KEY: json.dumps(record, sort_keys=True).encode()}


def _wholebody_metadata(versions: dict[str, str], settings: dict[str, Any],
                        dataset_fingerprint: str) -> dict[bytes, bytes]:
    """A whole-body file's record: the estimator, its model files, the point order and units."""
    record = {
        **_made_by(versions),
        "estimator": WHOLEBODY,
        "wholebody": {k: v for k, v in settings.items() if k != "estimator"},
        "dataset_fingerprint": dataset_fingerprint,
        "layout": {WHOLEBODY: {
            "points": WHOLEBODY_POINTS, "values": ["x", "y", "score"], "width": WHOLEBODY_POINTS * 3,
            "coordinates": "x, y in pixels of the frame (origin top left), as rtmlib returns them; "
                           "score: the pose model's SimCC confidence",
            "order": "COCO-WholeBody",
            "parts": {p: list(r) for p, r in WHOLEBODY_PARTS.items()},
            "names": list(WHOLEBODY_NAMES)}},
        "persons": "boxes the detector kept on the frame; the signer is the largest (0: none, the "
                   "pose model ran on the whole frame)",
        "score_threshold": SCORE_THRESHOLD,
    }
    return {FILE_KEY: json.dumps(record, sort_keys=True).encode()}


def read_file_metadata(path: Path) -> dict[str, Any] | None:
    """The record of a keypoints file, or None for one written before it existed (version 1)."""
    raw = (pq.read_schema(path).metadata or {}).get(FILE_KEY)
    return json.loads(raw) if raw else None
