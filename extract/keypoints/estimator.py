"""What a keypoint family is, and the registry of families: the one seam between the job and
whatever turns frames into keypoints.

A family *declares* what it writes and what every output needs to know of it (a `Declaration`: its
landmark columns with point names and value channels, units, which points make the body, face and
hands, the presence rule, per-frame count columns, the exports it supports) and *runs* a video's
frames (`Estimator`: start_video, process one RGB frame, close). Each family is one package,
extract/families/NAME/, which this registry imports only when a run, a file or a clip names it
(importlib, so no room below extract/families/ imports a family). The job, the schema, the merge
and the outputs read the declaration and call the family's hooks, never a family's name.

A family's package gives: `declaration(settings)`, `open_estimator(settings, num_threads)`,
`file_record(settings, recorded)` (what keypoints.parquet's metadata says of it), and may give
`write_tensors`, `tensor_writer`, `write_report`, `drawn_frames`, `write_pose_files`,
`pose_of_clip`, `run_line` (what `run` says of its recorded settings) and `EXPORTS` (export format
-> writer(keypoints, to, **options) returning the line the command prints; a writer that names
`flat`, `tag` or `run` as parameters gets them: `run` is what the job says of the run, such as
the corpus layout, the dataset path as given and the recorded settings, jobs/run/outputs.py's
run_facts). Settings travel as one plain dict (recorded in run.json under the family's name, and
in each part's footer): the default family's is its options dict exactly as before (no
`estimator` key); another family's carries `estimator: NAME`. A new family is one package and
its name below.

Command-line options. A family adds its own flags to `run` and `slurm` with four hooks (all
optional; extract/families/holistic/options.py and wholebody/options.py are two examples):

- `add_run_options(parser)`: `parser.add_argument(...)` for each flag, default None (None means
  "not given": a resume keeps the run's own); help text starts with the family's name where the
  flag is for it alone.
- `asked_settings(args, estimator, fetched)`: the values of its flags read from the parsed `args`,
  checked, as the family records them (None: none of its flags given); `estimator` is --estimator
  as given (None when not); raise `OptionError` for flags that do not go together. A family other
  than the default that returns something is chosen by it (--detector implies the whole-body
  family). `fetched()` gives the files of `--models NAME` to the family that publishes models
  (`PUBLISHED_MODELS`, read by jobs/models.py).
- `settings_of(asked, recorded)`: the settings a run records, what was asked over what the run
  recorded ({} for a new run); without it, the two dicts merged.
- `settings_conflicts(asked, recorded)`: why a resume refuses what was asked ("flag (X when
  planned, Y asked)" each), compared with what the run recorded.
- (and `moved_files(asked, recorded)`, for a family whose flags name files: the record with the
  files where they are now, and a line per move; run.json follows them.)

So a new output-deciding flag (say `--points SET`) is one `add_argument` in add_run_options, one
key in asked_settings' dict, and a line in settings_conflicts if a resume must refuse a change;
the job, run.json, the fingerprint and the parts carry it without an edit. Options on how workers
run, not on what they write (--batch-size, --device), are the job's, for a family whose
declaration says `batches`; such a family words --device's help (`DEVICE_HELP`) and says why a
device cannot run here (`device_refused(device)`: None when it can). One that runs on GPUs
(`on_gpu`) says what a worker takes of a card at a batch size (`gpu_memory_need(settings,
batch_size)`: bytes; jobs/schedule/devices.py fits workers and batch to the cards with it), and its
estimator's `execution` record says how its values are computed (device, provider, options, batch
shape: extract/keypoints/execution.py), kept in every part and compared on resume. `ABOUT` (its words in
--estimator's help) and `DOCS` (its page) are read where the help names the family.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.points import PointTable
from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS, BASE_OPTIONAL

# The registry: family name -> its package (extract/families/NAME/). The first is the default (a
# settings dict without `estimator`). Tests may add a family of their own (register).
FAMILIES: dict[str, str] = {"holistic": "phoenix_keypoints.extract.families.holistic",
                            "wholebody": "phoenix_keypoints.extract.families.wholebody",
                            "wholebody3d": "phoenix_keypoints.extract.families.wholebody3d"}
DEFAULT_FAMILY = next(iter(FAMILIES))


class ModelFileError(Exception):
    """A model file cannot be used (missing, unreadable, another layout, changed since the run was
    planned); the message names the file and says what to do. The command exits 2."""


class OptionError(Exception):
    """A family's command-line options that do not go together (its asked_settings); the message
    says which and what to give. The command exits 2."""


@dataclass(frozen=True)
class ReportSpec:
    """What the plain report of a family says (extract/inspect/plain.py): per video, each region's
    found fraction and these count figures; a family with a QualitySpec instead gets the quality
    report of extract/inspect/report.py, made for landmark lists that exist where a part was found."""

    heading: str  # the page's heading, before the run's title
    note: str  # the paragraph under it: how a part counts as found, what the counts are
    # (figure, count column, ">" or "==", value): the frames of a video whose column compares so
    counts: tuple[tuple[str, str, str, int], ...] = ()
    flag_counts: tuple[str, ...] = ()  # a video is flagged where one of these figures is above 0,
    flag_lost: tuple[str, ...] = ()  # or where none of these regions is found on any frame


@dataclass(frozen=True)
class QualitySpec:
    """What the quality report (extract/inspect/report.py) and its drawing (extract/inspect/draw.py)
    need of a family whose parts are landmark lists that exist where a part was found. The parts it
    rates are the declaration's regions in order (at most four, each a landmark column of its own,
    which names its figures: `pose_rate`); the regions named body, face, left_hand and right_hand
    have roles: these are the points and channels the roles read."""

    engine: str  # who finds the parts, as the page says it ("MediaPipe found the part")
    # points are numbered in their region's column (as the skeleton's limbs are)
    head: int  # the body's points 0..head-1 (head and shoulders) checked for lying far outside
    shoulders: tuple[int, int]  # the body's points whose frame-to-frame movement is the jitter
    visibility: int  # the body's value channel that scores a point visible
    visible: float  # a body point counts (checked, drawn, moved) where visibility is at least this
    wrist: int  # the hand point whose position tells a left/right swap
    thin: tuple[str, ...] = ()  # regions drawn at half the line width (a dense mesh)
    dotted: tuple[str, ...] = ()  # regions drawn with a dot on every point


@dataclass(frozen=True)
class Declaration:
    """What a family writes into keypoints.parquet (besides the per-frame columns all share) and
    what every output needs to know of it."""

    name: str
    parts: dict[str, tuple[int, int]]  # landmark column -> (points, values per point)
    counts: tuple[str, ...] = ()  # int32 per-frame columns (wholebody: persons)
    values: tuple[str, ...] = ()  # a point's values when every part has the same (x, y, score)
    # the table's schema; None: BASE_FIELDS, a float32 list per part, an int32 per count column
    schema: pa.Schema = field(default=None, compare=False)  # type: ignore[assignment]
    title: str = ""  # how messages name its points ("COCO-WholeBody 133 points")
    # where a point counts as found: None, wherever its column's list exists (a detector that
    # returns whole parts); a number, where the point's last value (its score) is at least that
    score_threshold: float | None = None
    # regions the report, show and extract_keypoints name: region -> (column, first, end point)
    regions: dict[str, tuple[str, int, int]] = field(default_factory=dict, compare=False)
    # what `show` draws: region -> limbs (point pairs, in the region's column) and its colour (RGB;
    # drawn in this order, the last on top): by inspect/draw.py for a family with `quality`, else
    # by inspect/declared.py
    skeleton: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict, compare=False)
    colours: dict[str, tuple[int, int, int]] = field(default_factory=dict, compare=False)
    legend: dict[str, str] = field(default_factory=dict, compare=False)  # region -> legend label
    exports: tuple[str, ...] = ()  # `export --format` values it supports
    error_status: str = ""  # a frame's status when the estimator fails on it (default NAME_error)
    units: str = ""  # the values' units and origin, as points.json and the docs say them
    presence_note: str = ""  # where the score threshold comes from (points.json's mask words)
    # the points' names over all landmark columns in order, and the named parts of that order
    # (default: each column one part); read by points.json and the report
    names: tuple[str, ...] = field(default=(), compare=False)
    subparts: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)
    # its tensor numbering and presets: tensor sets come from presets, --points and normalisation
    # (outputs/tensors.py); None: one set of every declared point (outputs/declared.py)
    points: PointTable | None = field(default=None, compare=False)
    # columns files of its earlier versions lack (read as absent, filled with nulls by a merge)
    optional: tuple[str, ...] = field(default=BASE_OPTIONAL, compare=False)
    batches: bool = False  # takes --batch-size and --device (frames in batches, CPU or CUDA)
    # what its models take of each frame of a batch, besides the frame (a 1920x1080 frame): bytes
    # and their words ("the detector's input"); --batch-size's bound (batch_refused) counts them
    batch_input: tuple[int, str] = field(default=(0, ""), compare=False)
    report: ReportSpec | None = field(default=None, compare=False)  # the plain report
    quality: QualitySpec | None = field(default=None, compare=False)  # or the quality report

    def __post_init__(self) -> None:
        if self.schema is None:
            cols = [pa.field(p, pa.list_(pa.float32())) for p in self.parts]
            object.__setattr__(self, "schema", pa.schema(
                [*BASE_FIELDS, *cols, *(pa.field(c, pa.int32()) for c in self.counts)]))

    @property
    def tensor_presets(self) -> bool:
        """Its tensor sets come from presets, --points and normalisation (it has a PointTable)."""
        return self.points is not None

    def point_parts(self) -> dict[str, tuple[int, int]]:
        """Named ranges of the point order (first, end)."""
        if self.subparts:
            return dict(self.subparts)
        out, at = {}, 0
        for part, (n, _) in self.parts.items():
            out[part], at = (at, at + n), at + n
        return out

    def point_name(self, i: int) -> str:
        return self.names[i] if i < len(self.names) else str(i)

    def write_options(self) -> dict[str, Any]:
        """How parts and keypoints.parquet are encoded: zstd, page checksums, dictionaries only
        for the string columns, BYTE_STREAM_SPLIT for the landmark floats (schema.py says why)."""
        return {
            "compression": "zstd",
            "write_page_checksum": True,
            "use_dictionary": [f.name for f in self.schema
                               if f.type == pa.string() and f.name != "file_sha256"],
            "use_byte_stream_split": [f"{p}.list.element" for p in self.parts],
        }

    def refuse_export(self, fmt: str, where: object) -> str | None:
        """Why `export --format fmt` cannot take this family's run (None: it can): the one
        wording of every such refusal, naming the families that do support it."""
        if fmt in self.exports:
            return None
        others = [d for d in (family(n).declaration(None) for n in names()) if fmt in d.exports]
        made = " or ".join(f"{d.title} (--estimator {d.name})" for d in others) or "no family here"
        return (f"--format {fmt} is made from {made}; {where} is a {self.name} run ({self.title}). "
                f"Its exports: {', '.join(self.exports) or 'none'}.")


ENTRY_POINTS = "phoenix_keypoints.families"  # installed packages may add families: name = module


def register(name: str, module: str) -> None:
    """Add a family (a package with the hooks above) to this process's registry."""
    FAMILIES[name] = module


