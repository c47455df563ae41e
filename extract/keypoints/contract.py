"""What a keypoint family's package must give and may give, typed, and the check the registry
makes when it loads a family (estimator.py): the one list of hooks that docs/families.md
explains one by one, so the tool, the guide and an author read the same contract.

A family is a module (a package's __init__): its functions and constants are the hooks. The
required ones are `FamilyModule` (a Protocol: a type checker holds a family's module to it); the
optional ones are in `HOOKS`, each with the arguments the tool passes and when it calls it. What
a family's estimator object gives (one per worker process) is `Estimator`, and what it may add
to take frames in batches or several videos in lockstep is `BatchEstimator` and
`LockstepEstimator` (extract/keypoints/video_rows.py runs them).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.declaration import Declaration
from phoenix_keypoints.extract.keypoints.words import a


class Estimator(Protocol):
    """What the job runs frames through, one per worker process (`open_estimator` makes it)."""

    declaration: Declaration
    settings: dict[str, Any]  # recorded in each part's footer

    def start_video(self) -> None: ...  # a new video: forget any state of the last one
    def process(self, rgb: np.ndarray) -> dict[str, Any]: ...  # one RGB frame's result
    def close(self) -> None: ...


class BatchEstimator(Estimator, Protocol):
    """An estimator that takes a video's frames several at a time (its declaration says
    `batches`): `batch_size` frames a call, each frame's result as `process` gives it."""

    batch_size: int

    def process_batch(self, rgbs: list[np.ndarray]) -> list[dict[str, Any]]: ...


class LockstepEstimator(Estimator, Protocol):
    """An estimator whose frames depend on the frame before (a tracker) that runs several videos
    at once, one a lane: `start_lane(lane)` begins a video in a lane, `process_lanes` takes each
    lane's next frames (in its video's order) and gives each frame's result."""

    lanes: int
    batch_size: int

    def start_lane(self, lane: int) -> None: ...
    def process_lanes(self, windows: list[tuple[int, list[np.ndarray]]]
                      ) -> list[list[dict[str, Any]]]: ...


