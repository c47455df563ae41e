"""run.json as one typed record: made, loaded, validated and saved here and nowhere else.

run.json says what a run folder holds: which dataset and options (their fingerprint ties every part
to them), how the chunks were planned, how many shards share it, and what the last merge wrote. Its
`format` changes whenever the meaning of a run folder changes; another format is refused with a
message rather than misread.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_FAMILY
from phoenix_keypoints.jobs import messages

RUN_FORMAT = 2


class RunInfoError(ValueError):
    """run.json does not have the shape this version writes."""


@dataclass
class PlanOptions:
    """What decides a run's output; fingerprinted, so a resume can never mix two runs' parts.

    run.json records the family's settings under the family's name (`record`, `from_record`),
    only the run's own family's; the fingerprint still counts the default family's key ({} when
    another family runs), as run.json had it before, so no run planned then changes its own."""

    splits: list[str]
    videos: list[str] | None
    limit_videos: int | None
    chunk_frames: int | None  # None: sizes chosen by the plan
    max_samples_per_split: int | None = None  # first N videos of each split by folder name
    max_pixels: int | None = None  # frames above it are too_large (None: a run planned before it)
    max_scans: int | None = None  # JPEGs of more scans are over_budget (None: planned before it)
    follow_links: bool = True  # False: videos behind a link leaving the dataset are left out
    estimator: str = DEFAULT_FAMILY  # --estimator (extract/keypoints/estimator.py)
    # the family's settings as recorded: the default family's options; another family's what it
    # records (a family with model files: each file's path, sha256, size, input size)
    recorded: dict[str, Any] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        """What workers build their estimator from: the default family's options dict exactly as
        before the estimator was a choice, or another family's settings naming it."""
        if self.estimator == DEFAULT_FAMILY:
            return dict(self.recorded)
        return {"estimator": self.estimator, **self.recorded}

    def record(self) -> dict[str, Any]:
        """run.json's `options`: each field, the family's settings under its name."""
        out = asdict(self)
        del out["recorded"]
        out[self.estimator] = dict(self.recorded)
        return out

    @classmethod
    def from_record(cls, raw: Any) -> PlanOptions:
        """The options of run.json (record); another family's key left empty (an earlier
        version wrote `null` for the one that did not run) is dropped."""
        if not isinstance(raw, dict):
            raise RunInfoError("'options' is not an object")
        raw = dict(raw)
        estimator = raw.get("estimator", DEFAULT_FAMILY)
        recorded = raw.pop(estimator, None) or {}
        names = {f.name for f in fields(cls)} - {"recorded"}
        for key in [k for k in raw if k not in names and raw[k] in (None, {})]:
            del raw[key]
        if not isinstance(recorded, dict):
            raise RunInfoError(f"'options': {estimator!r} is not an object")
        return _record(cls, {"options": {**raw, "recorded": recorded}}, "options")

    @property
    def pixel_limit(self) -> int:
        """--max-pixels as the run uses it (the default for a run planned before the option)."""
        from phoenix_keypoints.extract.keypoints.frames import MAX_PIXELS

        return self.max_pixels or MAX_PIXELS

    @property
    def scan_limit(self) -> int:
        """--max-scans as the run uses it (the default for a run planned before the option)."""
        from phoenix_keypoints.extract.keypoints.frames import MAX_SCANS

        return self.max_scans or MAX_SCANS


@dataclass
class DatasetInfo:
    root: str
    layout: str
    fingerprint: str
    videos: int
    frames: int
    problems: dict[str, str] = field(default_factory=dict)  # listed video -> why it has no rows
    # how many listed videos have a problem: `problems` holds the first ones only (all are in the
    # plan's `problem` column), so 1,000,000 missing rows make no 30 MB run.json; None: all listed
    problems_total: int | None = None
    unlisted_folders: list[str] = field(default_factory=list)
    # entries of frame folders that are no frames (hidden files, other names, subfolders): skipped
    ignored_files: int = 0
    ignored_reasons: dict[str, int] = field(default_factory=dict)  # reason -> entries
    ignored_examples: list[str] = field(default_factory=list)  # "<split>/<video>/<name> (reason)"
    given: str = ""  # --dataset (or --manifest) as the user typed it, for messages and the legacy pkl
    key: str = ""  # its identity (extract.corpora.input_key): what a resume's --dataset is compared to
    manifest: str = ""  # the manifest's file name in root, when a manifest lists the videos
    entry: str = ""  # one clip or one frame folder: its name in root, the folder it lies in
    decoder: str = ""  # the video decoder and its version, when videos are decoded
    notes: dict[str, str] = field(default_factory=dict)  # video -> what its source noticed
    # what the input holds that a careful user should know (archive members stored twice or named
    # outside the archive), and the links followed: inside the dataset, and leaving it
    anomalies: list[str] = field(default_factory=list)
    links_inside: int = 0
    links_outside: int = 0
    links_outside_examples: list[str] = field(default_factory=list)  # "path -> target", the first
    moves: list[str] = field(default_factory=list)  # "old root -> new root" of each move followed


    @property
    def problem_count(self) -> int:
        """Listed videos that cannot be processed (problems names the first of them)."""
        return len(self.problems) if self.problems_total is None else self.problems_total

