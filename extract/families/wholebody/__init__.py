"""The whole-body family: COCO-WholeBody 133 points from the user's ONNX detector and pose model
(rtmlib's YOLOX + RTMPose), one column `wholebody` (133 x (x, y, score), pixels) and `persons`.

This package is everything the tool knows of the family: its declaration and hooks here, its
runner (runner.py: the models), its outputs (outputs.py: tensors, .pose, TwoStream-SLR and
Uni-Sign pkls); its report and drawing are read from its declaration (extract/inspect/plain.py,
declared.py). The registry
(extract.keypoints.estimator) imports it only when a run, file or clip names it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.families.wholebody.declaration import (
    DECLARATION,
    WHOLEBODY,
    WHOLEBODY_PARTS,
    WHOLEBODY_SCHEMA,
    file_record,
)
from phoenix_keypoints.extract.families.wholebody.options import (
    ABOUT,
    DOCS,
    add_run_options,
    asked_settings,
    moved_files,
    settings_conflicts,
    settings_of,
)
from phoenix_keypoints.extract.families.wholebody.published import (
    MODELS_ABOUT,
    MODELS_HELP,
    PUBLISHED_MODELS,
)
from phoenix_keypoints.extract.keypoints.estimator import Declaration, Estimator

__all__ = ["ABOUT", "DOCS", "MODELS_ABOUT", "MODELS_HELP", "PUBLISHED_MODELS", "add_run_options",
           "asked_settings", "file_record", "moved_files", "settings_conflicts", "settings_of"]


def declaration(settings: dict[str, Any] | None = None) -> Declaration:
    return DECLARATION


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    return DECLARATION if schema.equals(WHOLEBODY_SCHEMA) else None


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> Estimator:
    from phoenix_keypoints.extract.families.wholebody.runner import WholebodyEstimator

    return WholebodyEstimator(settings)


def clip_settings(options: dict[str, Any]) -> dict[str, Any]:
    """extract_keypoints' options (detector=, pose_model= paths, det_every=K) as a run records
    them; the model files are checked as `run` checks them."""
    missing = [k for k in ("detector", "pose_model") if options.get(k) is None]
    if missing:
        raise TypeError(f"estimator 'wholebody' needs {' and '.join(f'{k}=PATH.onnx' for k in missing)}"
                        " (docs/wholebody.md says where rtmlib's published models are)")
    from phoenix_keypoints.extract.families.wholebody.runner import record

    every = options.get("det_every")
    if every is not None and (not isinstance(every, int) or isinstance(every, bool) or every < 1):
        raise ValueError(f"det_every={every!r}: give a whole number of frames, 1 or more (1: "
                         "detect on every frame)")
    return {"estimator": WHOLEBODY, **record(Path(options["detector"]), Path(options["pose_model"])),
            **({"det_every": every} if every is not None else {})}


def clip_options() -> tuple[str, ...]:
    """The options extract_keypoints takes for this family: the two model files, --det-every."""
    return ("detector", "pose_model", "det_every")


def clip_parts(parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A clip's arrays with the named parts as slices of the 133 points (extract_keypoints)."""
    return parts | {name: parts[WHOLEBODY][:, a:b] for name, (a, b) in WHOLEBODY_PARTS.items()}


def pose_of_clip(parts: dict[str, np.ndarray], width: int, height: int, fps: float) -> Any:
    """Keypoints.to_pose(): the .pose `export --format pose` writes for the same frames."""
    from phoenix_keypoints.extract.families.wholebody.outputs import pose_of_values

    values = parts[WHOLEBODY]
    return pose_of_values(np.nan_to_num(values), ~np.isnan(values).all(axis=(1, 2)), width, height,
                          fps)


def write_pose_files(keypoints: Path, out_dir: Path, fps: float, root: Path | None) -> int:
    from phoenix_keypoints.extract.families.wholebody.outputs import write_pose_files

    return write_pose_files(keypoints, out_dir, fps, root)