class FamilyModule(Protocol):
    """The hooks every family's module gives (checked when the registry loads a plugin)."""

    def declaration(self, settings: dict[str, Any] | None) -> Declaration: ...
    def declaration_of_schema(self, schema: pa.Schema) -> Declaration | None: ...
    def open_estimator(self, settings: dict[str, Any], num_threads: int | None) -> Estimator: ...
    def file_record(self, settings: dict[str, Any] | None, recorded: dict[str, Any]
                    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Hook:
    """One hook of a family's module: a function the tool calls with `params` (positionally),
    or a constant of type `kind`; `when` says when the tool reads it (docs/families.md)."""

    name: str
    params: tuple[str, ...] = ()
    kind: type | tuple[type, ...] | None = None  # a constant's type; None: a function
    required: bool = False
    when: str = ""
    default: Callable[..., Any] | None = None  # what the tool does without it, where it does something


    @property
    def signature(self) -> str:
        return self.name if self.kind is not None else f"{self.name}({', '.join(self.params)})"


def _hook(name: str, *params: str, when: str, required: bool = False,
          default: Callable[..., Any] | None = None) -> Hook:
    return Hook(name, params, None, required, when, default)


def _value(name: str, kind: type | tuple[type, ...], when: str) -> Hook:
    return Hook(name, (), kind, False, when)


def moved_model_files(asked: dict[str, Any], recorded: dict[str, Any]
                      ) -> tuple[dict[str, Any], list[str]]:
    """`moved_files` of a family without its own: each recorded model file (a dict with `path`
    and `sha256`, as sha256_of's users record one) that `asked` names elsewhere with a record equal
    but for where it is (the same bytes), moved there, and a line per move ("KEY OLD -> NEW"),
    so a plugin's run.json and keypoints.parquet follow a moved model as a built-in's do."""
    moved = {k: moved_record(r, asked[k]) for k, r in recorded.items()
             if _is_file(r) and _is_file(asked.get(k)) and asked[k]["path"] != r["path"]
             and _where_not(asked[k]) == _where_not(r)}
    return {**recorded, **moved}, [f"{k} {recorded[k]['path']} -> {r['path']}"
                                   for k, r in moved.items()]


def moved_record(recorded: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any]:
    """A model file's record at its new path: the path as given and where its links lead
    (`resolved`); the rest (bytes, external data, input size) is the recorded one's."""
    return _where_not(recorded) | {k: asked[k] for k in _WHERE if k in asked}


_WHERE = ("path", "resolved")  # where a model file is, as recorded; the rest is what it is


def _is_file(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("path"), str) and "sha256" in record


def _where_not(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in _WHERE}


REQUIRED = (
    _hook("declaration", "settings", required=True,
          when="everywhere: what a run of these settings writes (None: default settings)"),
    _hook("declaration_of_schema", "schema", required=True,
          when="reading a part or a file: the declaration whose table this schema is, or None"),
    _hook("open_estimator", "settings", "num_threads", required=True,
          when="in each worker (and extract_keypoints): the estimator, models loaded"),
    _hook("file_record", "settings", "recorded", required=True,
          when="at the merge: what keypoints.parquet's metadata says of the family"),
)

OPTIONAL = (
    _hook("clip_options", when="extract_keypoints: the keyword options it takes"),
    _hook("clip_settings", "options",
          when="extract_keypoints: its options as a run records them (files checked)"),
    _hook("clip_parts", "parts",
          when="extract_keypoints: the clip's arrays, with any named slices added"),
    _hook("variants", when="show, report, diff: declarations of its other point sets"),
    _hook("add_run_options", "parser", when="building `run` and `slurm`: its own flags"),
    _hook("asked_settings", "args", "estimator", "fetched",
          when="run, slurm: the values of its flags, checked (None: none given)"),
    _hook("settings_of", "asked", "recorded", when="run: the settings a run records"),
    _hook("settings_conflicts", "asked", "recorded",
          when="a resume: why what was asked differs from what the run recorded"),
    _hook("moved_files", "asked", "recorded", default=moved_model_files,
          when="run (a resume, a finished run): its recorded files where its flags name them now"),
    _hook("check_settings", "settings", when="before planning: refuse what cannot run here"),
    _hook("check_recorded", "settings", when="a resume: its recorded files unchanged"),
    _hook("model_problems", "settings", when="verify: each recorded model file changed or gone"),
    _hook("unavailable", when="run: why it cannot run in this Python (None: it can)"),
    _hook("device_refused", "device", when="run --device: why this device cannot run it"),
    _hook("runs_on", "settings", "batch_size", "device", "gpu",
          when="run's first lines: how its workers will run"),
    _hook("on_gpu", "device", "gpu", when="run: whether its workers use their GPUs"),
    _hook("run_line", "recorded", when="run's first lines: its recorded settings in words"),
    _hook("status_line", "settings", when="status: its line"),
    _hook("library_version", when="each part: its library's version, recorded"),
    _hook("write_report", "keypoints", "title", "out_dir",
          when="report: a report of its own (else the plain or quality report)"),
    _hook("drawn_frames", "rows", "frames_root", "width", "height", "scale", "seen",
          when="show: its own drawing (else one from the declaration)"),
    _hook("write_pose_files", "keypoints", "out_dir", "fps", "root",
          when="export --format pose: a .pose header of its own"),
    _hook("pose_of_clip", "parts", "width", "height", "fps",
          when="Keypoints.to_pose(): the same .pose for a clip"),
    _value("EXPORTS", dict, "export --format NAME: its own writers, NAME -> writer(keypoints, to)"),
    _value("EXPORT_HELP", dict, "export --help: words for each format it exports"),
    _value("ONE_FILE_EXPORTS", tuple, "export --to: its formats whose --to is the one file written"),
    _value("ABOUT", str, "--help: its words beside its name"),
    _value("DOCS", str, "messages: its page"),
    _value("ENGINE", str, "the idle-cores warning: what runs on the CPU"),
    _value("IMPORTS", str, "workers that cannot start: the module to check"),
    _value("DEVICE_HELP", str, "run --help's --device"),
    _value("LOG_LINES", str, "decoding: a regex of its library's stderr lines"),
    _value("LIBRARY", tuple, "each part: the distributions whose version is recorded"),
)

HOOKS: tuple[Hook, ...] = REQUIRED + OPTIONAL
PAIRS = (("asked_settings", "settings_conflicts"),)  # the first given needs the second


def problems(module: ModuleType | Any) -> list[str]:
    """What a family's module lacks or gives wrongly typed, each in a phrase ("lacks
    open_estimator(settings, num_threads)"); [] when it keeps the contract. Cheap: signatures
    and types, and the default declaration (declaration(None)) made once."""
    out = []
    for hook in HOOKS:
        if not hasattr(module, hook.name):
            if hook.required:
                out.append(f"lacks {hook.signature}")
            continue
        out += _wrong(hook, getattr(module, hook.name))
    for first, second in PAIRS:
        if hasattr(module, first) and not hasattr(module, second):
            out.append(f"gives {first} but lacks {_by_name(second).signature}")
    if not out:
        out += _declared(module)
    return out


def _by_name(name: str) -> Hook:
    return next(h for h in HOOKS if h.name == name)


def _wrong(hook: Hook, value: Any) -> list[str]:
    """How a hook's value breaks its contract: a constant of another type, something that cannot
    be called, a function that cannot take the tool's arguments."""
    if hook.kind is not None:
        if not isinstance(value, hook.kind):
            return [f"{hook.name} is {a(type(value).__name__)}, not {a(_kind(hook.kind))}"]
        if hook.name == "EXPORTS":
            return [f"EXPORTS[{k!r}] is not callable" for k, w in value.items() if not callable(w)]
        return []
    if not callable(value):
        return [f"{hook.name} is {a(type(value).__name__)}, not a function {hook.signature}"]
    return _cannot_take(hook, value)


def _kind(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))


