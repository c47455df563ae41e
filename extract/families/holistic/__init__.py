"""The Holistic family: MediaPipe's legacy Holistic, the default (every value as before families
existed). Its declaration (declaration.py: columns, schema, regions), its numbering, point names
and tensor presets (points.py: the PointTable its declaration carries for outputs/tensors.py), its
runner (runner.py: the graph, the only module that imports mediapipe), its .pose components
(pose.py) and the outputs it alone has (exports.py: Kaggle's islr (islr.py), the older pipeline's
143-point pkl and npz (legacy.py)).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from phoenix_keypoints.extract.families.holistic.declaration import (
    HOLISTIC,
    declaration,
    declaration_of_schema,
    layout_record,
)
from phoenix_keypoints.extract.families.holistic.exports import EXPORTS, ONE_FILE_EXPORTS
from phoenix_keypoints.extract.families.holistic.options import (
    add_run_options,
    asked_settings,
    settings_conflicts,
    settings_of,
)
from phoenix_keypoints.extract.keypoints.contract import Family
from phoenix_keypoints.extract.keypoints.estimator import Estimator

__all__ = ["EXPORTS", "HOLISTIC", "ONE_FILE_EXPORTS", "add_run_options", "asked_settings",
           "declaration", "declaration_of_schema", "settings_conflicts", "settings_of"]

ABOUT = "MediaPipe Holistic"  # how `run --help` and the tool's description name it


def write_pose_files(keypoints: Path, out_dir: Path, fps: float, root: Path | None) -> int:
    """`export --format pose`: pose-format's own Holistic components (pose.py)."""
    from phoenix_keypoints.extract.families.holistic.pose import write_pose_files as write

    return write(keypoints, out_dir, fps, root)


def pose_of_clip(parts: dict[str, np.ndarray], width: int, height: int, fps: float) -> Any:
    """Keypoints.to_pose(): the .pose `export --format pose` writes for the same frames."""
    from phoenix_keypoints.extract.families.holistic.pose import pose_of_blocks

    return pose_of_blocks(parts, width, height, fps)

LIBRARY = ("mediapipe",)  # the library its values depend on, recorded in each part (versions.py)


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> Estimator:
    from phoenix_keypoints.extract.families.holistic.runner import Extractor, HolisticOptions

    return Extractor(HolisticOptions.from_dict(settings), num_threads)


def clip_options() -> tuple[str, ...]:
    """The options extract_keypoints takes for this family (Holistic's, as `run` takes them)."""
    from phoenix_keypoints.extract.families.holistic.runner import HolisticOptions

    return tuple(f.name for f in fields(HolisticOptions))


def clip_settings(options: dict[str, Any]) -> dict[str, Any]:
    from phoenix_keypoints.extract.families.holistic.runner import HolisticOptions

    return HolisticOptions(**options).as_dict()


def clip_parts(parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return parts


def file_record(settings: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """What keypoints.parquet's metadata says of a Holistic file: the record it has always had."""
    from phoenix_keypoints.extract.families.holistic.runner import HolisticOptions

    options = HolisticOptions.from_dict(recorded).as_dict()  # every option, old run.json too
    return {"holistic": options,
            **layout_record(declaration(options).parts)}


# --- what the job asks of a family before and after it runs -------------------------------------
ENGINE = "MediaPipe"  # what runs on the CPU (the idle-cores warning)
IMPORTS = "mediapipe"  # the module a worker needs to start (the advice when workers cannot)
# what its graph's threads (TFLite, absl, mediapipe) write to stderr beside a frame's decode: not
# the decoder's words (extract/keypoints/frames.py sends them back to stderr, out of the note)
LOG_LINES = r"TensorFlow|absl::|mediapipe"
# `export --help`'s words for each format it exports (jobs/cli.py)
EXPORT_HELP = {"pkl": "{video: arrays} of a tensor set", "pose": ".pose files",
               "islr": "Kaggle isolated-sign parquets",
               "legacy-pkl": "the older script's pkl (what run --output_path writes)",
               "legacy-npz": "its model input, <split>_keypoints.npz [N, 143, 3]"}


def unavailable() -> str | None:
    """Why this family cannot run in this Python (None: it can): mediapipe, found unimported."""
    from phoenix_keypoints.extract.families.holistic.runner import holistic_available

    return holistic_available()


def check_settings(settings: dict[str, Any]) -> None:
    """Refuse, before planning, options that cannot run here (the pose model file)."""
    from phoenix_keypoints.extract.families.holistic.runner import HolisticOptions, check_model

    check_model(HolisticOptions.from_dict(settings))


class Holistic(Family):
    """The MediaPipe Holistic family as the registry knows it: this module's functions and constants,
    each the member of Family of its name (the rest are Family's defaults)."""

    declaration = staticmethod(declaration)
    declaration_of_schema = staticmethod(declaration_of_schema)
    open_estimator = staticmethod(open_estimator)
    file_record = staticmethod(file_record)
    clip_options = staticmethod(clip_options)
    clip_settings = staticmethod(clip_settings)
    clip_parts = staticmethod(clip_parts)
    pose_of_clip = staticmethod(pose_of_clip)
    write_pose_files = staticmethod(write_pose_files)
    EXPORTS = EXPORTS
    EXPORT_HELP = EXPORT_HELP
    ONE_FILE_EXPORTS = ONE_FILE_EXPORTS
    add_run_options = staticmethod(add_run_options)
    asked_settings = staticmethod(asked_settings)
    settings_of = staticmethod(settings_of)
    settings_conflicts = staticmethod(settings_conflicts)
    check_settings = staticmethod(check_settings)
    unavailable = staticmethod(unavailable)
    LIBRARY = LIBRARY
    ABOUT = ABOUT
    ENGINE = ENGINE
    IMPORTS = IMPORTS
    LOG_LINES = LOG_LINES
