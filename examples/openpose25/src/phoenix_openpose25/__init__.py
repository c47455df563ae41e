"""openpose25: an example keypoint family for phoenix-keypoints, installed as a plugin.

OpenPose's BODY_25 points from the user's ONNX model (`--op25-model FILE.onnx`: input
[N, 3, H, W] RGB in 0..1, output [N, 25, 3]: x, y in the input's pixels, a score). The family is
the class `OpenPose25`, a subclass of `phoenix_keypoints.extract.families.Family`: the tool
imports this package only where a command names `openpose25` (the entry point in pyproject.toml
names the class), makes one instance, checks it against the contract and calls the methods below;
every member it does not give keeps Family's default (moved model files, for one, are followed
by `Family.moved_files`). docs/families.md explains each.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from phoenix_keypoints.extract.families import Family
from phoenix_keypoints.extract.keypoints.estimator import Declaration, ModelFileError
from phoenix_openpose25 import declaration as _declaration
from phoenix_openpose25.declaration import NAME, PARTS
from phoenix_openpose25.model import FLAG, problems, record

__all__ = ["OpenPose25"]


class OpenPose25(Family):
    """OpenPose BODY_25 points from the user's ONNX model, in one column `openpose25`."""

    # --- words the tool says of it --------------------------------------------------------------
    ABOUT = "OpenPose BODY_25 from your ONNX model (an example plugin)"  # --estimator's help
    DOCS = "docs/families.md"  # the page its messages point to
    ENGINE = "The openpose25 estimator (onnxruntime)"  # the idle-cores warning
    IMPORTS = "onnxruntime"  # what its workers need (said when they cannot start)
    LIBRARY = ("onnxruntime",)  # the distribution whose version each part records
    EXPORT_HELP = {"pose": ".pose files"}
    DEVICE_HELP = "openpose25: the CPU only"

    # --- the required methods -------------------------------------------------------------------
    def declaration(self, settings: dict[str, Any] | None = None) -> Declaration:
        """One declaration whatever the settings (declaration.py)."""
        return _declaration.declaration(settings)

    def declaration_of_schema(self, schema: Any) -> Declaration | None:
        return _declaration.declaration_of_schema(schema)

    def file_record(self, settings: dict[str, Any] | None, recorded: dict[str, Any]
                    ) -> dict[str, Any]:
        return _declaration.file_record(settings, recorded)

    def open_estimator(self, settings: dict[str, Any], num_threads: int | None = 1) -> Any:
        """The estimator of a worker (the model loaded, checked again: it may have changed)."""
        from phoenix_openpose25.runner import OpenPose25Estimator

        return OpenPose25Estimator(settings, num_threads)

    # --- extract_keypoints ----------------------------------------------------------------------
    def clip_options(self) -> tuple[str, ...]:
        """extract_keypoints(..., estimator="openpose25", model=PATH)."""
        return ("model",)

    def clip_settings(self, options: dict[str, Any]) -> dict[str, Any]:
        """extract_keypoints' options as a run records them: the model file checked and
        recorded."""
        if options.get("model") is None:
            raise TypeError("estimator 'openpose25' needs model=PATH.onnx (a BODY_25 model)")
        return {"estimator": NAME, "model": record(Path(options["model"]))}

    def clip_parts(self, parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A clip's arrays, with its named parts as slices of the column (kp["feet"])."""
        column = parts[NAME]
        return parts | {name: column[:, a:b] for name, (a, b) in PARTS.items()}

    # --- its own flag of `run` and `slurm` ------------------------------------------------------
    def add_run_options(self, parser: argparse._ActionsContainer) -> None:
        parser.add_argument(FLAG, type=Path, metavar="FILE.onnx",
                            help="openpose25: the BODY_25 ONNX model (input [N, 3, H, W], output "
                                 "[N, 25, 3])")

    def asked_settings(self, args: argparse.Namespace, estimator: str | None,
                       fetched: Any = None) -> dict[str, Any] | None:
        """The model --op25-model names, checked and recorded (None: not given: a resume keeps
        the run's own)."""
        path = getattr(args, "op25_model", None)
        return None if path is None else {"model": record(path)}

    def settings_conflicts(self, asked: dict[str, Any] | None, recorded: dict[str, Any]
                           ) -> list[str]:
        """A resume given another model file than the run's (other bytes: other points)."""
        had, now = (recorded.get("model") or {}), ((asked or {}).get("model") or {})
        if now and had and now["sha256"] != had["sha256"]:
            return [f"{FLAG} ({Path(had['path']).name} sha256 {had['sha256'][:12]} when planned, "
                    f"{Path(now['path']).name} sha256 {now['sha256'][:12]} asked)"]
        return []

    # --- what it checks itself ------------------------------------------------------------------
    def check_settings(self, settings: dict[str, Any]) -> None:
        """Before planning: a run needs its model."""
        if "model" not in settings:
            raise ModelFileError(f"--estimator {NAME} needs {FLAG} FILE.onnx (a BODY_25 model: "
                                 f"input [N, 3, H, W], output [N, 25, 3]; {self.DOCS}).")

    def check_recorded(self, settings: dict[str, Any]) -> None:
        """A resume: the model is still the file the run recorded."""
        said = problems(settings["model"])
        if said:
            raise ModelFileError(f"{'; '.join(said)}. Put it back, or start a new --out.")

    def model_problems(self, settings: dict[str, Any]) -> list[str]:
        """verify: the recorded model changed or gone ('FLAG PATH: why' each)."""
        return problems(settings["model"])

    def device_refused(self, device: str) -> str | None:
        return f"the {NAME} family runs its model on the CPU only" if device == "cuda" else None

    # --- what run and status say ----------------------------------------------------------------
    def run_line(self, recorded: dict[str, Any]) -> str:
        model = recorded["model"]
        h, w = model["input"]
        return f"model {Path(model['path']).name} ({h}x{w} input, sha256 {model['sha256'][:12]})"

    def status_line(self, settings: dict[str, Any]) -> str:
        return f"estimator: {NAME} ({FLAG} {Path(settings['model']['path']).name})"