def _twostream(keypoints: Path, to: Path, flat: bool = False) -> str:
    from phoenix_keypoints.extract.families.wholebody.outputs import write_twostream_pkl
    from phoenix_keypoints.extract.outputs.tensors import TensorsError

    if flat:
        raise TensorsError("--flat applies to --format unisign-pkl (a file per video); "
                           "--format twostream-pkl writes one .pkl file.")
    if to.is_dir():
        raise TensorsError(f"--to {to} is a folder; --format twostream-pkl writes one .pkl file.")
    return f"twostream-pkl: {to} ({write_twostream_pkl(keypoints, to)} videos)"


def _unisign(keypoints: Path, to: Path, flat: bool = False) -> str:
    from phoenix_keypoints.extract.families.wholebody.outputs import write_unisign_pkls

    return f"unisign-pkl: {to}/ ({write_unisign_pkls(keypoints, to, flat)} videos)"


# the exports this family writes itself (export --format), each giving the line it prints
EXPORTS = {"twostream-pkl": _twostream, "unisign-pkl": _unisign}


# --- what the job asks of a family before and after it runs -------------------------------------
# the library its values depend on (either distribution provides the module), recorded in each part
LIBRARY = ("onnxruntime", "onnxruntime-gpu")


def library_version() -> str:
    """onnxruntime's version as the imported module says (onnxruntime-gpu installed over it wins)."""
    from phoenix_keypoints.extract.families.wholebody.runner import onnxruntime_version

    return onnxruntime_version()


ENGINE = "The wholebody estimator (onnxruntime)"  # what runs on the CPU (the idle-cores warning)


def check_settings(settings: dict[str, Any]) -> None:
    """Refuse, before planning, a run without its two model files."""
    from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

    if "detector" not in settings or "pose_model" not in settings:
        raise ModelFileError("--estimator wholebody needs --detector DET.onnx and --pose-model "
                             "POSE.onnx (docs/wholebody.md says where rtmlib's published ones are).")


def check_recorded(settings: dict[str, Any]) -> None:
    """On resume: the model files are still the ones the run recorded."""
    from phoenix_keypoints.extract.families.wholebody.runner import check_record

    check_record(settings)


def model_problems(settings: dict[str, Any]) -> list[str]:
    """verify: each recorded model file changed or gone, as 'FLAG PATH: why'."""
    from phoenix_keypoints.extract.families.wholebody.runner import model_problems as problems

    return problems(settings)


def run_line(recorded: dict[str, Any]) -> str:
    """What `run` says of the models it uses: file names, input sizes, onnxruntime."""
    def one(key: str) -> str:
        m = recorded[key]
        return (f"{key.replace('_', ' ')} {m['path'].rsplit('/', 1)[-1]} "
                f"({m['input_size']['height']}x{m['input_size']['width']})")
    return f"{one('detector')}, {one('pose_model')}; onnxruntime {recorded['onnxruntime']}"


def status_line(settings: dict[str, Any]) -> str:
    """status: the estimator, its two model files and --det-every where not 1."""
    files = ", ".join([f"--{k.replace('_', '-')} {Path(settings[k]['path']).name}"
                       for k in ("detector", "pose_model") if k in settings]
                      + [f"--det-every {k}" for k in [settings.get("det_every", 1)] if k != 1])
    return f"estimator: {WHOLEBODY}" + (f" ({files})" if files else "")


def runs_on(settings: dict[str, Any], batch_size: int | None, device: str | None,
            gpu: bool) -> str:
    """The run's device and batches as its workers will decide them (--device auto: CUDA where
    onnxruntime has it and the worker a GPU), and each model's batch axis."""
    from phoenix_keypoints.extract.families.wholebody.runner import batch_axes, cuda_provider
    from phoenix_keypoints.extract.keypoints.estimator import runtime

    run = runtime(batch_size, device)
    gpu = run["device"] != "cpu" and cuda_provider() and gpu
    where = "CUDA, device 0 of each worker's GPU" if gpu else "the CPU"
    axes = batch_axes(settings["detector"]["path"], settings["pose_model"]["path"])
    every = settings.get("det_every", 1)
    mode = f"; a detection every {every} frames (rtmlib's PoseTracker)" if every != 1 else ""
    return (f", on {where} (--device {run['device']}); batches of {run['batch_size']} frames: "
            f"{axes}{mode}")


def cuda_provider() -> bool:
    from phoenix_keypoints.extract.families.wholebody.runner import cuda_provider as has_cuda

    return has_cuda()
