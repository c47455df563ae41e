"""What a family's ONNX model declares it outputs, checked against what the family runs, when the
model is loaded: before any frame, so a model of another layout is refused at `run`'s start
(exit 2, naming the file, the output, its shape and the one expected), not found in every
frame's answer once the first batch has run.

A family says what its model answers as one shape per output, in order: an int is that size, a
str (an axis's name: "N" for frames) or None takes any. The file's graph declares each output's
shape; a size it leaves open (a name) is not known until the model answers, so it passes here
and the family's check of each answer (its shape and values) still runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError, escaped
from phoenix_keypoints.extract.keypoints.onnx_files import advised

Shape = tuple[int | str | None, ...]


def shape_said(shape: Sequence[Any] | None) -> str:
    """A shape as a message writes it ([N, 25, 3]; an axis the file names by its name)."""
    if shape is None:
        return "of no declared shape"
    return "[" + ", ".join(escaped(str(d)) if d is not None else "?" for d in shape) + "]"


def declared_otherwise(declared: Sequence[Any] | None, expected: Shape) -> bool:
    """Whether a declared output shape cannot be `expected`: another rank, or a size the file
    fixes other than the one the family fixes (a shape the file leaves open: not known yet)."""
    if declared is None:
        return False
    return len(declared) != len(expected) or any(
        isinstance(d, int) and isinstance(e, int) and d != e
        for d, e in zip(declared, expected, strict=True))


def check_outputs(session: Any, expected: Sequence[Shape], flag: str, path: Path | str,
                  advice: str = "") -> None:
    """Refuse a loaded model (an onnxruntime session) whose graph declares other outputs than the
    family's model answers: another number of outputs, or an output of another shape. `advice`:
    the family's own words after the refusal (onnx_files.advised)."""
    outs = session.get_outputs()
    want = ", ".join(shape_said(e) for e in expected)
    if len(outs) != len(expected):
        said = ", ".join(f"'{escaped(o.name)}' {shape_said(o.shape)}" for o in outs[:3])
        more = ", ..." if len(outs) > 3 else ""
        raise ModelFileError(f"{flag} {path}: {len(outs)} outputs ({said}{more}); this family "
                             f"runs a model of {len(expected)} ({want}){advised(advice)}.")
    for i, (out, shape) in enumerate(zip(outs, expected, strict=True)):
        if declared_otherwise(out.shape, shape):
            raise ModelFileError(
                f"{flag} {path}: its output {i} ('{escaped(out.name)}') is declared "
                f"{shape_said(out.shape)}, not {shape_said(shape)} as this family's model "
                f"answers: refused before any frame{advised(advice)}.")
