"""The family contract: `Family`, the base class whose methods and attributes are everything
the tool asks of a keypoint family, each with its default (what the tool does for a family
that does not give it) and a docstring saying what the tool passes and when; and the check the
registry makes when it loads an installed family (`problems`). docs/families.md explains each
member, and a test holds it to this class.

`HOOKS` (`REQUIRED`, `OPTIONAL`) is the class read as a list: each method's parameters, each
constant's type. What a family's estimator object gives (one per worker process) is
`Estimator`, and what it may add to take frames in batches or several videos in lockstep is
`BatchEstimator` and `LockstepEstimator` (extract/keypoints/video_rows.py runs them). The class
lives in this low room so the rooms below extract/families/ can name its type; plugins import it
as `phoenix_keypoints.extract.families.Family`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
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


@dataclass(frozen=True)
class Hook:
    """One member of Family as the tool uses it: a method it calls with `params` (positionally),
    or a constant of type `kind`; `when` is its docstring (docs/families.md lists each)."""

    name: str
    params: tuple[str, ...] = ()
    kind: type | None = None  # a constant's type; None: a method
    required: bool = False
    when: str = ""

    @property
    def signature(self) -> str:
        return self.name if self.kind is not None else f"{self.name}({', '.join(self.params)})"


def _required(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a method of Family that every family must give (its body raises)."""
    method.required = True  # type: ignore[attr-defined]
    return method


