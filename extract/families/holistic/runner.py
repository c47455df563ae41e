"""MediaPipe Holistic for batch work: one graph per process, threads capped, reset between videos.

Facts this module is built on (../shared/docs/mediapipe-notes.md):
- mediapipe 0.10.21's wheel ships only the model_complexity=1 pose model; 0 and 2 would be
  downloaded at graph construction, which fails offline and races between workers.
- The graph's scheduler starts one thread per core of the machine whatever the affinity; its
  CalculatorGraphConfig has a `num_threads` field that caps it.
- Tracking state carries from one `process` call to the next: a new video needs `reset()`, which
  restarts the graph run and gives the same numbers as a fresh graph.
- A graph must be built in the process that uses it (never inherited through fork) and closed.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from phoenix_keypoints.extract.families.holistic.declaration import HOLISTIC, declaration
from phoenix_keypoints.extract.families.holistic.points import layout
from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

LAYOUT = layout()

_POSE_MODELS = {0: "pose_landmark_lite.tflite", 1: "pose_landmark_full.tflite",
                2: "pose_landmark_heavy.tflite"}
_GRAPH = "mediapipe/modules/holistic_landmark/holistic_landmark_cpu.binarypb"


class ModelError(ModelFileError):
    """The requested Holistic options cannot run offline here; the message says what to do (a
    refusal like any family's model that cannot be used: exit 2)."""


@dataclass(frozen=True)
class HolisticOptions:
    """The options that decide the numbers; recorded in run.json and part metadata."""

    model_complexity: int = 1
    smooth_landmarks: bool = True
    refine_face_landmarks: bool = False  # the attention face model: 478 face points, not 468
    static_image_mode: bool = False  # detect on every frame; Extractor still resets per video
    min_detection_confidence: float = 0.5
    min_tracking_confidence: float = 0.5

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> HolisticOptions:
        """A recorded options dict; keys an older run.json lacks take the value that run used."""
        return cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})

    @property
    def layout(self) -> dict[str, tuple[int, int]]:
        """part -> (points, values per point) these options make."""
        return layout(self.refine_face_landmarks)


def _mediapipe_spec() -> importlib.machinery.ModuleSpec | None:
    spec = importlib.util.find_spec("mediapipe")
    return spec if spec is not None and spec.submodule_search_locations else None


def _others() -> str:
    """', or use ...': the families this Python can run instead (the registry's, none of which
    needs mediapipe), as `--estimator NAME`."""
    from phoenix_keypoints.extract.keypoints.estimator import loaded

    ok = [n for n, fam in loaded() if n != HOLISTIC and fam.unavailable()
          is None]
    need = "needs" if len(ok) == 1 else "need"
    return f", or use {' or '.join(f'--estimator {n}' for n in ok)}, which {need} no mediapipe" \
        if ok else ""


def holistic_available() -> str | None:
    """None where Holistic can run in this Python; else why not and what to do.

    Asked before any worker starts, so that a Python without mediapipe (3.13: mediapipe 0.10.21,
    the last release with Holistic, has wheels for 3.10-3.12 only) is refused in one line rather
    than by workers failing to start. Found without importing mediapipe (an import takes seconds).
    """
    if _mediapipe_spec() is not None:
        return None
    here = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    if sys.version_info >= (3, 13):
        return (f"the holistic estimator needs mediapipe 0.10.21 (the last release with Holistic), "
                f"which has wheels for Python 3.10-3.12 only; this is {here}. Run it from a Python "
                f"3.10-3.12 environment (./scripts/setup.sh makes one){_others()}.")
    return (f"the holistic estimator needs mediapipe 0.10.21, which is not installed in this {here}: "
            "run ./scripts/setup.sh, or pip install -c constraints.txt -e . in your environment.")


def _mediapipe_root() -> str:
    """Where the mediapipe package lies, found without importing it (an import takes seconds)."""
    spec = _mediapipe_spec()
    if spec is None:
        raise ModelError(holistic_available() or "mediapipe is not installed")
    return os.path.dirname(list(spec.submodule_search_locations or [])[0])


def check_model(options: HolisticOptions) -> None:
    """Refuse, before any graph is built, a model that would have to be downloaded."""
    if options.model_complexity not in _POSE_MODELS:
        raise ModelError(f"--model-complexity must be 0, 1 or 2, not {options.model_complexity}.")
    model = _POSE_MODELS[options.model_complexity]
    path = os.path.join(_mediapipe_root(), "mediapipe", "modules", "pose_landmark", model)
    if not os.path.isfile(path):
        raise ModelError(
            f"model_complexity={options.model_complexity} needs {model}, which mediapipe 0.10.21 "
            f"does not ship and would download at start (impossible offline, racy with many "
            f"workers). Use --model-complexity 1, or place the file at {path} first."
        )


