"""A multi-person keypoint family, written in the tests only (issue 55, every person exported):
the case docs/families.md's "How to write a multi-person family" describes. Its `parts` hold
one person a frame (the signer: by its rule, the first person its runner finds), its list
column `crowd` every person as the same points, declared as `people`; `.pose` then holds them
all. Nothing outside tests/ knows it; tests/test_people.py makes it known as an installed
package would (an entry point of group `phoenix_keypoints.families` naming the class `Crowd`).

Its runner makes points from pixels, so a frame decides them: the frame's byte sum modulo 3
picks 0, 1 or 3 persons; person p's point k is at (10 k + p, 5 k + the frame's mean) with score
0.9, but the third person's last point scores 0.2 (under the 0.5 threshold: absent).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.families import Family
from phoenix_keypoints.extract.keypoints.estimator import Declaration
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS

NAME = "crowd"
POINTS = 4
SCHEMA = pa.schema([*BASE_FIELDS, pa.field(NAME, pa.list_(pa.float32())),
                    pa.field("everyone", pa.list_(pa.float32())), pa.field("persons", pa.int32())])
DECLARATION = Declaration(
    name=NAME, parts={NAME: (POINTS, 3)}, counts=("persons",), values=("x", "y", "score"),
    schema=SCHEMA, title="crowd test points", score_threshold=0.5, exports=("pose",),
    units="x, y: pixels of the frame (origin top left); score: 0..1",
    names=("a", "b", "c", "d"), skeleton={NAME: ((0, 1), (2, 3))}, colours={NAME: (0, 200, 255)},
    lists={"everyone": POINTS * 3}, people={"everyone": NAME})


def declaration(settings: dict[str, Any] | None = None) -> Declaration:
    return DECLARATION


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    return DECLARATION if schema.equals(SCHEMA) else None


def persons_of(rgb: np.ndarray) -> np.ndarray:
    """The frame's persons, [n, POINTS, 3] float32 (n: 0, 1 or 3), the signer first."""
    n = (0, 1, 3)[int(rgb.sum(dtype=np.int64)) % 3]
    out = np.zeros((n, POINTS, 3), np.float32)
    for p in range(n):
        out[p, :, 0] = 10 * np.arange(POINTS) + p
        out[p, :, 1] = 5 * np.arange(POINTS) + float(rgb.mean())
        out[p, :, 2] = 0.9
    if n == 3:
        out[2, -1, 2] = 0.2
    return out


class CrowdEstimator:
    declaration = DECLARATION

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings = {"estimator": NAME}

    def start_video(self) -> None:
        pass

    def process(self, rgb: np.ndarray) -> dict[str, Any]:
        people = persons_of(rgb)
        return {NAME: people[0].reshape(-1) if len(people) else None,
                "everyone": people.reshape(-1) if len(people) else None,
                "persons": len(people)}

    def close(self) -> None:
        pass


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> CrowdEstimator:
    return CrowdEstimator(settings)


def file_record(settings: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    return {"estimator": NAME, "layout": {NAME: {"points": POINTS, "values": ["x", "y", "score"]}}}


def clip_settings(options: dict[str, Any]) -> dict[str, Any]:
    return {"estimator": NAME}


class Crowd(Family):
    """The crowd family as the registry makes it (`crowd = crowd_family:Crowd`): this module's
    functions, each the member of Family of its name."""

    declaration = staticmethod(declaration)
    declaration_of_schema = staticmethod(declaration_of_schema)
    open_estimator = staticmethod(open_estimator)
    file_record = staticmethod(file_record)
    clip_settings = staticmethod(clip_settings)
