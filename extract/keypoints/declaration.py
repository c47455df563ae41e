"""What a keypoint family declares: the columns it writes into keypoints.parquet and what every
output (merge, tensors, report, show, diff, exports) needs to know of them. The registry
(estimator.py) finds a family's package; this module is the data it hands over, with no
knowledge of any family (docs/families.md describes every field)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from phoenix_keypoints.extract.keypoints.points import PointTable
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS, BASE_OPTIONAL


@dataclass(frozen=True)
class ReportSpec:
    """What the plain report of a family says (extract/inspect/plain.py): per video, each region's
    found fraction and these count figures; a family with a QualitySpec instead gets the quality
    report of extract/inspect/report.py, made for landmark lists that exist where a part was found."""

    heading: str  # the page's heading, before the run's title
    note: str  # the paragraph under it: how a part counts as found, what the counts are
    # (figure, count column, ">" or "==", value): the frames of a video whose column compares so
    counts: tuple[tuple[str, str, str, int], ...] = ()
    flag_counts: tuple[str, ...] = ()  # a video is flagged where one of these figures is above 0,
    flag_lost: tuple[str, ...] = ()  # or where none of these regions is found on any frame


@dataclass(frozen=True)
class QualitySpec:
    """What the quality report (extract/inspect/report.py) and its drawing (extract/inspect/draw.py)
    need of a family whose parts are landmark lists that exist where a part was found. The parts it
    rates are the declaration's regions in order (at most four, each a landmark column of its own,
    which names its figures: `pose_rate`); the regions named body, face, left_hand and right_hand
    have roles: these are the points and channels the roles read."""

    engine: str  # who finds the parts, as the page says it ("MediaPipe found the part")
    # points are numbered in their region's column (as the skeleton's limbs are)
    head: int  # the body's points 0..head-1 (head and shoulders) checked for lying far outside
    shoulders: tuple[int, int]  # the body's points whose frame-to-frame movement is the jitter
    visibility: int  # the body's value channel that scores a point visible
    visible: float  # a body point counts (checked, drawn, moved) where visibility is at least this
    wrist: int  # the hand point whose position tells a left/right swap
    thin: tuple[str, ...] = ()  # regions drawn at half the line width (a dense mesh)
    dotted: tuple[str, ...] = ()  # regions drawn with a dot on every point


@dataclass(frozen=True, kw_only=True)
class Declaration:
    """What a family writes into keypoints.parquet (besides the per-frame columns all share) and
    what every output needs to know of it. Built by keywords only (twenty-odd fields, most of
    them optional: docs/families.md says each)."""

    name: str
    parts: dict[str, tuple[int, int]]  # landmark column -> (points, values per point)
    counts: tuple[str, ...] = ()  # int32 per-frame columns (wholebody: persons)
    values: tuple[str, ...] = ()  # a point's values when every part has the same (x, y, score)
    # the table's schema; None: BASE_FIELDS, a float32 list per part, an int32 per count column
    schema: pa.Schema = field(default=None, compare=False)  # type: ignore[assignment]
    title: str = ""  # how messages name its points ("COCO-WholeBody 133 points")
    # where a point counts as found: None, wherever its column's list exists (a detector that
    # returns whole parts); a number, where the point's last value (its score) is at least that
    score_threshold: float | None = None
    # regions the report, show and extract_keypoints name: region -> (column, first, end point)
    regions: dict[str, tuple[str, int, int]] = field(default_factory=dict, compare=False)
    # what `show` draws: region -> limbs (point pairs, in the region's column) and its colour (RGB;
    # drawn in this order, the last on top): by inspect/draw.py for a family with `quality`, else
    # by inspect/declared.py
    skeleton: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict, compare=False)
    colours: dict[str, tuple[int, int, int]] = field(default_factory=dict, compare=False)
    legend: dict[str, str] = field(default_factory=dict, compare=False)  # region -> legend label
    exports: tuple[str, ...] = ()  # `export --format` values it supports
    error_status: str = ""  # a frame's status when the estimator fails on it (default NAME_error)
    units: str = ""  # the values' units and origin, as points.json and the docs say them
    presence_note: str = ""  # where the score threshold comes from (points.json's mask words)
    # the points' names over all landmark columns in order, and the named parts of that order
    # (default: each column one part); read by points.json and the report
    names: tuple[str, ...] = field(default=(), compare=False)
    subparts: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)
    # its tensor numbering and presets: tensor sets come from presets, --points and normalisation
    # (outputs/tensors.py); None: one set of every declared point (outputs/declared.py)
    points: PointTable | None = field(default=None, compare=False)
    # columns files of its earlier versions lack (read as absent, filled with nulls by a merge)
    optional: tuple[str, ...] = field(default=BASE_OPTIONAL, compare=False)
    batches: bool = False  # takes --batch-size and --device (frames in batches, CPU or CUDA)
    # what its models take of each frame of a batch, besides the frame (a 1920x1080 frame): bytes
    # and their words ("the detector's input"); --batch-size's bound (batch_refused) counts them
    batch_input: tuple[int, str] = field(default=(0, ""), compare=False)
    report: ReportSpec | None = field(default=None, compare=False)  # the plain report
    quality: QualitySpec | None = field(default=None, compare=False)  # or the quality report
    # per-frame lists of any number of items (every hand a frame holds, each item's box): column ->
    # float32 values per item; a float32 list of items x values a row, null where the frame gave
    # none. Written and merged as they come; tensors, report and show read `parts`, not these
    lists: dict[str, int] = field(default_factory=dict)
    # every person a frame holds, as the points of a part: list column -> the part it repeats
    # per person (its width that part's points x values); a multi-person family's `parts` hold
    # one person (the signer, by its rule: what tensors, the report and show read), these hold
    # everyone, and `.pose` writes them as its people. Either none or one for every part (a .pose
    # person is every part's points); docs/families.md, "How to write a multi-person family"
    people: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if problems := self.people_problems():
            raise ValueError(f"the {self.name} declaration's people: {'; '.join(problems)}")
        if self.schema is None:
            cols = [pa.field(p, pa.list_(pa.float32())) for p in (*self.parts, *self.lists)]
            object.__setattr__(self, "schema", pa.schema(
                [*BASE_FIELDS, *cols, *(pa.field(c, pa.int32()) for c in self.counts)]))

    def people_problems(self) -> list[str]:
        """What is wrong with `people`, each in a phrase (checked when a declaration is made, so
        the plugin check and the first `run` both say it)."""
        out = []
        for column, part in self.people.items():
            if column not in self.lists:
                have = ", ".join(self.lists) or "it has none"
                out.append(f"{column!r} is not one of its list columns ({have})")
            elif part not in self.parts:
                out.append(f"{column!r} repeats {part!r}, which is not one of its parts "
                           f"({', '.join(self.parts)})")
            elif self.lists[column] != self.parts[part][0] * self.parts[part][1]:
                n, c = self.parts[part]
                out.append(f"{column!r} holds {self.lists[column]} values an item, not {part!r}'s "
                           f"{n} points x {c} values = {n * c}")
        missed = [p for p in self.parts if p not in self.people.values()]
        if self.people and missed and not out:
            out.append(f"no list column repeats {', '.join(map(repr, missed))} (a .pose person "
                       "is every part's points: declare a list column for each part, or none)")
        return out

    def people_of(self) -> dict[str, str]:
        """Each part -> the list column that holds it for every person (empty: one person)."""
        return {part: column for column, part in self.people.items()}

    def person_note(self, most: int | None = None) -> str:
        """Which person its parts (tensors, the report, show) hold, in one short sentence: the
        signer by the family's rule where it declares everyone (`people`), `most` the most in a
        frame where known."""
        if not self.people:
            return "one person a frame (the family's parts)"
        cols = ", ".join(self.people)
        many = f", at most {most} a frame," if most is not None else ""
        return (f"the signer (the family's parts: {', '.join(self.parts)}); every person{many} "
                f"in list column {cols} (.pose holds them all)")

    @property
    def tensor_presets(self) -> bool:
        """Its tensor sets come from presets, --points and normalisation (it has a PointTable)."""
        return self.points is not None

    def point_parts(self) -> dict[str, tuple[int, int]]:
        """Named ranges of the point order (first, end)."""
        if self.subparts:
            return dict(self.subparts)
        out, at = {}, 0
        for part, (n, _) in self.parts.items():
            out[part], at = (at, at + n), at + n
        return out

    def point_name(self, i: int) -> str:
        return self.names[i] if i < len(self.names) else str(i)

    def write_options(self) -> dict[str, Any]:
        """How parts and keypoints.parquet are encoded: zstd, page checksums, dictionaries only
        for the string columns, BYTE_STREAM_SPLIT for the landmark floats (schema.py says why)."""
        return {
            "compression": "zstd",
            "write_page_checksum": True,
            "use_dictionary": [f.name for f in self.schema
                               if f.type == pa.string() and f.name != "file_sha256"],
            "use_byte_stream_split": [f"{p}.list.element" for p in self.parts],
        }

    @property
    def has_pose(self) -> bool:
        """Whether its runs have .pose files: `export --format pose` and `Keypoints.to_pose()`
        both read this one rule (its `exports` lists "pose")."""
        return "pose" in self.exports