_scanned: list[bool] = []  # the installed packages' families were read (once a process)


def names(rescan: bool = False) -> tuple[str, ...]:
    """Every family this process knows: the registry's, then those installed packages declare
    (entry points of group ENTRY_POINTS, read once a process, or again with `rescan`; a name
    already known keeps its module). Per-video readers call this: the scan is not repeated."""
    if rescan or not _scanned:
        for name, module in _installed_families():
            FAMILIES.setdefault(name, module)
        _scanned.append(True)
    return tuple(FAMILIES)


def _installed_families() -> list[tuple[str, str]]:
    """(name, module) of each family an installed package declares. Only absolute entries of
    sys.path are searched: a relative one (an editable install's path hook, a '' from `python -c`)
    would be read in the current folder, which is often the corpus, whose files are data."""
    from importlib.metadata import distributions

    where = [p for p in sys.path if os.path.isabs(p)]
    return [(ep.name, ep.value) for dist in distributions(path=where)
            for ep in dist.entry_points if ep.group == ENTRY_POINTS]


def family(name: str) -> ModuleType:
    """A family's package, imported on first use."""
    if name not in FAMILIES and name not in names(rescan=True):
        raise ValueError(f"unknown estimator {name!r}; this version knows {', '.join(FAMILIES)}")
    return importlib.import_module(FAMILIES[name])


