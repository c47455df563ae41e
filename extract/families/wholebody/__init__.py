"""The whole-body family: top-down keypoints from the user's ONNX detector and pose model
(rtmlib's YOLOX + RTMPose or ViTPose): COCO-WholeBody 133 points in one column `wholebody`
(133 x (x, y, score), pixels) and `persons`; COCO 17, Halpe 26 and hand 21 in a column each (a
hand run with a detector: the signer's two hands a column each, and every hand: persons.py).

This package is everything the tool knows of the family: its declaration and hooks here, its
runner (runner.py: the models), the heads' decoders (heads.py), the point sets (layouts.py), its
outputs (outputs.py: tensors, .pose, TwoStream-SLR and Uni-Sign pkls); its report and drawing are
read from its declaration (extract/inspect/plain.py, declared.py). The registry
(extract.keypoints.estimator) imports it only when a run, file or clip names it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.families.wholebody.declaration import (
    WHOLEBODY,
    declaration_for,
    declaration_of,
    file_record,
    layout_of,
    schema_of,
)
from phoenix_keypoints.extract.families.wholebody.layouts import (
    HANDS_LAYOUT,
    LAYOUTS,
    WHOLEBODY_LAYOUT,
    layout_of_column,
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
from phoenix_keypoints.extract.families.wholebody.rtmdet import KIND_NAMES, kind_words
from phoenix_keypoints.extract.keypoints.contract import Family
from phoenix_keypoints.extract.keypoints.estimator import Declaration, Estimator

__all__ = ["ABOUT", "DOCS", "add_run_options", "asked_settings", "file_record", "moved_files",
           "settings_conflicts", "settings_of"]


def declaration(settings: dict[str, Any] | None = None) -> Declaration:
    """The declaration of a run's settings: its point layout's (COCO-WholeBody by default)."""
    return declaration_of(settings)


def variants() -> tuple[Declaration, ...]:
    """The declarations of the other point sets (each its own columns: show, report, diff)."""
    return tuple(declaration_for(lay) for lay in (*LAYOUTS.values(), HANDS_LAYOUT)
                 if lay is not WHOLEBODY_LAYOUT)


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    layout = layout_of_column(schema.names)
    return declaration_for(layout) if layout and schema.equals(schema_of(layout)) else None


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> Estimator:
    from phoenix_keypoints.extract.families.wholebody.runner import WholebodyEstimator

    return WholebodyEstimator(settings)


def clip_settings(options: dict[str, Any]) -> dict[str, Any]:
    """extract_keypoints' options (detector=, pose_model= paths, point_set=, decoder=,
    detector_kind=, det_every=K, max_persons=N) as a run records them; the model files are
    checked as `run` checks them."""
    if options.get("pose_model") is None:
        missing = [k for k in ("detector", "pose_model") if options.get(k) is None]
        raise TypeError(f"estimator 'wholebody' needs {' and '.join(f'{k}=PATH.onnx' for k in missing)}"
                        " (docs/wholebody.md says where rtmlib's published models are; without a "
                        "detector the pose model takes the whole frame)")
    det = options.get("detector")
    from phoenix_keypoints.extract.families.wholebody.runner import record

    every = options.get("det_every")
    if every is not None and (not isinstance(every, int) or isinstance(every, bool) or every < 1):
        raise ValueError(f"det_every={every!r}: give a whole number of frames, 1 or more (1: "
                         "detect on every frame)")
    if every not in (None, 1) and det is None:
        raise ValueError(f"det_every={every}: tracking follows the detector's boxes; give detector=")
    cap = options.get("max_persons")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise ValueError(f"max_persons={cap!r}: give a whole number of boxes, 1 or more (the most "
                         "posed a frame, the largest first)")
    kind = options.get("detector_kind")
    if kind is not None and (kind not in KIND_NAMES or det is None):
        raise ValueError(f"detector_kind={kind!r}: says how detector= is read, one of "
                         f"{', '.join(KIND_NAMES)}; give it with detector=")
    return {"estimator": WHOLEBODY, **record(Path(det) if det is not None else None,
                                             Path(options["pose_model"]),
                                             options.get("point_set"), options.get("decoder"),
                                             options.get("detector_kind")),
            **({"det_every": every} if every is not None else {}),
            **({"max_persons": cap} if cap is not None else {})}


def clip_options() -> tuple[str, ...]:
    """The options extract_keypoints takes for this family: the two model files, --det-every,
    --max-persons, and where the model leaves them open the point set (--point-set), heatmap
    decoder (--decoder) and how the detector is read (--detector-kind)."""
    return ("detector", "pose_model", "det_every", "max_persons", "point_set", "decoder",
            "detector_kind")


def clip_parts(parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A clip's arrays with the named parts as slices of its layout's points (extract_keypoints);
    a hand run's every hand as [T, hands, 21, 3] (NaN past a frame's hands), their boxes
    [T, hands, 5]."""
    layout = layout_of_column(tuple(parts))
    points = np.concatenate([parts[c] for c in layout.columns], axis=1)
    out = parts | {name: points[:, a:b] for name, (a, b) in layout.parts.items()}
    for name, width in layout.lists[:1]:  # every person's points; the boxes stay [T, n, 5]
        out[name] = parts[name].reshape(len(points), -1, layout.points, width // layout.points)
    return out


def pose_of_clip(parts: dict[str, np.ndarray], width: int, height: int, fps: float) -> Any:
    """Keypoints.to_pose(): the .pose `export --format pose` writes for the same frames
    (pose-format's COCO-WholeBody header for 133 points, else one made from the declaration)."""
    from phoenix_keypoints.extract.families.wholebody.outputs import pose_of_values

    layout = layout_of_column(tuple(parts))
    values = np.concatenate([parts[c] for c in layout.columns], axis=1)
    if layout is HANDS_LAYOUT:  # pose-format's two hand components
        from phoenix_keypoints.extract.families.wholebody.outputs import hands_pose

        return hands_pose(declaration_for(layout), np.nan_to_num(values),
                          ~np.isnan(values).all(axis=2), width, height, fps)
    if layout is not WHOLEBODY_LAYOUT:
        from phoenix_keypoints.extract.outputs.export import declared_pose

        return declared_pose(declaration_for(layout), np.nan_to_num(values),
                             ~np.isnan(values).all(axis=2), width, height, fps)
    return pose_of_values(np.nan_to_num(values), ~np.isnan(values).all(axis=(1, 2)), width, height,
                          fps)


def write_pose_files(keypoints: Path, out_dir: Path, fps: float, root: Path | None) -> int:
    import pyarrow.parquet as pq

    layout = layout_of_column(pq.read_schema(keypoints).names)
    if layout is not WHOLEBODY_LAYOUT:  # the declaration's values and header (the two hands:
        # pose-format's own two hand components)
        from phoenix_keypoints.extract.families.wholebody.outputs import hands_pose
        from phoenix_keypoints.extract.outputs.export import declared_pose, write_declared_pose_files

        return write_declared_pose_files(keypoints, out_dir, declaration_for(layout), fps, root,
                                         hands_pose if layout is HANDS_LAYOUT else declared_pose)
    from phoenix_keypoints.extract.families.wholebody.outputs import write_pose_files

    return write_pose_files(keypoints, out_dir, fps, root)


def _twostream(keypoints: Path, to: Path, flat: bool = False) -> str:
    from phoenix_keypoints.extract.families.wholebody.outputs import write_twostream_pkl
    from phoenix_keypoints.extract.outputs.tensors import TensorsError

    if flat:
        raise TensorsError("--flat applies to --format unisign-pkl (a file per video); "
                           "--format twostream-pkl writes one .pkl file.")
    return f"twostream-pkl: {to} ({write_twostream_pkl(keypoints, to)} videos)"


def _unisign(keypoints: Path, to: Path, flat: bool = False) -> str:
    from phoenix_keypoints.extract.families.wholebody.outputs import write_unisign_pkls

    return f"unisign-pkl: {to}/ ({write_unisign_pkls(keypoints, to, flat)} videos)"


# the exports this family writes itself (export --format), each giving the line it prints
EXPORTS = {"twostream-pkl": _twostream, "unisign-pkl": _unisign}
ONE_FILE_EXPORTS = ("twostream-pkl",)  # those whose --to is the file (the others: a folder)


# --- what the job asks of a family before and after it runs -------------------------------------
# the library its values depend on (either distribution provides the module), recorded in each part
LIBRARY = ("onnxruntime", "onnxruntime-gpu")


def library_version() -> str:
    """onnxruntime's version as the imported module says (onnxruntime-gpu installed over it wins)."""
    from phoenix_keypoints.extract.families.wholebody.runner import onnxruntime_version

    return onnxruntime_version()


ENGINE = "The wholebody estimator (onnxruntime)"  # what runs on the CPU (the idle-cores warning)
IMPORTS = "onnxruntime"  # the module a worker needs to start (the advice when workers cannot)
# `export --help`'s words for each format it exports (jobs/cli.py)
EXPORT_HELP = {"pose": ".pose files", "twostream-pkl": "TwoStream-SLR's keypoint_file",
               "unisign-pkl": "Uni-Sign's pose folder"}


def check_settings(settings: dict[str, Any]) -> None:
    """Refuse, before planning, a run without a pose model, or tracking without a detector."""
    from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

    if "pose_model" not in settings:
        raise ModelFileError("--estimator wholebody needs --pose-model POSE.onnx, and --detector "
                             "DET.onnx unless the pose model takes the whole frame "
                             "(docs/wholebody.md says where rtmlib's published ones are).")
    if settings.get("det_every", 1) != 1 and "detector" not in settings:
        raise ModelFileError("--det-every follows the detector's boxes from frame to frame: give "
                             "--detector DET.onnx with it.")


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
                f"({m['input_size']['height']}x{m['input_size']['width']}){kind_words(m)}")
    det = one("detector") if "detector" in recorded else "no detector (the whole frame)"
    return f"{det}, {one('pose_model')}; onnxruntime {recorded['onnxruntime']}"