def _cannot_take(hook: Hook, fn: Callable[..., Any]) -> list[str]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: not checked
        return []
    try:
        sig.bind(*hook.params)
    except TypeError:
        return [f"{hook.name}{sig} cannot take the tool's call {hook.signature}"]
    return []


def _declared(module: Any) -> list[str]:
    """declaration(None) is a Declaration whose parts are (points, values) pairs."""
    try:
        decl = module.declaration(None)
    except Exception as e:  # noqa: BLE001 (a family's own code: said, not raised)
        return [f"declaration(None) raised {type(e).__name__}: {e}"]
    if not isinstance(decl, Declaration):
        return [f"declaration(None) gave {a(type(decl).__name__)}, not a Declaration"]
    bad = [p for p, v in decl.parts.items()
           if not (isinstance(v, tuple) and len(v) == 2 and all(isinstance(n, int) for n in v))]
    return [f"its declaration's parts[{p!r}] is not (points, values)" for p in bad]


def estimator_problems(est: Any) -> list[str]:
    """What an estimator object lacks of `Estimator` (and of the batch or lockstep protocol it
    starts to give), each in a phrase."""
    out = [f"lacks {m}()" for m in ("start_video", "process", "close")
           if not callable(getattr(est, m, None))]
    if not isinstance(getattr(est, "declaration", None), Declaration):
        out.append("has no `declaration` (a Declaration)")
    if not isinstance(getattr(est, "settings", None), dict):
        out.append("has no `settings` (a dict)")
    if getattr(est, "lanes", 1) not in (None, 1) and not all(
            callable(getattr(est, m, None)) for m in ("start_lane", "process_lanes")):
        out.append("gives `lanes` but lacks start_lane(lane) or process_lanes(windows)")
    return out

