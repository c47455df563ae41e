"""What the user asked for on the command line, and how it meets a run folder's recorded options."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from phoenix_keypoints.extract.corpora.base import SPLITS
from phoenix_keypoints.extract.families.holistic.runner import HolisticOptions
from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_FAMILY, RUNTIME, runtime
from phoenix_keypoints.extract.keypoints.frames import MAX_PIXELS, MAX_SCANS
from phoenix_keypoints.jobs.run.identity import input_conflict
from phoenix_keypoints.jobs.rundir.runinfo import PlanOptions, RunInfo


@dataclass
class RunOptions:
    """What decides a run's output, as asked (None: not asked, so a resume keeps the run's own)."""

    dataset: Path | None = None
    splits: tuple[str, ...] | None = None
    videos: tuple[str, ...] | None = None
    limit_videos: int | None = None
    chunk_frames: int | None = None
    model_complexity: int | None = None
    max_samples_per_split: int | None = None
    min_detection_confidence: float | None = None
    min_tracking_confidence: float | None = None
    refine_face_landmarks: bool | None = None
    static_image_mode: bool | None = None
    smooth_landmarks: bool | None = None
    max_pixels: int | None = None
    follow_links: bool | None = None
    estimator: str | None = None
    wholebody: dict | None = None  # --detector/--pose-model as recorded (jobs.run.models)
    max_scans: int | None = None

    def _holistic(self, have: dict | None = None) -> dict:
        """Holistic's options: what was asked, else the run's own (`have`: a recorded dict, whose
        missing keys take the value that run used), else the defaults."""
        asked = {"model_complexity": self.model_complexity,
                 "min_detection_confidence": self.min_detection_confidence,
                 "min_tracking_confidence": self.min_tracking_confidence,
                 "refine_face_landmarks": self.refine_face_landmarks,
                 "static_image_mode": self.static_image_mode,
                 "smooth_landmarks": self.smooth_landmarks}
        base = HolisticOptions.from_dict(have or {}).as_dict()
        return base | {k: v for k, v in asked.items() if v is not None}

    def family_asked(self) -> str | None:
        """The family asked: --estimator, or the one the model flags imply (--detector,
        --pose-model: the whole-body family's), or None."""
        return self.estimator or ("wholebody" if self.wholebody else None)

    def resolved(self) -> PlanOptions:
        """The options of a new run: what was asked, defaults for the rest."""
        estimator = self.family_asked() or DEFAULT_FAMILY
        return PlanOptions(
            splits=list(self.splits or SPLITS),
            videos=list(self.videos) if self.videos else None,
            limit_videos=self.limit_videos,
            chunk_frames=self.chunk_frames,
            holistic=self._holistic() if estimator == "holistic" else {},
            max_samples_per_split=self.max_samples_per_split,
            max_pixels=self.max_pixels or MAX_PIXELS,
            max_scans=self.max_scans or MAX_SCANS,
            follow_links=self.follow_links is not False,
            estimator=estimator,
            wholebody=self.wholebody if estimator == "wholebody" else None,
        )

    def settings(self, info: RunInfo | None) -> dict:
        """The estimator settings workers need: the run's own when resuming (the model files as
        given now, when given: a resume checks they are the same bytes), else what was asked."""
        if info is None:
            return self.resolved().settings()
        if info.options.estimator == "holistic":
            return HolisticOptions.from_dict(info.options.holistic).as_dict()
        settings = info.options.settings()
        if self.wholebody and info.options.estimator == (self.estimator or "wholebody"):
            settings |= self.wholebody
        return settings

    def _estimator_conflicts(self, have: PlanOptions) -> list[str]:
        """The estimator asked against the run's, by name and by each model file's sha256."""
        asked = self.family_asked() or have.estimator
        if asked != have.estimator:
            return [f"estimator ({have.estimator} when planned, {asked} asked)"]
        diffs = []
        for key in ("detector", "pose_model"):
            mine, theirs = (self.wholebody or {}).get(key), (have.wholebody or {}).get(key)
            if mine and theirs and _model_bytes(mine) != _model_bytes(theirs):
                diffs.append(f"--{key.replace('_', '-')} ({theirs['path']} with sha256 "
                             f"{theirs['sha256'][:12]} when planned, {mine['path']} with "
                             f"{mine['sha256'][:12]} asked{_external_note(mine, theirs)})")
        for say in ("--point-set", "--decoder"):  # how the pose model's outputs are read
            mine, theirs = _reading(self.wholebody, say), _reading(have.wholebody, say)
            if mine and theirs and mine != theirs:
                diffs.append(f"{say} ({theirs} when planned, {mine} asked)")
        return diffs

    def conflicts(self, info: RunInfo, num_shards: int | None = None) -> list[str]:
        """What was asked that differs from the run recorded in `info` (empty: it may resume)."""
        have = info.options
        asked = PlanOptions(
            splits=list(self.splits) if self.splits else have.splits,
            videos=list(self.videos) if self.videos else have.videos,
            limit_videos=self.limit_videos if self.limit_videos is not None else have.limit_videos,
            chunk_frames=self.chunk_frames or have.chunk_frames,
            holistic=self._holistic(have.holistic),
            max_samples_per_split=self.max_samples_per_split
            if self.max_samples_per_split is not None else have.max_samples_per_split,
            max_pixels=self.max_pixels or have.max_pixels,
            max_scans=self.max_scans or have.max_scans,
            follow_links=have.follow_links if self.follow_links is None else self.follow_links,
            estimator=have.estimator, wholebody=have.wholebody,
        )
        diffs = self._estimator_conflicts(have)
        diffs += [k for k in vars(asked) if k != "holistic" and getattr(asked, k) != getattr(have, k)]
        recorded = HolisticOptions.from_dict(have.holistic).as_dict()
        diffs += [f"{k} ({recorded[k]} when planned, {v} asked)"
                  for k, v in asked.holistic.items() if recorded[k] != v]
        if dataset := input_conflict(self.dataset, info):
            diffs.insert(0, dataset)
        if num_shards is not None and num_shards != info.num_shards:
            diffs.append(f"num_shards (fixed at {info.num_shards} when planned)")
        return diffs


def _reading(record: dict | None, flag: str) -> str | None:
    """A recorded --point-set or heatmap --decoder (None where the record has none)."""
    if flag == "--point-set":
        return (record or {}).get("point_set")
    return ((record or {}).get("head") or {}).get("decoder")


def _model_bytes(record: dict) -> tuple:
    """What a model is: its file's sha256 and its external data files' (location, sha256)."""
    return record["sha256"], [(e["location"], e["sha256"]) for e in record.get("external_data", [])]


def _external_note(mine: dict, theirs: dict) -> str:
    if mine["sha256"] != theirs["sha256"]:
        return ""
    return "; the same file, other external data"


@dataclass
class RunRequest:
    """Everything `run` was asked (RunOptions: what decides the output; the rest: how to run)."""

    out: Path
    options: RunOptions = field(default_factory=RunOptions)
    num_gpus: int | None = None
    workers_per_gpu: int | None = None
    fresh: bool = False
    allow_partial: bool = False
    retry_failed: bool = False
    num_shards: int | None = None
    shard_index: int | None = None
    backend: str = "local"
    address: str | None = None
    pkl: Path | None = None  # --output_path: also export the keypoints to this pkl at the end
    frozen: bool = False  # keep the stored plan when the corpus changed (only warn)
    worker_flags: str = ""  # the worker-count flags as the user typed them, for warnings
    batch_size: int | None = None  # whole-body frames per model call (None: the default)
    device: str | None = None  # whole-body --device: auto (None), cpu, cuda

    def worker_settings(self, info: RunInfo | None) -> dict:
        """The settings workers are started with: the estimator's, and for a whole-body run how
        to run it (batch size, device; not the output's identity, so not recorded in parts)."""
        settings = self.options.settings(info)
        if settings.get("estimator") == "wholebody":
            settings = {**settings, RUNTIME: runtime(self.batch_size, self.device)}
        return settings