def status_line(settings: dict[str, Any]) -> str:
    """status: the estimator, its two model files, --det-every and --max-persons where not the
    defaults, its head and point set."""
    files = ", ".join([f"--{k.replace('_', '-')} {Path(settings[k]['path']).name}"
                       f"{kind_words(settings[k])}" for k in ("detector", "pose_model") if k in settings]
                      + [f"--det-every {k}" for k in [settings.get("det_every", 1)] if k != 1]
                      + [f"--max-persons {n}" for n in [settings.get("max_persons")] if n])
    return f"estimator: {WHOLEBODY}" + (f" ({files})" if files else "") + head_words(settings)


def head_words(settings: dict[str, Any]) -> str:
    """'; <the head and its decoder>; points: <layout> (--point-set NAME)' of recorded settings (a
    record without them: rtmlib's SimCC 133; '' for a family built on this one, its own head)."""
    from phoenix_keypoints.extract.families.wholebody.heads import head_said

    head = settings.get("head")
    if head is not None and not isinstance(head, dict):
        return ""
    said = head_said(head) if head else "SimCC head decoded as rtmlib's RTMPose"
    layout = layout_of(settings)
    return f"; pose model: {said}; points: {layout.title} (--point-set {layout.name})"


def on_gpu(device: str | None, gpu: bool) -> bool:
    """Whether its workers will run the models on their GPU (--device auto or cuda, a worker
    with a GPU, onnxruntime with CUDA), as the workers decide it: the idle-cores warning and
    runs_on read it."""
    from phoenix_keypoints.extract.families.wholebody.runner import cuda_provider

    return (device or "auto") != "cpu" and gpu and bool(cuda_provider())


