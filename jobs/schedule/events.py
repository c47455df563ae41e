"""What the scheduler and its workers say to each other: typed, picklable, the same for every backend.

A backend (local processes, Ray actors, the simulator's fake) turns whatever its workers do into
these events, and the scheduler decides everything from them alone. So the failure policy, the
progress bar and the heartbeat cannot differ between backends, and a fake backend with a simulated
clock drives the very code that runs a real job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from phoenix_keypoints.extract.keypoints.frames import MAX_PIXELS, MAX_SCANS
from phoenix_keypoints.extract.sources.base import Ref


@dataclass(frozen=True)
class VideoRef:
    """One video of a chunk, as a worker needs it: where its frames are, in frame order."""

    split: str
    name: str
    folder: str  # the frame source's locator, relative to the dataset root
    files: tuple[str, ...]
    source: str = "folder"  # a frame source's kind (extract/sources/)
    start: int = 0  # 0-based index in the source of the first frame
    count: int = 0  # frames, for a source whose frames have no names (0: len(files))

    def ref(self, max_pixels: int = MAX_PIXELS, max_scans: int = MAX_SCANS) -> Ref:
        """What the frame source reads in the worker."""
        return Ref(self.source, self.folder, self.files, self.start,
                   self.count if self.count or self.files else 0, max_pixels, max_scans)

    @property
    def num_frames(self) -> int:
        return len(self.files) if self.files else self.count


@dataclass(frozen=True)
class ChunkTask:
    """One chunk to extract and commit as one part; `skip` are videos already failed (no rows)."""

    chunk: int
    root: str  # dataset root
    fingerprint: str  # the run's: written into the part, checked when it is trusted
    videos: tuple[VideoRef, ...]
    skip: dict[str, str] = field(default_factory=dict)  # video -> why it has no rows
    max_pixels: int = MAX_PIXELS  # the run's --max-pixels
    max_scans: int = MAX_SCANS  # the run's --max-scans
    # the versions the run's values are made under (jobs.run.todo.same_versions): a worker with
    # others (a Ray actor on a node with another install) refuses the chunk before its first frame
    versions: dict[str, str] = field(default_factory=dict)
    # how the run's values are computed (extract.keypoints.execution: the committed parts', else
    # the first ready worker's): a worker computing otherwise refuses the chunk before its first frame
    execution: dict = field(default_factory=dict)
    # the chunk killed a worker before: its videos one at a time, none beside another (an
    # estimator's lanes), so a death is blamed on the video it happened in
    one_by_one: bool = False

    @property
    def frames(self) -> int:
        return sum(len(v.files) for v in self.videos if v.name not in self.skip)


@dataclass(frozen=True)
class Ready:
    """A worker built its graph and waits for chunks; where it runs, as it sees it."""

    slot: int
    pid: int
    host: str
    gpu: str  # its CUDA_VISIBLE_DEVICES ("" when none)
    cpus: tuple[int, ...]
    runtime: dict | None = None  # a family that batches: batch_size, device asked, providers that run


@dataclass(frozen=True)
class VideoStarted:
    """Sent before a video's first frame: a death from here on is pinned on this video."""

    slot: int
    chunk: int
    video: str


@dataclass(frozen=True)
class FramesDone:
    slot: int
    frames: int


@dataclass(frozen=True)
class Writing:
    """Every video of the chunk is done; its part is being written and committed."""

    slot: int
    chunk: int


@dataclass(frozen=True)
class Committed:
    """The chunk's part is on disk under its final name."""

    slot: int
    chunk: int
    rows: int


@dataclass(frozen=True)
class WriteFailed:
    """The part could not be written (disk full, permissions): not the chunk's fault, fatal."""

    slot: int
    chunk: int
    why: str


@dataclass(frozen=True)
class Refused:
    """The chunk cannot be done because of the run's input, not its frames (a model file that
    fails or answers nonsense on every frame): the run stops, exit 2, saying why."""

    slot: int
    chunk: int
    why: str
    code: int = 2  # 1 where the estimator's library, not the user's input, is at fault


@dataclass(frozen=True)
class Died:
    """The worker is gone; `how` is the signal, exit status or the backend's short reason."""

    slot: int
    how: str


Event = Ready | VideoStarted | FramesDone | Writing | Committed | WriteFailed | Refused | Died