class Family:
    """A keypoint family: what turns frames into keypoints, and everything the tool asks of it.

    Subclass it and give the four required methods (`declaration`, `declaration_of_schema`,
    `open_estimator`, `file_record`); every other method and attribute here is optional, and its
    body is what the tool does for a family that does not give it, so the default lives here and
    nowhere else. Constants are read from the instance: give them as plain class attributes
    (`ABOUT = "My model"`). The registry makes one instance a process (no arguments) and sets
    `name`; the tool calls a method with the arguments its signature shows, positionally
    (docs/families.md says each)."""

    name: str = ""  # the registry's name of the family (--estimator NAME), set when it is made

    # --- required: what a family writes, how it runs, what its file says ------------------------
    @_required
    def declaration(self, settings: dict[str, Any] | None) -> Declaration:
        """Everywhere: the Declaration of a run of these settings (None: default settings)."""
        raise NotImplementedError(f"{type(self).__name__} lacks declaration(settings)")

    @_required
    def declaration_of_schema(self, schema: pa.Schema) -> Declaration | None:
        """Reading a part or a keypoints file: its declaration where the Arrow schema is its
        table (an earlier version's too), else None."""
        raise NotImplementedError(f"{type(self).__name__} lacks declaration_of_schema(schema)")

    @_required
    def open_estimator(self, settings: dict[str, Any], num_threads: int | None) -> Estimator:
        """In each worker and in extract_keypoints: the estimator of these settings, models
        loaded (num_threads: the CPU threads it may use; None: its library's choice)."""
        raise NotImplementedError(f"{type(self).__name__} lacks open_estimator(settings, "
                                  "num_threads)")

    @_required
    def file_record(self, settings: dict[str, Any] | None, recorded: dict[str, Any]
                    ) -> dict[str, Any]:
        """At the merge: what keypoints.parquet's metadata says of the family (its settings,
        its layout), from the run's recorded settings."""
        raise NotImplementedError(f"{type(self).__name__} lacks file_record(settings, recorded)")

    # --- extract_keypoints ----------------------------------------------------------------------
    def clip_options(self) -> tuple[str, ...]:
        """extract_keypoints: the keyword options it takes (default: none)."""
        return ()

    def clip_settings(self, options: dict[str, Any]) -> dict[str, Any]:
        """extract_keypoints: its options as a run records them (files checked: raise TypeError,
        ValueError or ModelFileError). Default: `{"estimator": name}`."""
        return {"estimator": self.name}

    def clip_parts(self, parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """extract_keypoints: the clip's {column: [T, points, values]} arrays, with any named
        slices added (kp["feet"]). Default: the columns alone."""
        return parts

    def pose_of_clip(self, parts: dict[str, np.ndarray], width: int, height: int, fps: float
                     ) -> Any:
        """Keypoints.to_pose(): a pose-format Pose of its own for a clip, the one
        write_pose_files writes. Default None: the tool makes one from the declaration."""
        return None

    # --- show, report, diff, export -------------------------------------------------------------
    def variants(self) -> tuple[Declaration, ...]:
        """show, report, diff: the declarations of its other point sets (columns of their own),
        so a table of any of them is recognised. Default: none (one declaration)."""
        return ()

    def write_report(self, keypoints: Path, title: str, out_dir: Path) -> dict[str, Any] | None:
        """report: a report of its own, returning {"videos", "frames", "flagged"}. Default
        None: the tool writes the quality report or the plain report of its declaration."""
        return None

    def drawn_frames(self, rows: Any, frames_root: Path | None, width: int, height: int,
                     scale: int, seen: Any) -> Iterator[np.ndarray] | None:
        """show: its own drawing, RGB frames one by one. Default None: drawn from the
        declaration (regions, skeleton, colours)."""
        return None

    def write_pose_files(self, keypoints: Path, out_dir: Path, fps: float, root: Path | None
                         ) -> int | None:
        """export --format pose: .pose files with a header of its own, returning the number of
        videos. Default None: one header made from the declaration."""
        return None

    @property
    def EXPORTS(self) -> dict[str, Callable[..., str]]:
        """export --format NAME: its own writers, NAME -> writer(keypoints, to, **options)
        returning the line the command prints. Default: none."""
        return {}

    @property
    def EXPORT_HELP(self) -> dict[str, str]:
        """export --help: words for each format it exports. Default: none."""
        return {}

    @property
    def ONE_FILE_EXPORTS(self) -> tuple[str, ...]:
        """export --to: its own formats whose --to is the one file written (the others write a
        folder). Default: none."""
        return ()

    # --- run's flags and settings ---------------------------------------------------------------
    def add_run_options(self, parser: Any) -> None:
        """Building run and slurm (where the family is named): its own flags,
        parser.add_argument(...), each default None ("not given"); `parser` is the family's own
        section of --help (an argparse group). Default: no flags."""
        return None

    def asked_settings(self, args: Any, estimator: str | None, fetched: Callable[[], Any]
                       ) -> dict[str, Any] | None:
        """run, slurm: the values of its flags read from args, checked, as it records them
        (None: none given); raise OptionError for flags that do not go together. `estimator` is
        --estimator as given (None: not given); fetched() gives --models NAME's files to a
        family that publishes models. Give settings_conflicts with it. Default: nothing asked."""
        return None

    def settings_of(self, asked: dict[str, Any] | None, recorded: dict[str, Any]
                    ) -> dict[str, Any]:
        """run: the settings a run records, asked over recorded ({} for a new run). Default:
        the two merged, asked winning."""
        return {**recorded, **(asked or {})}

    def settings_conflicts(self, asked: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
        """A resume: why what was asked differs from what the run recorded, "FLAG (X when
        planned, Y asked)" each. Default: no conflicts."""
        return []

    def moved_files(self, asked: dict[str, Any], recorded: dict[str, Any]
                    ) -> tuple[dict[str, Any], list[str]]:
        """run (a resume, and a finished run asked again): (record, lines), its recorded files
        where its flags name them now (the same bytes moved). Default: moved_model_files."""
        return moved_model_files(asked, recorded)

    # --- checks -----------------------------------------------------------------------------------
    def check_settings(self, settings: dict[str, Any]) -> None:
        """Before planning: raise ModelFileError for what cannot run here. Default: nothing."""
        return None

    def check_recorded(self, settings: dict[str, Any]) -> None:
        """A resume: raise ModelFileError where a recorded file changed. Default: nothing."""
        return None

    def model_problems(self, settings: dict[str, Any]) -> list[str]:
        """verify: each recorded model file changed or gone, "FLAG PATH: why" each (exit 1).
        Default: none (no model files)."""
        return []

    def unavailable(self) -> str | None:
        """run: why it cannot run in this Python (None: it can). Default: it can."""
        return None

    # --- devices --------------------------------------------------------------------------------
    def device_refused(self, device: str) -> str | None:
        """run --device cuda (a family whose declaration batches): why this device cannot run
        it (None: it can). Default: it can."""
        return None

    def runs_on(self, settings: dict[str, Any], batch_size: int | None, device: str | None,
                gpu: bool) -> str:
        """run's first lines: how its workers will run (said after its run_line). Default: ""."""
        return ""

    def on_gpu(self, device: str | None, gpu: bool) -> bool:
        """run: whether its workers use their GPUs (gpu: a worker has one). Default: False,
        the CPU (a GPU only pins its workers)."""
        return False

    def gpu_memory_need(self, settings: dict[str, Any], batch_size: int) -> int | None:
        """run on GPUs (a family whose on_gpu is True): the bytes one worker takes of a card at
        this batch size, so workers and batch are fitted to the cards. Default None: unknown,
        nothing fitted."""
        return None

    @property
    def DEVICE_HELP(self) -> str:
        """run --help's --device: where its workers run."""
        return "where its workers run"

    # --- what run and status say ----------------------------------------------------------------
    def run_line(self, recorded: dict[str, Any]) -> str:
        """run's first lines: its recorded settings in words (e.g. its model files). Default ""
        (no line)."""
        return ""

    def status_line(self, settings: dict[str, Any]) -> str:
        """status: its line. Default: "estimator: NAME"."""
        return f"estimator: {self.name}"

    def library_version(self) -> str | None:
        """Each part: its library's version as its module says it (raise ImportError where it is
        not installed). Default None: LIBRARY's installed version."""
        return None

    @property
    def LIBRARY(self) -> tuple[str, ...]:
        """Each part: the distributions whose version is recorded (the first is the key).
        Default: none."""
        return ()

    @property
    def ABOUT(self) -> str:
        """--help: its words beside its name. Default: none."""
        return ""

    @property
    def DOCS(self) -> str:
        """Messages: its page."""
        return "docs/options.md"

    @property
    def ENGINE(self) -> str:
        """The idle-cores warning: what runs on the CPU. Default: "The NAME estimator"."""
        return f"The {self.name} estimator"

    @property
    def IMPORTS(self) -> str:
        """Workers that cannot start: the module to check. Default: the family class's module."""
        return type(self).__module__

    @property
    def LOG_LINES(self) -> str:
        """Decoding: a regex of the lines its library writes to stderr (kept out of a frame's
        decoder note). Default: none."""
        return ""

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


_KINDS: dict[str, type] = {"str": str, "dict": dict, "tuple": tuple}


def _hook_of(name: str, value: Any) -> Hook:
    """A member of Family as a Hook: a method's parameters (without self), or a constant's type
    (its property's return annotation); `when` is its docstring."""
    when = " ".join((inspect.getdoc(value) or "").split())
    if isinstance(value, property):
        returns = str(inspect.signature(value.fget).return_annotation) if value.fget else "str"
        return Hook(name, (), _KINDS[returns.split("[")[0]], False, when)
    params = tuple(p for p in inspect.signature(value).parameters if p != "self")
    return Hook(name, params, None, getattr(value, "required", False), when)


def _members() -> tuple[Hook, ...]:
    return tuple(_hook_of(n, v) for n, v in vars(Family).items()
                 if not n.startswith("_") and (callable(v) or isinstance(v, property)))


HOOKS: tuple[Hook, ...] = _members()  # every method and constant of Family, in its order
REQUIRED = tuple(h for h in HOOKS if h.required)
OPTIONAL = tuple(h for h in HOOKS if not h.required)
PAIRS = (("asked_settings", "settings_conflicts"),)  # the first given needs the second
BASE = "phoenix_keypoints.extract.families.Family"  # where a plugin imports the base class from


def overrides(cls: type, name: str) -> bool:
    """Whether a Family subclass gives `name` itself (not Family's default)."""
    return next((k for k in cls.__mro__ if name in vars(k)), Family) is not Family


def problems(fam: Family | Any) -> list[str]:
    """What a family (an instance of a Family subclass) lacks or gives wrongly typed, each in a
    phrase ("lacks open_estimator(settings, num_threads)"); [] when it keeps the contract.
    Cheap: signatures and types, and the default declaration (declaration(None)) made once."""
    if not isinstance(fam, Family):
        return [f"is {a(type(fam).__name__)}, not a subclass of {BASE}"]
    out = []
    cls = type(fam)
    for hook in HOOKS:
        if not overrides(cls, hook.name):
            if hook.required:
                out.append(f"lacks {hook.signature}")
            continue
        try:
            value = getattr(fam, hook.name)
        except Exception as e:  # noqa: BLE001 (a family's own property: said, not raised)
            out.append(f"{hook.name} raised {type(e).__name__}: {e}")
            continue
        out += _wrong(hook, value)
    for first, second in PAIRS:
        if overrides(cls, first) and not overrides(cls, second):
            out.append(f"gives {first} but lacks {_by_name(second).signature}")
    if not out:
        out += _declared(fam)
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


def _declared(fam: Family) -> list[str]:
    """declaration(None) is a Declaration whose parts are (points, values) pairs."""
    try:
        decl = fam.declaration(None)
    except Exception as e:  # noqa: BLE001 (a family's own code: said, not raised)
        return [f"declaration(None) raised {type(e).__name__}: {e}"]
    if not isinstance(decl, Declaration):
        return [f"declaration(None) gave {a(type(decl).__name__)}, not a Declaration"]
    bad = [p for p, v in decl.parts.items()
           if not (isinstance(v, tuple) and len(v) == 2 and all(isinstance(n, int) for n in v))]
    return [f"its declaration's parts[{p!r}] is not (points, values)" for p in bad]


class EstimatorExtras:
    """What an estimator object may add to `Estimator` (BatchEstimator, LockstepEstimator, the
    words and records of a family that runs models), each read here with the default an estimator
    without it gets, so no reader holds a default of its own."""

    @staticmethod
    def batch_size(est: Any) -> int | None:
        """Frames a call where it batches (None: one frame at a time, `process`)."""
        return getattr(est, "batch_size", None)

    @staticmethod
    def frames_a_call(est: Any) -> int:
        """Frames a call, 1 where it does not batch."""
        return int(getattr(est, "batch_size", 1) or 1)

    @staticmethod
    def lanes(est: Any) -> int:
        """Videos at once (LockstepEstimator); 1: one after another."""
        return int(getattr(est, "lanes", 1) or 1)

    @staticmethod
    def process_batch(est: Any) -> Callable[[list[np.ndarray]], list[dict[str, Any]]] | None:
        """Its batch call (None: frames one at a time)."""
        return getattr(est, "process_batch", None)

    @staticmethod
    def blame(est: Any) -> Callable[[str], str] | None:
        """What is at fault for a status every frame gets (its model file), or None: the
        estimator itself."""
        return getattr(est, "blame", None)

    @staticmethod
    def execution(est: Any) -> dict[str, Any]:
        """How its values are computed (device, provider, options, batch shape:
        extract/keypoints/execution.py); {} for a family whose values do not depend on it."""
        return dict(getattr(est, "execution", None) or {})

    @staticmethod
    def providers(est: Any) -> list[str]:
        """The onnxruntime providers its sessions run on ([] where it has none)."""
        return list(getattr(est, "providers", []))


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

