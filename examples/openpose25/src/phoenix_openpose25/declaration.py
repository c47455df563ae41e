"""What the openpose25 family writes: one landmark column of OpenPose's BODY_25 points, each
(x, y, score) in pixels of the frame, and a per-frame count of the points found. Every output of
the tool (merge, tensors, report, show, diff, `.pose`) reads this declaration; none knows the
family's name."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from phoenix_keypoints.extract.keypoints.estimator import Declaration

NAME = "openpose25"  # --estimator NAME, the landmark column, settings' `estimator`
FOUND = "points_found"  # the count column: points at or above the score threshold
# OpenPose's BODY_25 order (openpose/src/openpose/pose/poseParameters.cpp)
NAMES = ("nose", "neck", "right_shoulder", "right_elbow", "right_wrist", "left_shoulder",
         "left_elbow", "left_wrist", "mid_hip", "right_hip", "right_knee", "right_ankle",
         "left_hip", "left_knee", "left_ankle", "right_eye", "left_eye", "right_ear", "left_ear",
         "left_big_toe", "left_small_toe", "left_heel", "right_big_toe", "right_small_toe",
         "right_heel")
# its limbs, as OpenPose draws them (point pairs, numbered in the column)
LIMBS = ((1, 8), (1, 2), (1, 5), (2, 3), (3, 4), (5, 6), (6, 7), (8, 9), (9, 10), (10, 11),
         (8, 12), (12, 13), (13, 14), (1, 0), (0, 15), (15, 17), (0, 16), (16, 18), (14, 19),
         (19, 20), (14, 21), (11, 22), (22, 23), (11, 24))
PARTS = {"body": (0, 15), "head": (15, 19), "feet": (19, 25)}  # named ranges of the order
SCORE_THRESHOLD = 0.05  # OpenPose's own render threshold: a point below it is absent
DEFAULT_INPUT = (368, 368)  # OpenPose's usual net input, for a declaration without a model


def declaration_for(input_size: tuple[int, int] = DEFAULT_INPUT,
                    cache: dict[tuple[int, int], Declaration] = {}  # noqa: B006
                    ) -> Declaration:
    """The declaration of a run whose model takes `input_size` (height, width): what --batch-size
    is bounded by depends on it (batch_input), nothing else does."""
    if input_size not in cache:
        h, w = input_size
        cache[input_size] = Declaration(
            name=NAME,
            parts={NAME: (len(NAMES), 3)},
            counts=(FOUND,),
            values=("x", "y", "score"),
            title="OpenPose BODY_25 points",
            score_threshold=SCORE_THRESHOLD,
            regions={r: (NAME, a, b) for r, (a, b) in PARTS.items()},
            skeleton={"body": LIMBS},
            colours={"feet": (40, 160, 255), "body": (255, 170, 0), "head": (255, 60, 120)},
            legend={"body": "body", "head": "eyes and ears", "feet": "feet"},
            exports=("pose",),
            error_status="openpose25_error",
            units="x, y: pixels of the frame (origin top left); score: the model's, 0..1",
            presence_note="OpenPose's render threshold",
            names=NAMES,
            subparts=PARTS,
            batches=True,
            batch_input=(3 * h * w * 4, f"the model's {h}x{w} float input"),
        )
    return cache[input_size]


DECLARATION = declaration_for()


def declaration(settings: dict[str, Any] | None = None) -> Declaration:
    """A run's declaration: its model's input size, recorded in its settings."""
    model = (settings or {}).get("model") or {}
    return declaration_for(tuple(model.get("input", DEFAULT_INPUT)))  # type: ignore[arg-type]


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    """Its declaration where a file's schema is its table (every input size writes the same)."""
    return DECLARATION if schema.equals(DECLARATION.schema) else None


def file_record(settings: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """What keypoints.parquet's metadata says of an openpose25 file."""
    return {"estimator": NAME, NAME: {k: v for k, v in (settings or {}).items() if k != "estimator"},
            "layout": {NAME: {"points": len(NAMES), "values": ["x", "y", "score"],
                              "names": list(NAMES)}}}
