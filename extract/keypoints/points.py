"""Which of a family's points a tensor keeps: named presets, explicit lists, point names.

A family whose tensor sets come from presets (extract/outputs/tensors.py) declares a `PointTable`
(its Declaration's `points`): its tensor parts in point order with each point's name, its presets,
the part that also has world coordinates, the two points a normalisation is anchored on, and the
words its points.json says. Indices are global positions in that order. A family may record more
points of a part on some runs (a `wider` table); a choice is read against its run's own table
(`PointSet.for_run`), and one that asks for points only the wider table has is refused with the
table's words. Nothing here knows a family: the tables are data in each family's package.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PointTable:
    """A family's tensor numbering and its named point sets. Data only."""

    parts: dict[str, tuple[int, int]]  # tensor part (its column) -> (points, values), point order
    columns: dict[str, tuple[int, int]]  # every landmark column the table's values are read from
    names: dict[str, tuple[str, ...]]  # part -> its points' names (point_name: "part.name")
    presets: dict[str, tuple[int, ...]]  # name -> global indices; the first is every point
    fulls: tuple[str, ...] = ()  # the every-point preset of each numbering (read as this one's)
    world: tuple[str, str] | None = None  # (part, the column of its world coordinates)
    anchor: tuple[str, tuple[int, int]] | None = None  # (part, two points): shoulders' normalisation
    units: str = ""  # points.json's words for unnormalised values
    world_units: str = ""  # ... for the world column's values
    mask: str = ""  # ... for the mask
    meta: dict[str, Any] = field(default_factory=dict)  # more points.json keys (after num_points)
    # the numbering of a run that records more points: a file whose metadata has `marker`
    # (key, value) is read in it; the words of a refusal: what the wider points need, hold, and
    # why this run lacks them, and what the default set is on such a run (`tensors --help`)
    wider: PointTable | None = None
    marker: tuple[str, Any] | None = None
    needs: str = ""
    holds: str = ""
    lacks: str = ""
    wider_run: str = ""

    @property
    def full(self) -> str:
        """The preset of every point (the default set, in tensors/ itself)."""
        return next(iter(self.presets))

    def offsets(self) -> dict[str, tuple[int, int]]:
        """part -> (first global index, points)."""
        out, o = {}, 0
        for part, (n, _) in self.parts.items():
            out[part] = (o, n)
            o += n
        return out

    @property
    def num_points(self) -> int:
        return sum(n for n, _ in self.parts.values())

    def choices(self) -> tuple[str, ...]:
        """Every preset name a user may type: this table's, then the wider table's full set."""
        more = (self.wider.full,) if self.wider is not None else ()
        return tuple(dict.fromkeys((*self.presets, *more)))

    def of_file(self, meta: dict[str, Any] | None) -> PointTable:
        """The table of a keypoints file with this metadata: the wider one where it says so."""
        w = self.wider
        if w is not None and w.marker is not None and meta and meta.get(w.marker[0]) == w.marker[1]:
            return w
        return self


class PointsError(ValueError):
    """A --points list that cannot be read; the message says which item and why."""


def part_of(index: int, table: PointTable) -> tuple[str, int]:
    """Global index -> (part, index within the part)."""
    for part, (o, n) in table.offsets().items():
        if o <= index < o + n:
            return part, index - o
    raise PointsError(f"point {index} is outside 0-{table.num_points - 1}")


def point_name(index: int, table: PointTable) -> str:
    """A readable, stable name: the part, a dot, the point's name in the part."""
    part, i = part_of(index, table)
    return f"{part}.{table.names[part][i]}"


_ITEM = re.compile(r"^(?:(?P<part>[a-z_]+)(?::(?P<range>.+))?|(?P<glob>[0-9]+(?:-[0-9]+)?))$")