def runs_on(settings: dict[str, Any], batch_size: int | None, device: str | None,
            gpu: bool) -> str:
    """The run's device and batches as its workers will decide them (--device auto: CUDA where
    onnxruntime has it and the worker a GPU), and each model's batch axis."""
    from phoenix_keypoints.extract.families.wholebody.runner import batch_axes
    from phoenix_keypoints.extract.keypoints.estimator import runtime

    run = runtime(batch_size, device)
    cuda = on_gpu(device, gpu)
    where = "CUDA, device 0 of each worker's GPU" if cuda else "the CPU"
    fixed = f" (every call padded to {run['batch_size']}: fixed shapes)" if cuda else ""
    axes = batch_axes((settings.get("detector") or {}).get("path"), settings["pose_model"]["path"])
    every = settings.get("det_every", 1)
    mode = f"; a detection every {every} frames (rtmlib's PoseTracker)" if every != 1 else ""
    return (f", on {where} (--device {run['device']}); batches of {run['batch_size']} frames"
            f"{fixed}: {axes}{mode}{head_words(settings)}")


def gpu_memory_need(settings: dict[str, Any], batch_size: int) -> int:
    """Bytes of GPU memory one worker takes at this batch size, estimated from its recorded
    model files (gpu_memory.py): the coordinator checks workers x this against each card."""
    from phoenix_keypoints.extract.families.wholebody.gpu_memory import worker_need

    return worker_need(settings, batch_size)


# `run --help`'s words for --device (jobs/cli.py reads a batching family's)
DEVICE_HELP = ("where onnxruntime runs (default auto: CUDA where onnxruntime-gpu is installed and "
               "the worker has a GPU, else CPU)")


def device_refused(device: str) -> str | None:
    """Why --device cannot run in this Python (None: it can): cuda needs onnxruntime's CUDA
    provider (jobs/runner.py refuses before any worker starts, and checks the GPUs itself)."""
    from phoenix_keypoints.extract.families.wholebody.runner import cuda_provider

    if device == "cuda" and not cuda_provider():
        return ("this onnxruntime has no CUDAExecutionProvider. Install the GPU build in one "
                "command: python scripts/gpu_install.py (the 'phoenix-keypoints[gpu]' extra's "
                "onnxruntime-gpu in place of onnxruntime, online or from a wheelhouse: "
                "docs/gpu.md), or pass --device cpu.")
    return None


class WholeBody(Family):
    """The whole-body family as the registry knows it: this module's functions and constants,
    each the member of Family of its name (the rest are Family's defaults)."""

    declaration = staticmethod(declaration)
    declaration_of_schema = staticmethod(declaration_of_schema)
    open_estimator = staticmethod(open_estimator)
    file_record = staticmethod(file_record)
    clip_options = staticmethod(clip_options)
    clip_settings = staticmethod(clip_settings)
    clip_parts = staticmethod(clip_parts)
    pose_of_clip = staticmethod(pose_of_clip)
    variants = staticmethod(variants)
    write_pose_files = staticmethod(write_pose_files)
    EXPORTS = EXPORTS
    EXPORT_HELP = EXPORT_HELP
    ONE_FILE_EXPORTS = ONE_FILE_EXPORTS
    add_run_options = staticmethod(add_run_options)
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