@dataclass
class PlanInfo:
    chunks: int
    videos: int
    frames: int
    seconds: float
    workers: int = 0  # the worker count the chunk sizes were chosen for
    cuts: str = ""  # digest of which videos are in which chunk


@dataclass
class MergeInfo:
    time: float
    seconds: float
    rows: int
    frames_per_split: dict[str, int]
    partial: bool
    missing_chunks: list[int] = field(default_factory=list)
    missing_videos: list[str] = field(default_factory=list)
    failed_videos: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)  # rows per status, most first
    worst_videos: dict[str, int] = field(default_factory=dict)  # most frames not ok: video -> n
    # keys of `versions` (what the values depend on) in which the merged parts differ
    mixed_versions: list[str] = field(default_factory=list)
    # how the merged parts' values were computed (extract.keypoints.execution), each record once:
    # one where the run is one computation (a batching family; empty for others and older parts)
    execution: list[dict] = field(default_factory=list)


@dataclass
class ExtractionInfo:
    """The last extraction's milestones (epoch seconds; None where it did not get there)."""

    workers: int
    chunks: int  # committed by it
    first_frame: float | None = None
    first_idle: float | None = None  # a worker first found nothing left to take
    last_frame: float | None = None
    ended: float | None = None
    # a family that batches, per worker slot: batch_size, device asked, the providers that ran
    # (how it ran, not what it wrote: not in the fingerprint)
    runtime: dict[str, dict] = field(default_factory=dict)


@dataclass
class PlanChange:
    """One re-plan after the corpus changed under the run: what changed and what it cost."""

    time: float
    before: str  # the run fingerprint before, and after
    after: str
    changes: dict[str, int]  # jobs.run.changes.PlanDiff.counts()
    summary: str  # what changed, with the first few names
    redo_videos: int = 0  # videos extracted because of it, in new_chunks
    redo_frames: int = 0
    new_chunks: list[int] = field(default_factory=list)
    retired_chunks: list[int] = field(default_factory=list)  # chunks none of whose videos is left
    kept_chunks: int = 0


