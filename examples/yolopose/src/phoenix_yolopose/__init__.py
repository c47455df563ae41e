"""yolopose: an example multi-person keypoint family for phoenix-keypoints, installed as a plugin.

A one-stage YOLO-pose style model from the user's ONNX file (`--yolo-model FILE.onnx`: input
[1, 3, H, W] RGB 0..1 letterboxed, output [1, 56, anchors]; 640 x 640 and 8400 anchors for the
usual export): a score threshold, NMS, COCO's 17 points for every person. Its `parts` hold the
signer (the largest box), its `people` list column everyone, so `.pose` holds every person
(docs/families.md, "How to write a multi-person family"). The family is the class `YoloPose`, a
subclass of `phoenix_keypoints.extract.families.Family` (the entry point in pyproject.toml names
it); every member it does not give keeps Family's default (moved model files, for one).
declaration.py, decode.py, model.py and runner.py are its data and code.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.families import Family
from phoenix_keypoints.extract.keypoints.estimator import Declaration, ModelFileError
from phoenix_yolopose.declaration import DECLARATION, NAME, NAMES, SCHEMA
from phoenix_yolopose.decode import IOU, MAX_PERSONS, SCORE
from phoenix_yolopose.model import FLAG, problems, record

__all__ = ["YoloPose"]


class YoloPose(Family):
    """Every person's COCO-17 points from the user's YOLO-pose ONNX model: the signer in the column
    `yolopose`, everyone in its people list."""

    # --- words the tool says of it ----------------------------------------------------------------
    ABOUT = "every person's COCO-17 points from your YOLO-pose ONNX model (an example plugin)"
    DOCS = "docs/families.md"  # the page its messages point to
    ENGINE = "The yolopose estimator (onnxruntime)"  # the idle-cores warning
    IMPORTS = "onnxruntime"  # what its workers need (said when they cannot start)
    LIBRARY = ("onnxruntime",)  # the distribution whose version each part records
    EXPORT_HELP = {"pose": ".pose files (every person)"}
    DEVICE_HELP = "yolopose: the CPU only"

    # --- the required hooks -----------------------------------------------------------------------
    def declaration(self, settings: dict[str, Any] | None = None) -> Declaration:
        """Every run's declaration (no setting changes the columns)."""
        return DECLARATION

    def declaration_of_schema(self, schema: Any) -> Declaration | None:
        return DECLARATION if schema.equals(SCHEMA) else None

    def open_estimator(self, settings: dict[str, Any], num_threads: int | None = 1) -> Any:
        """The estimator of a worker (the model loaded, checked again: it may have changed)."""
        from phoenix_yolopose.runner import YoloPoseEstimator

        return YoloPoseEstimator(settings, num_threads)

    def file_record(self, settings: dict[str, Any] | None, recorded: dict[str, Any]
                    ) -> dict[str, Any]:
        """What keypoints.parquet's metadata says of a yolopose file: the model, how persons were
        chosen, the points' layout."""
        own = {k: v for k, v in (settings or {}).items() if k != "estimator"}
        return {"estimator": NAME, NAME: own,
                "decode": {"score": SCORE, "iou": IOU, "max_persons": MAX_PERSONS,
                           "signer": "the largest box"},
                "layout": {NAME: {"points": len(NAMES), "values": ["x", "y", "score"],
                                  "names": list(NAMES)}}}

    # --- extract_keypoints ------------------------------------------------------------------------
    def clip_options(self) -> tuple[str, ...]:
        """extract_keypoints(..., estimator="yolopose", model=PATH)."""
        return ("model",)

    def clip_settings(self, options: dict[str, Any]) -> dict[str, Any]:
        """extract_keypoints' options as a run records them: the model file checked and
        recorded."""
        if options.get("model") is None:
            raise TypeError("estimator 'yolopose' needs model=PATH.onnx (a YOLO-pose model)")
        return {"estimator": NAME, "model": record(Path(options["model"]))}

    # --- its own flag of `run` and `slurm` --------------------------------------------------------
    def add_run_options(self, p: argparse._ActionsContainer) -> None:
        p.add_argument(FLAG, type=Path, metavar="FILE.onnx",
                       help="yolopose: the YOLO-pose ONNX model (input [1, 3, H, W], output "
                            "[1, 56, anchors])")

    def asked_settings(self, args: argparse.Namespace, estimator: str | None,
                       fetched: Any = None) -> dict[str, Any] | None:
        """The model --yolo-model names, checked and recorded (None: not given: a resume keeps the
        run's own)."""
        path = getattr(args, "yolo_model", None)
        return None if path is None else {"model": record(path)}

    def settings_conflicts(self, asked: dict[str, Any] | None, recorded: dict[str, Any]
                           ) -> list[str]:
        """A resume given another model file than the run's (other bytes: other points)."""
        had, now = (recorded.get("model") or {}), ((asked or {}).get("model") or {})
        if now and had and now["sha256"] != had["sha256"]:
            return [f"{FLAG} ({Path(had['path']).name} sha256 {had['sha256'][:12]} when planned, "
                    f"{Path(now['path']).name} sha256 {now['sha256'][:12]} asked)"]
        return []

    # --- what it checks itself --------------------------------------------------------------------
    def check_settings(self, settings: dict[str, Any]) -> None:
        """Before planning: a run needs its model."""
        if "model" not in settings:
            raise ModelFileError(f"--estimator {NAME} needs {FLAG} FILE.onnx (a YOLO-pose model: "
                                 f"input [1, 3, H, W], output [1, 56, anchors]; {self.DOCS}).")

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

    # --- what run and status say ------------------------------------------------------------------
    def run_line(self, recorded: dict[str, Any]) -> str:
        model = recorded["model"]
        h, w = model["input"]
        return f"model {Path(model['path']).name} ({h}x{w} input, sha256 {model['sha256'][:12]})"

    def status_line(self, settings: dict[str, Any]) -> str:
        return f"estimator: {NAME} ({FLAG} {Path(settings['model']['path']).name})"
