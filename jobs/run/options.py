"""What the user asked for on the command line, and how it meets a run folder's recorded options."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from phoenix_keypoints.extract.corpora.base import SPLITS
from phoenix_keypoints.extract.keypoints.estimator import (
    DEFAULT_FAMILY,
    RUNTIME,
    declaration,
    family,
    runtime,
)
from phoenix_keypoints.extract.keypoints.frames import MAX_PIXELS, MAX_SCANS
from phoenix_keypoints.jobs.run.identity import input_conflict
from phoenix_keypoints.jobs.rundir.made_under import MadeUnder
from phoenix_keypoints.jobs.rundir.runinfo import PlanOptions, RunInfo


@dataclass
class RunOptions:
    """What decides a run's output, as asked (None: not asked, so a resume keeps the run's own)."""

    dataset: Path | None = None
    splits: tuple[str, ...] | None = None
    videos: tuple[str, ...] | None = None
    limit_videos: int | None = None
    chunk_frames: int | None = None
    max_samples_per_split: int | None = None
    max_pixels: int | None = None
    follow_links: bool | None = None
    estimator: str | None = None
    max_scans: int | None = None
    # family -> what its own options asked, as it records them (its `asked_settings`: the
    # default family's options, another family's model files); a family not asked is absent
    asked: dict[str, dict] = field(default_factory=dict)
    # the command line as typed (after the program's name): a refusal's hint repeats it whole
    typed: tuple[str, ...] = ()
    manifest_root: Path | None = None  # --manifest-root: the folder a manifest's paths lie under

    def family_asked(self) -> str | None:
        """The family asked: --estimator, or the one another family's options imply (a
        family's --detector, --pose-model), or None."""
        return self.estimator or next((n for n in self.asked if n != DEFAULT_FAMILY), None)

    def resolved(self) -> PlanOptions:
        """The options of a new run: what was asked, defaults for the rest."""
        estimator = self.family_asked() or DEFAULT_FAMILY
        return PlanOptions(
            splits=list(self.splits or SPLITS),
            videos=list(self.videos) if self.videos else None,
            limit_videos=self.limit_videos,
            chunk_frames=self.chunk_frames,
            max_samples_per_split=self.max_samples_per_split,
            max_pixels=self.max_pixels or MAX_PIXELS,
            max_scans=self.max_scans or MAX_SCANS,
            follow_links=self.follow_links is not False,
            estimator=estimator,
            recorded=_settings_of(estimator, self.asked.get(estimator), {}),
        )

    def settings(self, info: RunInfo | None) -> dict:
        """The estimator settings workers need: the run's own when resuming (a family's options as
        given now, when given: a resume checks they are the same, model files the same bytes),
        else what was asked."""
        if info is None:
            return self.resolved().settings()
        have = info.options
        asked = self.asked.get(have.estimator) if self.family_asked() in (None, have.estimator) \
            else None
        return replace(have, recorded=_settings_of(have.estimator, asked, have.recorded)).settings()

    def conflicts(self, info: RunInfo, num_shards: int | None = None) -> list[str]:
        """What was asked that differs from the run recorded in `info` (empty: it may resume)."""
        have = info.options
        asked = PlanOptions(
            splits=list(self.splits) if self.splits else have.splits,
            videos=list(self.videos) if self.videos else have.videos,
            limit_videos=self.limit_videos if self.limit_videos is not None else have.limit_videos,
            chunk_frames=self.chunk_frames or have.chunk_frames,
            max_samples_per_split=self.max_samples_per_split
            if self.max_samples_per_split is not None else have.max_samples_per_split,
            max_pixels=self.max_pixels or have.max_pixels,
            max_scans=self.max_scans or have.max_scans,
            follow_links=have.follow_links if self.follow_links is None else self.follow_links,
            estimator=have.estimator, recorded=have.recorded,
        )
        family_asked = self.family_asked() or have.estimator
        diffs = [f"estimator ({have.estimator} when planned, {family_asked} asked)"] \
            if family_asked != have.estimator else []
        diffs += [f"{k} ({_said(getattr(have, k))} when planned, {_said(getattr(asked, k))} "
                  "asked)" for k in vars(asked) if getattr(asked, k) != getattr(have, k)]
        for name, options in self.asked.items():  # each family's options against its record
            recorded = have.recorded if name == have.estimator else {}
            diffs += family(name).settings_conflicts(options, recorded)
        if dataset := input_conflict(self.dataset, info):
            diffs.insert(0, dataset)
        if self.manifest_root is not None and \
                os.path.realpath(self.manifest_root) != info.dataset.root:
            diffs.append(f"manifest_root ({info.dataset.root} when planned, {self.manifest_root} "
                         "asked)")
        if num_shards is not None and num_shards != info.num_shards:
            diffs.append(f"num_shards (fixed at {info.num_shards} when planned)")
        return diffs


def _said(value: object) -> str:
    """A recorded option's value as a message names it (a list as typed, None as none)."""
    if value is None:
        return "none"
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _settings_of(name: str, asked: dict | None, recorded: dict) -> dict:
    """What a run of family `name` records: its options asked over those recorded (the family's
    `settings_of`; by default what was asked over what was recorded)."""
    return family(name).settings_of(asked, recorded)


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
    batch_size: int | None = None  # frames per model call of a family that batches (None: default)
    device: str | None = None  # --device of a family that batches: auto (None), cpu, cuda
    # what one model call may take (extract/keypoints/model_calls.py; None: the default)
    model_deadline: float | None = None  # --model-deadline: seconds per input a call holds
    model_memory: int | None = None  # --model-memory: MiB per input a call holds
    gpu_memory: int | None = None  # bytes of its card each worker may take (jobs.schedule.devices)
    chosen: str = ""  # how workers per GPU and the batch size were chosen, as said at start

    def worker_settings(self, info: RunInfo | None) -> dict:
        """The settings workers are started with: the estimator's, and for a family that batches how
        to run it (batch size, device, GPU memory, model limits; recorded in run.json; what of it
        decides values is the estimator's execution record, kept in each part)."""
        settings = self.options.settings(info)
        if declaration(settings).batches:
            limits = {"model_deadline": self.model_deadline, "model_memory": self.model_memory}
            settings = {**settings, RUNTIME: runtime(self.batch_size, self.device, self.gpu_memory,
                                                     self.chosen)
                        | {k: v for k, v in limits.items() if v is not None}}
        return settings

    def as_made(self, made: MadeUnder) -> RunRequest:
        """This request resuming parts made under `made` (jobs/rundir/made_under.py): --device and
        --batch-size, where not given, are the parts' (so a resume computes what they were
        computed under, whatever this node's defaults)."""
        if not made.execution:
            return self
        device, batch = made.resumed_with(self.device, self.batch_size)
        return replace(self, device=device, batch_size=batch)
