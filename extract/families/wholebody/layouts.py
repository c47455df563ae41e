"""The point sets a top-down pose model of this family may answer, as data: COCO-WholeBody 133
(rtmlib's Wholebody), COCO body 17 (Body), Halpe 26 (BodyWithFeet) and hands of 21 (Hand: one
column without a detector, every hand and the signer's two with one: HANDS_LAYOUT).

A model's number of points is read from its outputs; `--point-set` names the layout, and where the
number alone decides (133, 17, 26, 21 are all different) it is inferred. Each layout is one column
of keypoints.parquet (points x (x, y, score); the two hands a column each), so a file says its
layout by its schema, and
show, report, diff and the tensors read names, parts, skeleton and colours from here through the
declaration (declaration.py). Names and limbs are mmpose's dataset metadata
(configs/_base_/datasets/{coco,halpe26,coco_wholebody,coco_wholebody_hand}.py), which rtmlib's
models are trained on.
"""

from __future__ import annotations

from dataclasses import dataclass

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

BODY17 = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
          "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
          "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")
_WB_FEET = ("left_big_toe", "left_small_toe", "left_heel", "right_big_toe", "right_small_toe",
            "right_heel")
# Halpe 26 after the 17: head, neck, hip, then the feet in its own order (left/right alternate)
_HALPE_EXTRA = ("head", "neck", "hip", "left_big_toe", "right_big_toe", "left_small_toe",
                "right_small_toe", "left_heel", "right_heel")
HAND21 = ("wrist", *(f"{f}{i}" for f in ("thumb", "forefinger", "middle_finger", "ring_finger",
                                          "pinky_finger") for i in range(1, 5)))

_BODY17_LIMBS = ((15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6),
                 (5, 7), (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5),
                 (4, 6))
_WB_FEET_LIMBS = ((15, 17), (15, 18), (15, 19), (16, 20), (16, 21), (16, 22))
_HALPE_LIMBS = ((15, 13), (13, 11), (11, 19), (16, 14), (14, 12), (12, 19), (17, 18), (18, 19),
                (18, 5), (5, 7), (7, 9), (18, 6), (6, 8), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3),
                (2, 4), (3, 5), (4, 6), (15, 20), (15, 22), (15, 24), (16, 21), (16, 23), (16, 25))
# a hand: the wrist, then four points a finger, each finger starting from the wrist
HAND_LIMBS = tuple((0 if j % 4 == 1 else j - 1, j) for j in range(1, 21))

BODY_COLOUR, FACE_COLOUR = (255, 210, 0), (0, 220, 255)
LEFT_COLOUR, RIGHT_COLOUR = (40, 230, 40), (255, 60, 170)


def _shifted(limbs: tuple[tuple[int, int], ...], by: int) -> tuple[tuple[int, int], ...]:
    return tuple((a + by, b + by) for a, b in limbs)


@dataclass(frozen=True)
class Layout:
    """One point set: its --point-set name, its keypoints.parquet column, its points' names, the
    named parts of that order, the regions show and the report count (region -> first, end), the
    limbs (in each region's column's numbering) and colours `show` draws, what rtmlib calls the
    solution, and the exports it feeds. A layout of several people a frame (the two hands)
    writes `names` once per column of `sides` instead of in `column`, and its list columns
    (`lists`: name, values per item) hold every person posed."""

    name: str
    column: str
    title: str
    names: tuple[str, ...]
    parts: dict[str, tuple[int, int]]
    regions: dict[str, tuple[int, int]]
    skeleton: dict[str, tuple[tuple[int, int], ...]]
    colours: dict[str, tuple[int, int, int]]
    solution: str
    exports: tuple[str, ...] = ("pose",)
    sides: tuple[str, ...] = ()
    lists: tuple[tuple[str, int], ...] = ()

    @property
    def points(self) -> int:
        """Points a column holds."""
        return len(self.names)

    @property
    def columns(self) -> tuple[str, ...]:
        """Its point columns: one per side, or its one column."""
        return self.sides or (self.column,)

    def where(self, first: int, end: int) -> tuple[str, int, int]:
        """A range of the points over all its columns in order -> (column, first, end) in it."""
        col = first // self.points
        return self.columns[col], first - col * self.points, end - col * self.points


