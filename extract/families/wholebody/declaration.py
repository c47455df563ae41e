"""What the whole-body family's points are: COCO-WholeBody's 133 points in rtmlib's order, their
names, units, the presence rule, the table's schema and what keypoints.parquet records of them.
Data only: every other module of the family, and every output through the registry, reads it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from phoenix_keypoints.extract.families.wholebody.layouts import (
    DEFAULT_LAYOUT,
    EVERY_HAND,
    HAND_SET,
    HANDS_LAYOUT,
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
PERSONS_EVERY_HAND = (
    "hands: boxes the hand detector kept on the frame (0: none, the pose model ran on the whole "
    "frame), each posed up to --max-persons (the largest first; the note says how many were "
    "not): every hand posed is in `hands` with its box in `hand_boxes`, and the two largest are "
    "the signer's left_hand21 and right_hand21 (the one further left in the image their right)")


def schema_of(layout: Layout) -> pa.Schema:
    """A layout's table: the shared per-frame columns, its points (a column, or one per side),
    its list columns (every person posed), and `persons`."""
    return pa.schema(
        [*BASE_FIELDS, *(pa.field(c, pa.list_(pa.float32())) for c in layout.columns),
         *(pa.field(c, pa.list_(pa.float32())) for c, _ in layout.lists),
         # boxes the detector kept on the frame (the signer is the largest): 0 on a frame it found
         # nobody on (the pose model then ran on the whole frame), null where no frame was read
         pa.field("persons", pa.int32())])


LIMBS = WHOLEBODY_LAYOUT.skeleton
COLOURS = WHOLEBODY_LAYOUT.colours
LEGEND = {"body": "pose", "left_hand": "L hand", "right_hand": "R hand"}  # show's legend band


def report_of(layout: Layout) -> ReportSpec:
    """What the report says of a layout's run: its regions found, the detector's persons; a video
    is flagged for several persons, or for no hand found where the layout has hands. A hand
    layout's boxes are hands (rtmlib's Hand): two are a signer's, more are flagged."""
    if layout is HANDS_LAYOUT:
        return ReportSpec(
            f"Keypoints: {layout.title}",
            f"A hand is found on a frame when at least half its points score {SCORE_THRESHOLD} "
            "or more. Hands: boxes the hand detector kept (a signer shows two; 0: none, the "
            "pose model ran on the whole frame); left and right are the two largest, by their "
            "place in the image. A video is flagged for frames of more than two hands, or for "
            "no hand found on any frame.",
            counts=(("frames_over_two_hands", "persons", ">", 2),
                    ("frames_one_hand", "persons", "==", 1),
                    ("frames_no_hand_box", "persons", "==", 0)),
            flag_counts=("frames_over_two_hands",), flag_lost=("left_hand", "right_hand"))
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
    key = (layout.name, layout.columns, units)
    if key not in cache:
        cache[key] = Declaration(
            name=WHOLEBODY, parts={c: (layout.points, 3) for c in layout.columns},
            counts=("persons",), values=("x", "y", "score"), schema=schema_of(layout),
            title=layout.title, score_threshold=SCORE_THRESHOLD,
            regions={r: layout.where(a, b) for r, (a, b) in layout.regions.items()},
            exports=layout.exports, units=units, presence_note="rtmlib's cut",
            names=layout.names * len(layout.columns), subparts=layout.parts, batches=True,
            batch_input=BATCH_INPUT, skeleton=layout.skeleton, colours=layout.colours,
            legend=LEGEND, report=report_of(layout), lists=dict(layout.lists))
    return cache[key]


DECLARATION = declaration_for(WHOLEBODY_LAYOUT)


def layout_of(settings: dict[str, Any] | None) -> Layout:
    """The layout a run's settings name (a run recorded before point sets: COCO-WholeBody; a
    hand21 run recorded before every hand was kept: its one column)."""
    name = (settings or {}).get("point_set", DEFAULT_LAYOUT)
    if name == HAND_SET and (settings or {}).get("hands") == EVERY_HAND:
        return HANDS_LAYOUT
    return LAYOUTS[name]


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
    column = {
        "points": layout.points, "values": ["x", "y", "score"], "width": layout.points * 3,
        "coordinates": "x, y in pixels of the frame (origin top left), as rtmlib returns them; "
                       f"score: the pose model's {score}",
        "order": "COCO-WholeBody" if layout is WHOLEBODY_LAYOUT else layout.title,
        "parts": {p: list(r) for p, r in layout.parts.items()},
        "names": list(layout.names)}
    return {
        "estimator": WHOLEBODY,
        "wholebody": {k: v for k, v in (settings or {}).items() if k != "estimator"},
        "layout": {**{c: column for c in layout.columns}, **lists_record(layout, score)},
        "persons": persons_words(layout),
        "score_threshold": SCORE_THRESHOLD,
    }


def lists_record(layout: Layout, score: str) -> dict[str, Any]:
    """What the file's metadata says of a layout's list columns (every hand and its box)."""
    if not layout.lists:
        return {}
    (hands, width), (boxes, _) = layout.lists
    return {hands: {"points": layout.points, "values": ["x", "y", "score"], "width": width,
                    "items": "every hand posed on the frame (up to --max-persons), in rtmlib's "
                             f"order: a list of hands x {width} values; score: the pose model's "
                             f"{score}", "names": list(layout.names)},
            boxes: {"values": ["x1", "y1", "x2", "y2", "score"], "width": 5,
                    "items": f"each hand's box in `{hands}`' order, frame pixels; score: the "
                             "detector's (NaN: a box no detector scored: the whole frame where "
                             "none was found, or a box followed from the frame before)"}}


def persons_words(layout: Layout) -> str:
    """What keypoints.parquet's metadata says `persons` counts, in a layout's run."""
    if layout is HANDS_LAYOUT:
        return PERSONS_EVERY_HAND
    if layout.solution == HAND_SOLUTION:
        return PERSONS_HANDS
    return ("boxes the detector kept on the frame; the signer is the largest (0: none, the pose "
            "model ran on the whole frame)")