@dataclass
class RunInfo:
    dataset: DatasetInfo
    options: PlanOptions
    plan: PlanInfo
    fingerprint: str
    # python, pyarrow and what the values depend on (extract.keypoints.versions): as planned; the
    # latter as the parts were made once a merge (or a resume under other versions with no part
    # committed yet) has written them
    versions: dict[str, str]
    num_shards: int = 1
    created: float = field(default_factory=time.time)
    format: int = RUN_FORMAT
    merge: MergeInfo | None = None
    merge_interrupted: bool = False  # a merge began after the last one finished and did not end
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)
    extraction: ExtractionInfo | None = None
    fabricated: bool = False
    exports: dict[str, dict[str, Any]] = field(default_factory=dict)  # pkl path -> outputs.pkl_record
    changes: list[PlanChange] = field(default_factory=list)  # re-plans, oldest first
    # "--detector old path -> new path" of each model file followed to where it moved (same bytes)
    model_moves: list[str] = field(default_factory=list)

    def value_versions(self) -> dict[str, str]:
        """The versions run.json records of what the run's values depend on
        (extract.keypoints.versions). A run.json written before `versions` held them all has
        onnxruntime in the model record and the video decoder in the dataset record."""
        from phoenix_keypoints.extract.keypoints.versions import DECODER, value_keys

        have = dict(self.versions)
        keys = value_keys(self.options.estimator, bool(self.dataset.decoder))
        for key in keys:  # a family's library version its settings recorded (onnxruntime)
            if key in self.options.recorded:
                have.setdefault(key, str(self.options.recorded[key]))
        if self.dataset.decoder:
            have.setdefault(DECODER, self.dataset.decoder)
        return {k: have.get(k, "not recorded") for k in keys}

    @classmethod
    def new(cls, dataset: DatasetInfo, options: PlanOptions, plan: PlanInfo, versions: dict[str, str],
            num_shards: int = 1) -> RunInfo:
        return cls(dataset, options, plan, fingerprint(dataset.fingerprint, options, plan.cuts),
                   versions, num_shards)

    # --- json ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["options"] = self.options.record()
        del out["merge_interrupted"]
        if self.merge_interrupted:
            out["merge"] = None  # present but empty: begun, not finished
        elif self.merge is None:
            del out["merge"]
        if self.extraction is None:
            del out["extraction"]
        if not self.exports:
            del out["exports"]
        if not self.changes:
            del out["changes"]
        if not self.model_moves:
            del out["model_moves"]
        return out

    @classmethod
    def from_json(cls, raw: Any) -> RunInfo:
        if not isinstance(raw, dict):
            raise RunInfoError("not a JSON object")
        if not reads_format(raw.get("format")):
            raise RunInfoError(f"format {format_named(raw.get('format'))}, this version reads "
                               f"{RUN_FORMAT}")
        merge = raw.get("merge")
        try:
            return cls(
                dataset=_record(DatasetInfo, raw, "dataset"),
                options=PlanOptions.from_record(raw["options"]),
                plan=_record(PlanInfo, raw, "plan"),
                fingerprint=str(raw["fingerprint"]),
                versions=dict(raw["versions"]),
                num_shards=int(raw.get("num_shards", 1)),
                created=float(raw["created"]),
                merge=_record(MergeInfo, raw, "merge") if merge else None,
                merge_interrupted="merge" in raw and merge is None,
                tensors=dict(raw.get("tensors", {})),
                extraction=_record(ExtractionInfo, raw, "extraction") if raw.get("extraction")
                else None,
                fabricated=bool(raw.get("fabricated", False)),
                exports=dict(raw.get("exports", {})),
                changes=[_record(PlanChange, {"c": c}, "c") for c in raw.get("changes", [])],
                model_moves=[str(m) for m in raw.get("model_moves", [])],
            )
        except KeyError as e:
            raise RunInfoError(f"no {e.args[0]!r}") from None
        except (TypeError, ValueError) as e:
            raise RunInfoError(str(e)) from None

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"


def reads_format(value: Any) -> bool:
    """Whether run.json's `format` is this version's: the number itself (`2.0`, `"2"` are not)."""
    return type(value) is int and value == RUN_FORMAT


def format_named(value: Any) -> str:
    """run.json's `format` as written: `"2"` (a string) is no 2, and a message must not say so."""
    if value is None:
        return "none"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{messages.terminal(shown)} (a {_JSON_TYPES.get(type(value), 'value')})"


_JSON_TYPES = {str: "string", float: "number", bool: "boolean", list: "list", dict: "object",
               type(None): "null"}


def _record(cls: type, raw: dict[str, Any], key: str) -> Any:
    """raw[key] as a cls, every field there (those with defaults may be missing)."""
    value = raw[key]
    if not isinstance(value, dict):
        raise RunInfoError(f"{key!r} is not an object")
    names = {f.name for f in fields(cls)}
    unknown = set(value) - names
    if unknown:
        raise RunInfoError(f"{key!r} has unknown field(s) {sorted(unknown)}")
    try:
        return cls(**value)
    except TypeError as e:
        raise RunInfoError(f"{key!r}: {e}") from None


def fingerprint(dataset_fp: str, options: PlanOptions, cuts: str) -> str:
    """Ties parts to one dataset, one set of options and one cut of the videos into chunks."""
    opts = options.record()
    if opts["estimator"] == DEFAULT_FAMILY:  # such a run keeps the fingerprint it had before
        del opts["estimator"]
    else:  # run.json had the default family's key empty beside another's: fingerprinted so
        opts.setdefault(DEFAULT_FAMILY, {})
    blob = json.dumps({"dataset": dataset_fp, "options": opts, "cuts": cuts}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()