WHOLEBODY_LAYOUT = Layout(
    "coco-wholebody", "wholebody", "COCO-WholeBody 133 points",
    BODY17 + _WB_FEET + tuple(f"face-{i}" for i in range(68)) + tuple(f"hand_{i}" for i in range(21))
    * 2,
    {"body": (0, 17), "feet": (17, 23), "face": (23, 91), "left_hand": (91, 112),
     "right_hand": (112, 133)},
    {"body": (0, 23), "face": (23, 91), "left_hand": (91, 112), "right_hand": (112, 133)},
    {"body": _BODY17_LIMBS + _WB_FEET_LIMBS, "left_hand": _shifted(HAND_LIMBS, 91),
     "right_hand": _shifted(HAND_LIMBS, 112), "face": ()},
    {"face": FACE_COLOUR, "body": BODY_COLOUR, "left_hand": LEFT_COLOUR,
     "right_hand": RIGHT_COLOUR},
    "Wholebody", ("pose", "twostream-pkl", "unisign-pkl"))

HAND_SET = "hand21"
LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in (
    WHOLEBODY_LAYOUT,
    Layout("coco", "coco17", "COCO body 17 points", BODY17, {"body": (0, 17)}, {"body": (0, 17)},
           {"body": _BODY17_LIMBS}, {"body": BODY_COLOUR}, "Body"),
    Layout("halpe26", "halpe26", "Halpe 26 points (body with feet)", BODY17 + _HALPE_EXTRA,
           {"body": (0, 20), "feet": (20, 26)}, {"body": (0, 26)}, {"body": _HALPE_LIMBS},
           {"body": BODY_COLOUR}, "BodyWithFeet"),
    Layout(HAND_SET, "hand21", "one hand, 21 points", HAND21, {"hand": (0, 21)}, {"hand": (0, 21)},
           {"hand": HAND_LIMBS}, {"hand": LEFT_COLOUR}, "Hand"),
)}
DEFAULT_LAYOUT = WHOLEBODY_LAYOUT.name
# A hand21 run with a detector (rtmlib's Hand) writes every hand it poses: `hands` (21 x (x, y,
# score) a hand, in rtmlib's order) and `hand_boxes` (x1, y1, x2, y2, the detector's score: NaN
# where no detector scored the box), and the signer's two hands by the geometry of the two
# largest boxes (runner.sides_of), each its own column: tensors, report, show and .pose read
# those. Runs recorded before it (settings without `hands`) keep LAYOUTS' one column.
HANDS_LAYOUT = Layout(
    HAND_SET, "", "two hands, 21 points each (and every hand in `hands`)", HAND21,
    {"left_hand": (0, 21), "right_hand": (21, 42)}, {"left_hand": (0, 21), "right_hand": (21, 42)},
    {"left_hand": HAND_LIMBS, "right_hand": HAND_LIMBS},
    {"left_hand": LEFT_COLOUR, "right_hand": RIGHT_COLOUR}, "Hand",
    sides=("left_hand21", "right_hand21"), lists=(("hands", 21 * 3), ("hand_boxes", 5)))
EVERY_HAND = "every"  # settings["hands"] of a run in HANDS_LAYOUT


class LayoutError(ModelFileError):
    """--point-set cannot be used with this model: the message says the choices (exit 2)."""


def layout_for(points: int, asked: str | None, where: str = "--pose-model") -> Layout:
    """The layout of a model answering `points` points: the one asked (which must have that many),
    else the only one of that size; refused, naming the choices, where neither decides."""
    sizes = ", ".join(f"{n} ({lay.points})" for n, lay in LAYOUTS.items())
    if asked is not None:
        if asked not in LAYOUTS:
            raise LayoutError(f"--point-set {asked!r}: unknown; the choices are {sizes}.")
        if LAYOUTS[asked].points != points:
            raise LayoutError(f"--point-set {asked}: {where} answers {points} points, the layout "
                              f"has {LAYOUTS[asked].points}. The choices are {sizes}.")
        return LAYOUTS[asked]
    fits = [lay for lay in LAYOUTS.values() if lay.points == points]
    if len(fits) != 1:
        raise LayoutError(f"{where} answers {points} points, which no layout this tool knows has "
                          f"alone: name it with --point-set (the choices are {sizes}).")
    return fits[0]


def layout_of_column(columns: list[str] | tuple[str, ...]) -> Layout | None:
    """The layout whose columns a table has (None: none of this family's)."""
    for layout in (*LAYOUTS.values(), HANDS_LAYOUT):
        if all(c in columns for c in layout.columns):
            return layout
    return None