def estimator_name(settings: dict[str, Any] | None) -> str:
    """The family a settings dict is for (a dict without the key is the default family's)."""
    return str((settings or {}).get("estimator", DEFAULT_FAMILY))


def declaration(settings: dict[str, Any] | None) -> Declaration:
    """The declaration of the family these settings run."""
    return family(estimator_name(settings)).declaration(settings)


def declaration_of_schema(schema: pa.Schema) -> Declaration | None:
    """The declaration whose table a file's schema is, or None (a family's earlier ones too)."""
    for name in names():
        found = family(name).declaration_of_schema(schema)
        if found is not None:
            return found
    return None


def _default_declarations(name: str,
                          cache: dict[str, tuple[Declaration, ...]] = {}  # noqa: B006
                          ) -> tuple[Declaration, ...]:
    """A family's declaration for default settings, then those of its other variants (`variants()`
    where it has some: point sets with columns of their own), made once a process (read per video)."""
    if name not in cache:
        fam = family(name)
        cache[name] = (fam.declaration(None), *getattr(fam, "variants", tuple)())
    return cache[name]


def declaration_of_columns(columns: list[str]) -> Declaration | None:
    """The family whose landmark columns these are (a table read for show, report or diff)."""
    for name in names():
        for d in _default_declarations(name):
            if set(d.parts) - set(d.optional) <= set(columns):
                return d
    return None


