"""A family with tensor presets, written in the tests only (issue 38): the toy family's quarter
points (tests/toy_family.py) declared with a `PointTable`, so `tensors` reads its presets, point
names, --points parts and normalisation anchor from its declaration alone, and `tensors --help`
lists its presets through the registry. Nothing outside the tests knows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import toy_family

from phoenix_keypoints.extract.families import Family
from phoenix_keypoints.extract.keypoints.estimator import Declaration
from phoenix_keypoints.extract.keypoints.points import PointTable

NAME = "toypts"
NAMES = ("top_left", "top_right", "bottom_left", "bottom_right")
TABLE = PointTable(
    {NAME: (4, 3)}, {NAME: (4, 3)}, {NAME: NAMES},
    {"toypts-4": (0, 1, 2, 3), "top-2": (0, 1), "diagonal-2": (3, 0)}, ("toypts-4",),
    anchor=(NAME, (0, 1)), units="x, y: pixels of the frame; z: brightness",
    mask="True where the toy's list exists", meta={"quarters": 4})
DECLARATION = Declaration(
    name=NAME, parts={NAME: (4, 3)}, counts=("bright",), values=("x", "y", "score"),
    title="toy points with presets",
    regions={"top": (NAME, 0, 2), "bottom": (NAME, 2, 4)}, exports=("pkl",), names=NAMES,
    points=TABLE)
SCHEMA = DECLARATION.schema  # made by the declaration from what it says (no schema given)


def declaration(settings: dict[str, Any] | None = None) -> Declaration:
    return DECLARATION


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    return DECLARATION if schema.equals(SCHEMA) else None


class Estimator(toy_family.ToyEstimator):
    """The toy's quarter points, in this family's column."""

    declaration = DECLARATION

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        super().__init__(settings)
        self.settings = {**self.settings, "estimator": NAME}

    def process(self, rgb: np.ndarray) -> dict[str, Any]:
        out = super().process(rgb)
        return {NAME: out.pop(toy_family.NAME), **out}


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> Estimator:
    return Estimator(settings)


def file_record(settings: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    return {"estimator": NAME, "layout": {NAME: {"points": 4, "values": ["x", "y", "score"]}}}


class ToyPresets(Family):
    """The family as the registry makes it (`toypts = toy_presets:ToyPresets`): the four
    required methods; every other member is Family's default."""

    declaration = staticmethod(declaration)
    declaration_of_schema = staticmethod(declaration_of_schema)
    open_estimator = staticmethod(open_estimator)
    file_record = staticmethod(file_record)
