"""The 3D whole-body family: COCO-WholeBody 133 points from the user's ONNX detector and an
RTMW3D-style pose model (rtmlib's YOLOX + RTMPose3d), one column `wholebody3d` (133 x (x, y, x3d,
y3d, z3d, score): declaration.py says each channel's units) and `persons`.

Built on the whole-body family: its detector, crop, model-file records and checks, and its two
flags (--detector, --pose-model, read as this family's under --estimator wholebody3d: options.py)
are imported from extract/families/wholebody (runner.py here adds the three-vector head and
rtmlib's 3D decode). Its outputs: the declared tensor set [frames, 133, 6], `show`, `diff` from the
declaration, `report` as declared plus the spread of z (report.py), and a .pose with pose-format's
COCO-WholeBody components in XYZC (outputs.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.families.wholebody import (
    DEVICE_HELP,
    IMPORTS,
    LIBRARY,
    check_recorded,
    device_refused,
    gpu_memory_need,
    library_version,
    model_problems,
    on_gpu,
    run_line,
    runs_on,
)
from phoenix_keypoints.extract.families.wholebody.declaration import WHOLEBODY_PARTS
from phoenix_keypoints.extract.families.wholebody3d.declaration import (
    DECLARATION,
    WHOLEBODY3D,
    WHOLEBODY3D_SCHEMA,
    file_record,
)
from phoenix_keypoints.extract.families.wholebody3d.options import (
    ABOUT,
    DOCS,
    asked_settings,
    moved_files,
    settings_conflicts,
    settings_of,
)
from phoenix_keypoints.extract.keypoints.contract import Family
from phoenix_keypoints.extract.keypoints.estimator import Declaration, Estimator

__all__ = ["ABOUT", "DEVICE_HELP", "DOCS", "IMPORTS", "LIBRARY", "asked_settings",
           "check_recorded", "device_refused", "file_record", "gpu_memory_need", "library_version",
           "model_problems", "moved_files", "on_gpu", "run_line", "runs_on", "settings_conflicts",
           "settings_of"]


ENGINE = f"The {WHOLEBODY3D} estimator (onnxruntime)"  # what runs on the CPU (the idle-cores warning)


def declaration(settings: dict[str, Any] | None = None) -> Declaration:
    return DECLARATION


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    return DECLARATION if schema.equals(WHOLEBODY3D_SCHEMA) else None


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> Estimator:
    from phoenix_keypoints.extract.families.wholebody3d.runner import Wholebody3dEstimator

    return Wholebody3dEstimator(settings)


def clip_options() -> tuple[str, ...]:
    """The options extract_keypoints takes for this family: the two model files."""
    return ("detector", "pose_model")


def clip_settings(options: dict[str, Any]) -> dict[str, Any]:
    """extract_keypoints' options (detector=, pose_model= paths) as a run records them; the model
    files are checked as `run` checks them."""
    missing = [k for k in clip_options() if options.get(k) is None]
    if missing:
        raise TypeError(f"estimator {WHOLEBODY3D!r} needs "
                        f"{' and '.join(f'{k}=PATH.onnx' for k in missing)} (docs/wholebody.md)")
    from phoenix_keypoints.extract.families.wholebody3d.runner import record

    return {"estimator": WHOLEBODY3D, **record(Path(options["detector"]),
                                                Path(options["pose_model"]))}


def clip_parts(parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A clip's arrays with the named parts as slices of the 133 points (extract_keypoints)."""
    return parts | {name: parts[WHOLEBODY3D][:, a:b] for name, (a, b) in WHOLEBODY_PARTS.items()}


def pose_of_clip(parts: dict[str, np.ndarray], width: int, height: int, fps: float) -> Any:
    """Keypoints.to_pose(): the .pose `export --format pose` writes for the same frames."""
    from phoenix_keypoints.extract.families.wholebody3d.outputs import pose_of_values

    values = parts[WHOLEBODY3D]
    return pose_of_values(np.nan_to_num(values), ~np.isnan(values).all(axis=(1, 2)), width, height,
                          fps)


def write_pose_files(keypoints: Path, out_dir: Path, fps: float, root: Path | None) -> int:
    from phoenix_keypoints.extract.families.wholebody3d.outputs import write_pose_files

    return write_pose_files(keypoints, out_dir, fps, root)


def check_settings(settings: dict[str, Any]) -> None:
    """Refuse, before planning, a run without its two model files."""
    from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

    if "detector" not in settings or "pose_model" not in settings:
        raise ModelFileError(f"--estimator {WHOLEBODY3D} needs --detector DET.onnx and --pose-model "
                             "RTMW3D.onnx (docs/wholebody.md, 3D).")


def status_line(settings: dict[str, Any]) -> str:
    """status: the estimator and its two model files."""
    files = ", ".join(f"--{k.replace('_', '-')} {Path(settings[k]['path']).name}"
                      for k in ("detector", "pose_model") if k in settings)
    return f"estimator: {WHOLEBODY3D}" + (f" ({files})" if files else "")


def write_report(keypoints: Path, title: str, out_dir: Path) -> dict[str, Any]:
    from phoenix_keypoints.extract.families.wholebody3d.report import write_report as write

    return write(keypoints, title, out_dir)


class WholeBody3D(Family):
    """The 3D whole-body family as the registry knows it: this module's functions and constants,
    each the member of Family of its name (the rest are Family's defaults)."""

    declaration = staticmethod(declaration)
    declaration_of_schema = staticmethod(declaration_of_schema)
    open_estimator = staticmethod(open_estimator)
    file_record = staticmethod(file_record)
    clip_options = staticmethod(clip_options)
    clip_settings = staticmethod(clip_settings)
    clip_parts = staticmethod(clip_parts)
    pose_of_clip = staticmethod(pose_of_clip)
    write_report = staticmethod(write_report)
    write_pose_files = staticmethod(write_pose_files)
    asked_settings = staticmethod(asked_settings)
    settings_of = staticmethod(settings_of)
    settings_conflicts = staticmethod(settings_conflicts)
    moved_files = staticmethod(moved_files)
    check_settings = staticmethod(check_settings)
    check_recorded = staticmethod(check_recorded)
    model_problems = staticmethod(model_problems)
    device_refused = staticmethod(device_refused)
    runs_on = staticmethod(runs_on)
    on_gpu = staticmethod(on_gpu)
    gpu_memory_need = staticmethod(gpu_memory_need)
    DEVICE_HELP = DEVICE_HELP
    run_line = staticmethod(run_line)
    status_line = staticmethod(status_line)
    library_version = staticmethod(library_version)
    LIBRARY = LIBRARY
    ABOUT = ABOUT
    DOCS = DOCS
    ENGINE = ENGINE
    IMPORTS = IMPORTS