class Estimator(Protocol):
    """What the job runs frames through, one per process."""

    declaration: Declaration
    settings: dict[str, Any]  # recorded in each part's footer

    def start_video(self) -> None: ...
    def process(self, rgb: np.ndarray) -> dict[str, Any]: ...
    def close(self) -> None: ...


DEFAULT_BATCH = 8  # frames per model call on the CPU: docs/performance.md
# What a batch holds, a frame at a time: the frame as RGB twice (read ahead, and waiting in the
# batch: video_rows.py), 2 x 5.9 MiB for a 1920x1080 frame, and what the family's models take of
# it (its declaration's batch_input: the whole-body detector's 640x640 float input, 4.7 MiB; about
# 16 MiB in all). A batch may hold BATCH_BYTES, so --batch-size is at most BATCH_BYTES / that
# (a batch of 1,000,000 held a whole video: 3.4 GB on 600 frames of 540x720, 425 MiB at 8).
BATCH_FRAME_BYTES = 2 * 1920 * 1080 * 3
BATCH_BYTES = 2 * 2**30
_TIMES = {2: "twice", 3: "three times"}


def batch_refused(n: int) -> str:
    """Why --batch-size n is refused ("" when it is not): fewer than 1, or more frames than a batch
    may hold in BATCH_BYTES, for the batching family whose frames take the most (the flag is read
    before the family is known)."""
    if n < 1:
        return f"must be >= 1, not {n}"
    batching = [family(name) for name in names() if family(name).declaration(None).batches]
    if not batching:
        return ""
    fam = max(batching, key=lambda f: f.declaration(None).batch_input[0])
    extra, words = fam.declaration(None).batch_input
    frame = BATCH_FRAME_BYTES + extra
    if n <= BATCH_BYTES // frame:
        return ""
    held = ["RGB read ahead", "RGB in the batch", *([words] if extra else [])]
    return (f"must be at most {BATCH_BYTES // frame}, not {n:,}: a batch holds each of its frames "
            f"about {_TIMES.get(len(held), f'{len(held)} times')} ({', '.join(held)}), about "
            f"{frame / 2**20:.0f} MiB a 1920x1080 frame, and may hold {BATCH_BYTES // 2**30} GiB "
            f"({getattr(fam, 'DOCS', 'docs/options.md')})")


RUNTIME = "runtime"  # settings key of how a worker runs (batch size, device), not what it writes


def runtime(batch_size: int | None = None, device: str | None = None,
            gpu_memory: int | None = None, chosen: str = "") -> dict[str, Any]:
    """How a worker of a family that batches frames runs (its declaration's `batches`): frames per
    batch, --device, and on a GPU its share of the card (bytes: its sessions' memory limit) and
    how the coordinator chose them (`chosen`, said at start; jobs/schedule/devices.py). Recorded in
    run.json per worker. What the values depend on of it (the device, provider, options and batch
    shape that actually ran) is the family estimator's `execution` record, kept in every part and
    compared on resume (extract/keypoints/execution.py), not in the fingerprint."""
    out: dict[str, Any] = {"batch_size": batch_size or DEFAULT_BATCH, "device": device or "auto"}
    if gpu_memory:
        out["gpu_memory"] = int(gpu_memory)
    return out | ({"chosen": chosen} if chosen else {})


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> Estimator:
    """The estimator these settings name, built in this process (models loaded, graph started)."""
    return family(estimator_name(settings)).open_estimator(settings, num_threads)
