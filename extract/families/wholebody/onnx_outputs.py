"""What a whole-body model answers, checked: its layout once before any frame, its numbers on every
frame, its failures named as the model's.

- Layout: a detector must answer boxes (YOLOX with NMS inside: `[1, N, 5]`; raw: one row per grid
  cell of its input, `[1, cells, 5 + classes]`), a pose model two SimCC vectors of the 133 points
  (`[1, 133, 2w]`, `[1, 133, 2h]`). Checked on the declared shapes, then on one call with a grey
  input (shapes a file leaves open). A model passed as the other is named as what it is.
- Per frame: boxes and scores that are NaN, infinite or absurd (a box coordinate farther than
  ABSURD frame sizes from the frame, a score beyond +-MAX_SCORE) and SimCC vectors that are not
  finite (or beyond +-MAX_SCORE) give the frame a named status (`bad_detector_output`,
  `bad_pose_output`) and no keypoints, never `ok` and never a True mask. Valid frames are not
  touched: the checks read the outputs, they change nothing.
- A session call that raises (onnxruntime's Fail: an output too large to allocate, a kernel
  error) is the model's fault, not the frame's: ModelRunError names the file (the run exits 2);
  on a GPU, out of memory is said as memory instead (extract/keypoints/out_of_memory.py).
- Every session call runs bounded in time and memory (extract/keypoints/model_calls.py): past
  either, ModelLimitError names the file and the limit (exit 2).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.model_calls import bounded, run_options
from phoenix_keypoints.extract.keypoints.out_of_memory import GpuMemoryError, gpu_memory_refusal

STATUS_BAD_DETECTOR = "bad_detector_output"
STATUS_BAD_POSE = "bad_pose_output"
ABSURD = 16  # frame sizes away from the frame: no detector that saw the frame answers that
MAX_SCORE = 1e6  # no score or SimCC bin of a sane model comes near it
# this family's words after the shared model-file helpers' refusals (their `advice`)
MODEL_ADVICE = "docs/wholebody.md says where rtmlib's published models are; unzip its downloads first"


class ModelRunError(ModelFileError):
    """onnxruntime failed running a model on frames: the file is at fault (exit 2)."""


@dataclass(frozen=True)
class BadOutput:
    """A frame whose model outputs are refused: its status and what was wrong."""

    status: str
    note: str

    def as_result(self) -> dict[str, Any]:
        return {"status": self.status, "note": self.note}


def run_model(call: Callable[[], list[np.ndarray]], flag: str, path: Path, inputs: int = 1,
              then: Callable[[list[np.ndarray]], Any] | None = None, frames: int | None = None
              ) -> Any:
    """A session call on `inputs` inputs (frames or crops), bounded in time and memory (its
    session.run takes quiet_run_options(), which its watchdog may stop), with `then` (what the
    tool computes on the answer: a grid's decode and NMS) inside the same bounds; `frames`: the
    frames the call serves, which set its memory limit (model_calls.bounded). Whatever
    onnxruntime raises becomes ModelRunError naming the file."""
    def whole() -> Any:
        outs = call()
        return outs if then is None else then(outs)

    try:
        return bounded(whole, flag, path, inputs, frames, MODEL_ADVICE)
    except ModelFileError:  # past a limit: said as such
        raise
    except Exception as e:  # onnxruntime's own classes (Fail, RuntimeException, ...)
        if why := gpu_memory_refusal(e, flag, path, inputs):  # a GPU's memory, not the file
            raise GpuMemoryError(escaped(why)) from None
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        raise ModelRunError(
            f"{flag} {path}: onnxruntime failed running this model ({type(e).__name__}: "
            f"{escaped(first)}). The model file is at fault, not the frames: check it loads and "
            "runs in onnxruntime alone, or pass another file.") from None


def escaped(text: str) -> str:
    """Text from a model (names, onnxruntime's words about them) with control characters as \\xNN,
    so a name holding ESC cannot steer the terminal it is printed on."""
    return "".join(c if c.isprintable() or c == " " else f"\\x{ord(c):02x}" if ord(c) < 256
                   else f"\\u{ord(c):04x}" for c in text)


T = TypeVar("T")
_COLOUR = re.compile(r"^\x1b\[[0-9;]*m|\x1b\[m$")  # onnxruntime's own colours around a line


def quiet_run_options() -> Any:
    """Run options under which onnxruntime prints nothing while running: a failure comes back
    as an exception, which run_model names and escapes. Inside run_model: those of its bounded
    call, which the call's watchdog stops past a limit."""
    return run_options()


def captured(call: Callable[[], T]) -> T:
    """call() with what onnxruntime writes to stderr meanwhile (its warnings while loading a
    model quote the model's names) caught and written again escaped, one line each."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr: nothing to print either
        return call()
    with tempfile.TemporaryFile() as said:
        try:
            os.dup2(said.fileno(), 2)
            return call()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            said.seek(0)
            text = said.read(1 << 16).decode("utf-8", "replace")
            for line in text.splitlines():
                if line.strip():
                    sys.stderr.write(escaped(_COLOUR.sub("", line)) + "\n")


# --- layout -----------------------------------------------------------------------------------
def _shapes(session: Any) -> list[list[Any]]:
    return [list(o.shape) for o in session.get_outputs()]


def _grid_cells(hw: tuple[int, int]) -> int:
    return sum((hw[0] // s) * (hw[1] // s) for s in (8, 16, 32))


def looks_like_pose(shapes: list[list[Any]], points: int) -> bool:
    return len(shapes) == 2 and all(len(s) == 3 and s[1] == points for s in shapes)


def looks_like_detector(shapes: list[list[Any]]) -> bool:
    """A YOLOX's outputs: boxes [1, N, 5 + classes], and with NMS inside perhaps its labels
    [1, N]; no more."""
    first = shapes[0] if shapes else []
    return len(first) == 3 and isinstance(first[2], int) and first[2] >= 5 \
        and (len(shapes) == 1 or (len(shapes) == 2 and len(shapes[1]) == 2))


SHOWN = 3  # output shapes a message quotes of a model with more


def outputs_said(shapes: list[list[Any]]) -> str:
    """A model's outputs in words: their shapes, the first SHOWN of a model with more."""
    if len(shapes) <= SHOWN:
        return f"outputs {shapes}"
    return f"{len(shapes):,} outputs ({', '.join(map(str, shapes[:SHOWN]))}, ...)"


def what_it_is(shapes: list[list[Any]], points: int) -> str:
    """A model's layout in words, from its output shapes."""
    if looks_like_pose(shapes, points):
        return f"a SimCC pose model (outputs {shapes[0]} and {shapes[1]}), not a person detector"
    if looks_like_detector(shapes):
        kind = "with NMS inside" if shapes[0][2] == 5 else "without NMS (raw grid)"
        return f"a YOLOX person detector {kind} (output {shapes[0]}), not a pose model"
    return f"a model with {outputs_said(shapes)}"


def check_detector(session: Any, hw: tuple[int, int], flag: str, path: Path, points: int) -> str:
    """'end2end' or 'raw': the detector's layout, refused unless it answers boxes."""
    shapes = _shapes(session)
    first = shapes[0] if shapes else []
    last = first[2] if len(first) == 3 else None
    rows = first[1] if len(first) == 3 else None
    if not looks_like_detector(shapes) or last is None or not isinstance(last, int) or last < 5:
        raise ModelFileError(f"{flag} {path}: {escaped(what_it_is(shapes, points))}. A YOLOX person "
                             "detector answers [1, N, 5] (NMS inside) or [1, cells, 5 + classes]; "
                             "pass the pose model as --pose-model and a detector as --detector.")
    if last == 5:
        return "end2end"
    cells = _grid_cells(hw)
    if isinstance(rows, int) and rows != cells:
        raise ModelFileError(f"{flag} {path}: its output {first} has {rows} rows; a raw YOLOX of "
                             f"input {hw[0]}x{hw[1]} answers one per grid cell ({cells}). "
                             "Pass a YOLOX person detector.")
    return "raw"


def check_pose(session: Any, wh: tuple[int, int], flag: str, path: Path, points: int) -> None:
    """Refuse a pose model unless it answers the two SimCC vectors of `points` points."""
    shapes = _shapes(session)
    want = [2 * wh[0], 2 * wh[1]]
    fits = looks_like_pose(shapes, points) and all(
        not isinstance(s[2], int) or s[2] == n for s, n in zip(shapes, want, strict=True))
    if not fits:
        raise ModelFileError(f"{flag} {path}: {escaped(what_it_is(shapes, points))}. Expected two "
                             f"SimCC outputs [1, {points}, {want[0]}] and [1, {points}, {want[1]}] "
                             "for its input (a COCO-WholeBody RTMPose, RTMW or DWPose); pass a "
                             "detector as --detector.")


def check_answer(outs: list[np.ndarray], want: list[tuple[int | None, ...]], flag: str,
                 path: Path) -> None:
    """Refuse a model whose answer to one grey input has other shapes than its layout (None: any)."""
    got = [tuple(o.shape) for o in outs[:len(want)]]
    ok = len(got) == len(want) and all(
        len(g) == len(w) and all(b is None or a == b for a, b in zip(g, w, strict=True))
        for g, w in zip(got, want, strict=True))
    if not ok:
        raise ModelFileError(f"{flag} {path}: answered {got} to one input, expected "
                             f"{[tuple('N' if d is None else d for d in w) for w in want]}. "
                             "Pass a model of the expected layout.")


# --- per frame --------------------------------------------------------------------------------
def _describe(values: np.ndarray) -> str:
    bad = values[~np.isfinite(values)] if not np.isfinite(values).all() else values
    return f"{bad.flat[0]:g}" if bad.size else "nothing"


def detector_problem(out: np.ndarray, boxes: np.ndarray, frame_hw: tuple[int, ...]) -> str:
    """Why one frame's detector answer is nonsense ("" when it is not): a non-finite number, a
    score beyond MAX_SCORE, a kept box farther than ABSURD frame sizes from the frame."""
    if not np.isfinite(out).all():
        return f"the detector answered {_describe(out)} (not a finite number)"
    scores = out[..., 4:]
    if scores.size and np.abs(scores).max() > MAX_SCORE:
        return f"the detector answered a score of {scores.flat[np.abs(scores).argmax()]:g}"
    if len(boxes):
        if not np.isfinite(boxes).all():
            return f"a box decoded to {_describe(boxes)} (not a finite number)"
        reach = ABSURD * max(frame_hw[:2])
        if np.abs(boxes).max() > reach:
            return (f"a box at {boxes.flat[np.abs(boxes).argmax()]:g} px, far outside the "
                    f"{frame_hw[1]}x{frame_hw[0]} frame")
    return ""


def values_problem(named: Iterable[tuple[str, np.ndarray]], limit: float = MAX_SCORE) -> str:
    """Why a crop's pose outputs are nonsense ("" when they are not): the first of `named` (what
    it is and its verb, "SimCC x vector holds") holding a non-finite number or one beyond limit."""
    for what, v in named:
        if not np.isfinite(v).all():
            return f"the pose model's {what} {_describe(v)} (not a finite number)"
        if v.size and np.abs(v).max() > limit:
            return f"the pose model's {what} {v.flat[np.abs(v).argmax()]:g}"
    return ""


def pose_problem(sx: np.ndarray, sy: np.ndarray) -> str:
    """Why one frame's SimCC vectors are nonsense ("" when they are not)."""
    return values_problem([("SimCC x vector holds", sx), ("SimCC y vector holds", sy)])
