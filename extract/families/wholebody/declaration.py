"""What the whole-body family's points are: COCO-WholeBody's 133 points in rtmlib's order, their
names, units, the presence rule, the table's schema and what keypoints.parquet records of them.
Data only: every other module of the family, and every output through the registry, reads it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from phoenix_keypoints.extract.families.wholebody.layouts import (
    DEFAULT_LAYOUT,
    LAYOUTS,
    WHOLEBODY_LAYOUT,
    Layout,
)
from phoenix_keypoints.extract.families.wholebody.rtmdet import HAND_SOLUTION
from phoenix_keypoints.extract.keypoints.estimator import Declaration, ReportSpec
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS

WHOLEBODY = "wholebody"
WHOLEBODY_POINTS = WHOLEBODY_LAYOUT.points
# COCO-WholeBody's point order (what rtmlib's models and pose-format's header use).
WHOLEBODY_PARTS: dict[str, tuple[int, int]] = WHOLEBODY_LAYOUT.parts
# The 133 names in point order, as pose-format's COCO-WholeBody header spells them (hands: the
# part says the side; 21 points each, wrist first, in MediaPipe's hand order).
WHOLEBODY_NAMES: tuple[str, ...] = WHOLEBODY_LAYOUT.names
# A whole-body point counts as found (tensor mask, report presence) at or above this score:
# rtmlib's own drawing and Wholebody.format_result keep points from 0.3.
SCORE_THRESHOLD = 0.3
UNITS = ("x, y: pixels of the frame (origin top left), as rtmlib returns them; score: the pose "
         "model's SimCC confidence")
# what the models take of each frame of a batch (estimator.batch_refused): the detector's 640x640
# float input at the largest published detector's size
BATCH_INPUT = (640 * 640 * 3 * 4, "the detector's input")
HEATMAP_UNITS = ("x, y: pixels of the frame (origin top left), as rtmlib returns them; score: the "
                 "pose model's heatmap maximum")


PERSONS_HANDS = ("hands: boxes the hand detector kept on the frame, each posed (rtmlib's Hand); the "
                 "row is the largest box's hand (0: none, the pose model ran on the whole frame)")


def schema_of(layout: Layout) -> pa.Schema:
    """A layout's table: the shared per-frame columns, its points, and `persons`."""
    return pa.schema(
        [*BASE_FIELDS, pa.field(layout.column, pa.list_(pa.float32())),
         # boxes the detector kept on the frame (the signer is the largest): 0 on a frame it found
         # nobody on (the pose model then ran on the whole frame), null where no frame was read
         pa.field("persons", pa.int32())])


WHOLEBODY_SCHEMA = schema_of(WHOLEBODY_LAYOUT)
LIMBS = WHOLEBODY_LAYOUT.skeleton
COLOURS = WHOLEBODY_LAYOUT.colours
LEGEND = {"body": "pose", "left_hand": "L hand", "right_hand": "R hand"}  # show's legend band


def report_of(layout: Layout) -> ReportSpec:
    """What the report says of a layout's run: its regions found, the detector's persons; a video
    is flagged for several persons, or for no hand found where the layout has hands. A hand
    layout's boxes are hands (rtmlib's Hand): two are a signer's, more are flagged."""
    if layout.solution == HAND_SOLUTION:
        return ReportSpec(
            f"Keypoints: {layout.title}",
            f"A part is found on a frame when at least half its points score {SCORE_THRESHOLD} or "
            "more. Hands: boxes the hand detector kept (the row is the largest box's hand; 0: "
            "none, or no detector, the pose model ran on the whole frame).",
            counts=(("frames_over_two_hands", "persons", ">", 2),
                    ("frames_no_hand_box", "persons", "==", 0)),
            flag_counts=("frames_over_two_hands",), flag_lost=("hand",))
    return ReportSpec(
        "Whole-body keypoints" if layout is WHOLEBODY_LAYOUT else f"Keypoints: {layout.title}",
        f"A part is found on a frame when at least half its points score {SCORE_THRESHOLD} or "
        "more. Persons: boxes the detector kept (the signer is the largest).",
        counts=(("frames_multi_person", "persons", ">", 1), ("frames_no_person", "persons", "==", 0)),
        flag_counts=("frames_multi_person",),
        flag_lost=tuple(r for r in layout.regions if "hand" in r))


def declaration_for(layout: Layout, units: str = UNITS,
                    cache: dict[tuple[str, str], Declaration] = {}) -> Declaration:  # noqa: B006
    """The declaration of one layout (made once a process): its column, names, parts, regions,
    skeleton and colours from the layout, the rest the family's."""
    key = (layout.name, units)
    if key not in cache:
        col = layout.column
        cache[key] = Declaration(
            name=WHOLEBODY, parts={col: (layout.points, 3)}, counts=("persons",),
            values=("x", "y", "score"), schema=schema_of(layout), title=layout.title,
            score_threshold=SCORE_THRESHOLD,
            regions={r: (col, a, b) for r, (a, b) in layout.regions.items()},
            exports=layout.exports, units=units, presence_note="rtmlib's cut",
            names=layout.names, subparts=layout.parts, batches=True, batch_input=BATCH_INPUT,
            skeleton=layout.skeleton,
            colours=layout.colours, legend=LEGEND, report=report_of(layout))
    return cache[key]


DECLARATION = declaration_for(WHOLEBODY_LAYOUT)


def layout_of(settings: dict[str, Any] | None) -> Layout:
    """The layout a run's settings name (a run recorded before point sets: COCO-WholeBody)."""
    return LAYOUTS[(settings or {}).get("point_set", DEFAULT_LAYOUT)]


def heatmap_head(settings: dict[str, Any] | None) -> bool:
    return ((settings or {}).get("head") or {}).get("kind") == "heatmap"


def declaration_of(settings: dict[str, Any] | None) -> Declaration:
    """The declaration of a run's settings: its layout's points, its head's units."""
    return declaration_for(layout_of(settings), HEATMAP_UNITS if heatmap_head(settings) else UNITS)


def file_record(settings: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """What keypoints.parquet's metadata says of a whole-body file: the estimator, its model
    files, head and decoder, the point layout and units."""
    layout = layout_of(settings)
    score = "heatmap maximum" if heatmap_head(settings) else "SimCC confidence"
    return {
        "estimator": WHOLEBODY,
        "wholebody": {k: v for k, v in (settings or {}).items() if k != "estimator"},
        "layout": {layout.column: {
            "points": layout.points, "values": ["x", "y", "score"], "width": layout.points * 3,
            "coordinates": "x, y in pixels of the frame (origin top left), as rtmlib returns them; "
                           f"score: the pose model's {score}",
            "order": "COCO-WholeBody" if layout is WHOLEBODY_LAYOUT else layout.title,
            "parts": {p: list(r) for p, r in layout.parts.items()},
            "names": list(layout.names)}},
        "persons": PERSONS_HANDS if layout.solution == HAND_SOLUTION else
                   "boxes the detector kept on the frame; the signer is the largest (0: none, the "
                   "pose model ran on the whole frame)",
        "score_threshold": SCORE_THRESHOLD,
    }
