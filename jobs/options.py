"""What the user asked for on the command line, and how it meets a run folder's recorded options."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from extract.corpora.base import SPLITS
from extract.holistic import HolisticOptions
from jobs.runinfo import PlanOptions, RunInfo


@dataclass
class RunOptions:
    """What decides a run's output, as asked (None: not asked, so a resume keeps the run's own)."""

    dataset: Path | None = None
    splits: tuple[str, ...] | None = None
    videos: tuple[str, ...] | None = None
    limit_videos: int | None = None
    chunk_frames: int | None = None
    model_complexity: int | None = None

    def resolved(self) -> PlanOptions:
        """The options of a new run: what was asked, defaults for the rest."""
        return PlanOptions(
            splits=list(self.splits or SPLITS),
            videos=list(self.videos) if self.videos else None,
            limit_videos=self.limit_videos,
            chunk_frames=self.chunk_frames,
            holistic=HolisticOptions(model_complexity=self.model_complexity or 1).as_dict(),
        )

    def holistic(self, info: RunInfo | None) -> dict:
        """The graph options workers need: the run's own when resuming, else what was asked."""
        return dict(info.options.holistic) if info else self.resolved().holistic

    def conflicts(self, info: RunInfo, num_shards: int | None = None) -> list[str]:
        """What was asked that differs from the run recorded in `info` (empty: it may resume)."""
        have = info.options
        asked = PlanOptions(
            splits=list(self.splits) if self.splits else have.splits,
            videos=list(self.videos) if self.videos else have.videos,
            limit_videos=self.limit_videos if self.limit_videos is not None else have.limit_videos,
            chunk_frames=self.chunk_frames or have.chunk_frames,
            holistic=HolisticOptions(model_complexity=self.model_complexity
                                     or have.holistic["model_complexity"]).as_dict(),
        )
        diffs = [k for k in vars(asked) if getattr(asked, k) != getattr(have, k)]
        if self.dataset is not None and str(self.dataset.resolve()) != info.dataset.root:
            diffs.insert(0, f"dataset ({info.dataset.root})")
        if num_shards is not None and num_shards != info.num_shards:
            diffs.append(f"num_shards (fixed at {info.num_shards} when planned)")
        return diffs


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
