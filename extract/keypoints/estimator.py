"""What an estimator is: the one seam between the job and whatever turns frames into keypoints.

An estimator *declares* what it writes (a `Declaration`: its landmark columns with points and
values per point, any per-frame count columns, hence the keypoint table's schema) and *runs* a
video's frames (`Estimator`: start_video, process one RGB frame, close). The job, the schema, the
merge and the outputs read the declaration; only the module of an estimator imports its library
(mediapipe in holistic.py, onnxruntime in wholebody.py), so each is imported only where it runs.

Estimators, by name (`--estimator`):
- holistic: MediaPipe's legacy Holistic (the default; every value as before this seam existed).
- wholebody: COCO-WholeBody 133 points from the user's ONNX detector and pose model (rtmlib's
  YOLOX + RTMPose), column `wholebody` (133 x (x, y, score), pixels) and `persons`.

Settings travel as one plain dict (recorded in run.json and each part's footer): a Holistic run's
is its options dict exactly as before (no `estimator` key); another estimator's carries
`estimator: NAME`. A third estimator is one module, a branch in `declaration` and `open_estimator`,
and its tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from extract.keypoints.schema import BASE_FIELDS, SCHEMA, layout, parquet_write_options

HOLISTIC = "holistic"
WHOLEBODY = "wholebody"
ESTIMATORS = (HOLISTIC, WHOLEBODY)
WHOLEBODY_POINTS = 133
# COCO-WholeBody's point order (what rtmlib's models and pose-format's header use).
WHOLEBODY_PARTS: dict[str, tuple[int, int]] = {
    "body": (0, 17), "feet": (17, 23), "face": (23, 91), "left_hand": (91, 112),
    "right_hand": (112, 133),
}
_BODY = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
         "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip",
         "left_knee", "right_knee", "left_ankle", "right_ankle")
_FEET = ("left_big_toe", "left_small_toe", "left_heel", "right_big_toe", "right_small_toe",
         "right_heel")
# The 133 names in point order, as pose-format's COCO-WholeBody header spells them (hands: the
# part says the side; 21 points each, wrist first, in MediaPipe's hand order).
WHOLEBODY_NAMES: tuple[str, ...] = (
    _BODY + _FEET + tuple(f"face-{i}" for i in range(68)) + tuple(f"hand_{i}" for i in range(21)) * 2)
# A whole-body point counts as found (tensor mask, report presence) at or above this score:
# rtmlib's own drawing and Wholebody.format_result keep points from 0.3.
SCORE_THRESHOLD = 0.3


class ModelFileError(Exception):
    """A model file cannot be used (missing, unreadable, another layout, changed since the run was
    planned); the message names the file and says what to do. The command exits 2."""


@dataclass(frozen=True)
class Declaration:
    """What an estimator writes into keypoints.parquet (besides the per-frame columns all share)."""

    name: str
    parts: dict[str, tuple[int, int]]  # landmark column -> (points, values per point)
    counts: tuple[str, ...] = ()  # int32 per-frame columns (wholebody: persons)
    values: tuple[str, ...] = ()  # a point's values when every part has the same (x, y, score)
    schema: pa.Schema = field(default=SCHEMA, compare=False)

    def write_options(self) -> dict[str, Any]:
        """How parts and keypoints.parquet are encoded (see schema.parquet_write_options)."""
        if self.name == HOLISTIC:
            return parquet_write_options()
        return {
            "compression": "zstd",
            "write_page_checksum": True,
            "use_dictionary": [f.name for f in self.schema
                               if f.type == pa.string() and f.name != "file_sha256"],
            "use_byte_stream_split": [f"{p}.list.element" for p in self.parts],
        }


WHOLEBODY_SCHEMA = pa.schema(
    [*BASE_FIELDS, pa.field(WHOLEBODY, pa.list_(pa.float32())),
     # boxes the detector kept on the frame (the signer is the largest): 0 on a frame it found
     # nobody on (the pose model then ran on the whole frame), null where no frame was read
     pa.field("persons", pa.int32())])


def estimator_name(settings: dict[str, Any] | None) -> str:
    """The estimator a settings dict is for (a dict without the key is Holistic's options)."""
    return str((settings or {}).get("estimator", HOLISTIC))


def declaration(settings: dict[str, Any] | None) -> Declaration:
    """The declaration of the estimator these settings run."""
    name = estimator_name(settings)
    if name == WHOLEBODY:
        return Declaration(WHOLEBODY, {WHOLEBODY: (WHOLEBODY_POINTS, 3)}, ("persons",),
                           ("x", "y", "score"), WHOLEBODY_SCHEMA)
    if name != HOLISTIC:
        raise ValueError(f"unknown estimator {name!r}; this version knows {', '.join(ESTIMATORS)}")
    return Declaration(HOLISTIC, layout(bool((settings or {}).get("refine_face_landmarks"))))


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    """The declaration whose table a file's schema is, or None (Holistic's earlier ones too)."""
    from extract.keypoints.schema import is_earlier_schema

    if schema.equals(WHOLEBODY_SCHEMA):
        return declaration({"estimator": WHOLEBODY})
    return declaration(None) if is_earlier_schema(schema) else None


class Estimator(Protocol):
    """What the job runs frames through, one per process."""

    declaration: Declaration
    settings: dict[str, Any]  # recorded in each part's footer

    def start_video(self) -> None: ...
    def process(self, rgb: np.ndarray) -> dict[str, Any]: ...
    def close(self) -> None: ...


DEFAULT_BATCH = 8  # frames per model call on the CPU: docs/performance.md
RUNTIME = "runtime"  # settings key of how a worker runs (batch size, device), not what it writes


def runtime(batch_size: int | None = None, device: str | None = None) -> dict[str, Any]:
    """How a whole-body worker runs: frames per batch and --device. Not the output's identity (a
    batch gives each frame what it gives alone), so never recorded in parts or the fingerprint."""
    return {"batch_size": batch_size or DEFAULT_BATCH, "device": device or "auto"}


class WholebodyEstimator:
    """rtmlib's YOLOX + RTMPose on the signer: no state between frames, so videos are independent
    without a reset, and frames can go through the models in batches."""

    def __init__(self, settings: dict[str, Any]) -> None:
        from extract.families.wholebody.runner import WholebodyModels

        run = runtime() | settings.get(RUNTIME, {})
        self.settings = {k: v for k, v in settings.items() if k != RUNTIME}
        self.declaration = declaration(self.settings)
        self.batch_size = int(run["batch_size"])
        self._models = WholebodyModels(settings["detector"]["path"], settings["pose_model"]["path"],
                                       run["device"])
        self.providers = self._models.providers()

    def start_video(self) -> None:
        pass

    def process(self, rgb: np.ndarray) -> dict[str, Any]:
        return self.process_batch([rgb])[0]

    def process_batch(self, rgbs: list[np.ndarray]) -> list[dict[str, Any]]:
        """Each frame's result, as `process` gives it alone."""
        return [{WHOLEBODY: values, "persons": persons}
                for values, persons in self._models.batch(rgbs)]

    def close(self) -> None:
        self._models = None


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> Estimator:
    """The estimator these settings name, built in this process (models loaded, graph started)."""
    if estimator_name(settings) == WHOLEBODY:
        return WholebodyEstimator(settings)
    from extract.families.holistic.runner import Extractor, HolisticOptions

    return Extractor(HolisticOptions.from_dict(settings), num_threads)