def _number(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes `²` and `٣`, which int() refuses or reads."""
    return text.isascii() and text.isdigit()


def _span(text: str, limit: int, where: str, table: PointTable, wider_limit: int | None = None
          ) -> list[int]:
    """wider_limit: the bound in the wider table, for the message when this one is asked for
    points only that one has."""
    a, _, b = text.partition("-")
    if not _number(a) or (b and not _number(b)):
        raise PointsError(f"{where}: '{text}' is not N or N-M")
    lo, hi = int(a), int(b) if b else int(a)
    if lo > hi or hi >= limit:
        if lo <= hi and wider_limit is not None and hi < wider_limit:
            raise PointsError(f"{where}: '{text}' needs {table.needs}, but {table.lacks}")
        raise PointsError(f"{where}: '{text}' is not within 0-{limit - 1}")
    return list(range(lo, hi + 1))


def _item(item: str, table: PointTable) -> list[int]:
    """One --points item -> its global indices."""
    m = _ITEM.match(item)
    if m is None:
        raise PointsError(f"--points item '{item}': use N, N-M, PART or PART:N-M")
    where, more = f"--points item '{item}'", table.wider
    if m["glob"]:
        return _span(m["glob"], table.num_points, where, table, more and more.num_points)
    parts = table.offsets()
    part = m["part"]
    if part not in parts:
        raise PointsError(f"{where}: part must be one of {', '.join(parts)}")
    o, n = parts[part]
    local = range(n) if m["range"] is None else _span(m["range"], n, where, table,
                                                      more and more.offsets()[part][1])
    return [o + i for i in local]


def parse_points(spec: str, table: PointTable) -> tuple[int, ...]:
    """'11-16,501-542' (global) or 'pose:11-16,left_hand,right_hand,face:0-10' -> global indices
    in the table's numbering.

    Order is kept as written (it is the tensor's point order); a point listed twice is refused.
    """
    out: list[int] = []
    for raw in spec.split(","):
        item = raw.strip()
        if item:
            out += _item(item, table)
    if not out:
        raise PointsError("--points is empty")
    dup = sorted(i for i, n in Counter(out).items() if n > 1)
    if dup:
        raise PointsError(f"--points lists point(s) {dup[:10]} more than once")
    return tuple(out)


@dataclass(frozen=True)
class PointSet:
    """The points of one tensor set: where they come from (preset or list) and their indices in a
    table's numbering. Without a table it is a choice not yet read (`ask`): a command line knows
    the preset or list before it knows the run's family; for_run reads it in the run's table."""

    name: str
    indices: tuple[int, ...]
    table: PointTable | None = field(default=None, compare=False, repr=False)
    spec: str | None = None  # the --points text, read again by for_run for the run's numbering

    @classmethod
    def ask(cls, preset: str | None = None, points: str | None = None) -> PointSet:
        """A choice to read in the run's table: a preset (None: every point) or a --points list."""
        return cls(preset or "", (), None, points)

    @classmethod
    def preset(cls, name: str, table: PointTable) -> PointSet:
        if table.wider is not None and name == table.wider.full:
            raise PointsError(f"preset '{name}' holds {table.holds}, but {table.lacks}")
        if name in table.fulls:  # everything the run has, in its own numbering
            name = table.full
        if name not in table.presets:
            raise PointsError(f"unknown preset '{name}'; choose one of {', '.join(table.presets)}")
        return cls(name, table.presets[name], table)

    @classmethod
    def from_list(cls, spec: str, table: PointTable) -> PointSet:
        idx = parse_points(spec, table)
        digest = hashlib.sha1(",".join(map(str, idx)).encode()).hexdigest()[:8]
        return cls(f"points-{len(idx)}-{digest}", idx, table, spec)

    @property
    def is_full(self) -> bool:
        """Every point of the run (the default set): the full preset, or a choice of none."""
        return self.name == (self.table.full if self.table is not None else "")

    def for_run(self, table: PointTable) -> PointSet:
        """The same choice in a run's table; raises PointsError when it asks for points that
        table does not have."""
        if self.table is not None and self.table.full == table.full:
            return self
        if self.spec is not None:
            return PointSet.from_list(self.spec, table)
        return PointSet.preset(self.name or table.full, table)

    @property
    def array(self) -> np.ndarray:
        return np.asarray(self.indices, np.int64)

    def describe(self) -> list[dict[str, object]]:
        """One entry per tensor point: its global index, part, index in the part, and name."""
        if self.table is None:
            raise PointsError("a point choice not yet read in a run's numbering")
        out: list[dict[str, object]] = []
        for k, g in enumerate(self.indices):
            part, i = part_of(g, self.table)
            out.append({"k": k, "index": g, "part": part, "part_index": i,
                        "name": point_name(g, self.table)})
        return out

