"""The user's model file: untrusted input, and this family's to check (the tool checks no file
it does not know), as examples/openpose25 checks its own. Before onnxruntime opens it: a regular
file, its external data inside its folder, its bytes hashed, its graph free of data-driven
loops; its load and each call bounded in time and memory (extract/keypoints/model_calls.py).
Once open: one image input [1, 3, H, W] with H and W fixed multiples of 32 (a batch-1 export, as
YOLO-pose models are usually exported), one output declared [1, 56, anchors] (the tool's check,
extract/keypoints/model_outputs.py: another shape is refused before any frame). Recorded in
run.json (path, sha256, size, external data, input size): a resume and `verify` find a changed
or missing file, and a moved one is followed (the tool's default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.model_calls import bounded_load
from phoenix_keypoints.extract.keypoints.model_outputs import check_outputs
from phoenix_keypoints.extract.keypoints.onnx_files import (
    check_model_file,
    external_problems,
    external_record,
    sha256_of,
)
from phoenix_keypoints.extract.keypoints.onnx_graph import check_graph
from phoenix_yolopose.decode import CHANNELS, anchors

FLAG = "--yolo-model"
MAX_SIDE = 1280  # YOLO-pose exports take 640 (or 1280) a side: a larger input is refused
MAX_BYTES = 512 * 2**20  # the largest YOLO-pose (x) is about 240 MB
# this family's words after the tool's model-file refusals
ADVICE = ("this family runs a YOLO-pose style model exported to ONNX at batch 1: input "
          "[1, 3, H, W] RGB 0..1 letterboxed, output [1, 56, anchors]")


def record(path: Path | str) -> dict[str, Any]:
    """The model as a run records it; a ModelFileError (exit 2) naming the file and what is
    wrong where it cannot be this family's model."""
    path = Path(path).absolute()
    check_model_file(path, FLAG, ADVICE)
    sha, size = sha256_of(path, FLAG)
    if size > MAX_BYTES:
        raise ModelFileError(f"{FLAG} {path}: {size:,} bytes, more than any YOLO-pose model "
                             f"({MAX_BYTES:,}); pass the model's .onnx file.")
    rec = {"path": str(path), "sha256": sha, "size": size,
           "external": external_record(path, FLAG, ADVICE)}
    return {**rec, "input": list(input_size(session(rec), path))}


def session(rec: dict[str, Any], num_threads: int | None = 1) -> Any:
    """An onnxruntime session of the recorded model, on the CPU, after checking the file is
    still the one recorded (another file at that path is refused, never run)."""
    import onnxruntime as ort

    path = Path(rec["path"])
    check_model_file(path, FLAG, ADVICE)
    check_graph(path, FLAG, ADVICE)
    if sha256_of(path, FLAG) != (rec["sha256"], rec["size"]):
        raise ModelFileError(f"{FLAG} {path}: not the file this run was made with (sha256 "
                             f"{rec['sha256']}). Put it back, or start a new --out.")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = num_threads or 0
    opts.inter_op_num_threads = 1
    try:
        return bounded_load(lambda: ort.InferenceSession(str(path), opts,
                                                         providers=["CPUExecutionProvider"]),
                            FLAG, path, int(rec["size"]), ADVICE)
    except Exception as e:  # noqa: BLE001 (onnxruntime's own errors: the file is at fault)
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise ModelFileError(f"{FLAG} {path}: onnxruntime cannot load it ({first!r}); pass an "
                             "ONNX model of the layout examples/yolopose/README.md says.") from None


def input_size(sess: Any, path: Path | str) -> tuple[int, int]:
    """(height, width) of the model's one image input [1, 3, H, W]: fixed multiples of 32 and
    bounded; its one output declared [1, 56, anchors] (another layout refused before any frame)."""
    ins = sess.get_inputs()
    if len(ins) != 1:
        raise ModelFileError(f"{FLAG} {path}: {len(ins)} inputs; this family runs a model of one "
                             "image input [1, 3, H, W].")
    shape = ins[0].shape
    if len(shape) != 4 or shape[1] != 3 or not all(isinstance(s, int) for s in shape[2:]):
        raise ModelFileError(f"{FLAG} {path}: input {shape!r}; this family runs a model of "
                             "input [1, 3, H, W] with H and W fixed.")
    h, w = shape[2], shape[3]
    if not (32 <= h <= MAX_SIDE and 32 <= w <= MAX_SIDE and h % 32 == 0 and w % 32 == 0):
        raise ModelFileError(f"{FLAG} {path}: input {h}x{w}; a YOLO-pose input is a multiple "
                             f"of 32 a side, at most {MAX_SIDE}.")
    check_outputs(sess, [("N", CHANNELS, anchors(h, w))], FLAG, path, ADVICE)
    return h, w


def problems(rec: dict[str, Any]) -> list[str]:
    """What differs between the recorded model and the file at its path now ('FLAG PATH: why'
    each: `verify` and a resume say them)."""
    path = Path(rec["path"])
    try:
        now = sha256_of(path, FLAG)
    except (ModelFileError, OSError) as e:
        return [str(e) if str(e).startswith(FLAG) else f"{FLAG} {path}: {e}"]
    out = [] if now == (rec["sha256"], rec["size"]) else [
        f"{FLAG} {path}: not the file this run was made with (sha256 {rec['sha256']})"]
    return out + external_problems(path, rec.get("external", []), FLAG)


def answer_problem(out: Any, count: int) -> str:
    """Why an answer cannot be one frame's [1, 56, count] ("" when it can)."""
    if not isinstance(out, np.ndarray) or out.shape != (1, CHANNELS, count):
        return (f"the model answered {getattr(out, 'shape', type(out).__name__)}, not "
                f"(1, {CHANNELS}, {count})")
    if not np.isfinite(out).all():
        return "the model answered values that are not finite"
    return ""