class _Deferred(types.ModuleType):
    """Stands in for a module until one of its attributes is used; then imports the real one."""

    def __getattr__(self, attr: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


@contextmanager
def _pyplot_deferred() -> Iterator[None]:
    """Import mediapipe without matplotlib.pyplot, which its solutions package imports for drawing
    helpers a worker never calls: about 1 s of each worker's 1.2 s start. Whatever uses it after
    all gets the real module at its first attribute."""
    if "matplotlib.pyplot" in sys.modules:
        yield
        return
    sys.modules["matplotlib.pyplot"] = _Deferred("matplotlib.pyplot")
    try:
        yield
    finally:
        if isinstance(sys.modules.get("matplotlib.pyplot"), _Deferred):
            del sys.modules["matplotlib.pyplot"]


def _capped_holistic_class(num_threads: int) -> type:
    """A Holistic whose graph config is loaded, capped to num_threads, then built as usual.

    Holistic.__init__ passes its binary graph path to SolutionBase.__init__; a class placed between
    them in the MRO swaps that path for the edited config, so every side input, calculator option
    and output stays exactly Holistic's own.
    """
    with _pyplot_deferred():
        from mediapipe.framework import calculator_pb2
        from mediapipe.python.solution_base import SolutionBase
        from mediapipe.python.solutions.holistic import Holistic

    class _CappedBase(SolutionBase):
        def __init__(self, binary_graph_path: str | None = None, **kwargs: Any) -> None:
            config = calculator_pb2.CalculatorGraphConfig()
            with open(os.path.join(_mediapipe_root(), binary_graph_path or _GRAPH), "rb") as f:
                config.ParseFromString(f.read())
            config.num_threads = num_threads
            super().__init__(graph_config=config, **kwargs)

    class CappedHolistic(Holistic, _CappedBase):
        pass

    return CappedHolistic


def new_holistic(options: HolisticOptions, num_threads: int | None = 1) -> Any:
    """A Holistic graph with these options; num_threads=None leaves MediaPipe's default (one per
    core)."""
    check_model(options)
    kwargs = dict(
        static_image_mode=options.static_image_mode,
        model_complexity=options.model_complexity,
        smooth_landmarks=options.smooth_landmarks,
        enable_segmentation=False,
        refine_face_landmarks=options.refine_face_landmarks,
        min_detection_confidence=options.min_detection_confidence,
        min_tracking_confidence=options.min_tracking_confidence,
    )
    if num_threads is None:
        from mediapipe.python.solutions.holistic import Holistic

        return Holistic(**kwargs)
    return _capped_holistic_class(num_threads)(**kwargs)


# A NormalizedLandmark as MediaPipe serialises it: key 0x0A and size of the embedded message, then
# x, y, z (and visibility for pose) as fixed32 fields 1-4, each a tag byte and a float32.
_FIELD_TAGS = (0x0D, 0x15, 0x1D, 0x25)
_RECORDS = {
    c: np.dtype([("key", "u1"), ("size", "u1")]
                + [f for i in range(c) for f in ((f"t{i}", "u1"), (f"v{i}", "<f4"))])
    for c in (3, 4)
}


def _points_from_bytes(lm: Any, n: int, c: int) -> np.ndarray | None:
    """A landmark list's values read from its serialised bytes in one numpy view, or None.

    ~10x faster than reading 1,662 protobuf attributes in Python (0.04 vs 0.4 ms a frame). The
    bytes are used only when every record has exactly the expected layout; anything else (a
    field missing or added, another count) returns None and the caller reads the attributes.
    """
    data = lm.SerializeToString()
    dt = _RECORDS[c]
    if len(data) != n * dt.itemsize:
        return None
    rec = np.frombuffer(data, dt)
    if not ((rec["key"] == 0x0A).all() and (rec["size"] == dt.itemsize - 2).all()
            and all((rec[f"t{i}"] == _FIELD_TAGS[i]).all() for i in range(c))):
        return None
    return np.stack([rec[f"v{i}"] for i in range(c)], axis=1).astype(np.float32).reshape(-1)


def _points_from_attributes(lm: Any, c: int) -> np.ndarray:
    if c == 4:
        return np.array([(p.x, p.y, p.z, p.visibility) for p in lm.landmark],
                        np.float32).reshape(-1)
    return np.array([(p.x, p.y, p.z) for p in lm.landmark], np.float32).reshape(-1)


def landmarks_to_arrays(results: Any, parts: dict[str, tuple[int, int]] = LAYOUT
                        ) -> dict[str, np.ndarray | None]:
    """MediaPipe results -> {part: float32 [points * values] or None}, values exactly as returned.

    `parts` is the layout the graph's options make (HolisticOptions.layout): 478 face points when
    refined."""
    out: dict[str, np.ndarray | None] = {}
    for part, (n, c) in parts.items():
        lm = getattr(results, f"{part}_landmarks")
        if lm is None:
            out[part] = None
            continue
        arr = _points_from_bytes(lm, n, c)
        if arr is None:
            arr = _points_from_attributes(lm, c)
        if arr.size != n * c:
            raise ValueError(f"{part}: {arr.size // c} points, expected {n}")
        out[part] = arr
    return out


class Extractor:
    """One graph for a process's lifetime; `start_video` resets tracking so videos are independent.

    Holistic's side of the Estimator seam (extract/keypoints/estimator.py)."""

    def __init__(self, options: HolisticOptions, num_threads: int | None = 1) -> None:
        self.options = options
        self.layout = options.layout
        self.settings = options.as_dict()  # the Estimator seam (extract/keypoints/estimator.py)
        self.declaration = declaration(self.settings)
        self._graph = new_holistic(options, num_threads)
        self._dirty = False

    def start_video(self) -> None:
        if self._dirty:
            self._graph.reset()
            self._dirty = False

    def process(self, rgb: np.ndarray) -> dict[str, np.ndarray | None]:
        self._dirty = True
        return landmarks_to_arrays(self._graph.process(rgb), self.layout)

    def close(self) -> None:
        if self._graph is not None:
            self._graph.close()
            self._graph = None

    def __enter__(self) -> Extractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
