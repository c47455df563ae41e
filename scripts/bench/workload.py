"""The benchmark workload: real signing frames, repeated under new video names, PHOENIX-2014-T layout.

From the shared sample: train/signer_demo-1 (58 frames, face + hands) and
train/fingerspelling_hand-1 (80 frames, one hand), alternated so that every chunk holds the same
mix. Frame folders are symlinks, so a large workload costs no disk. Without ../shared the embedded
sample's videos (extract.sample.build_sample) are used instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from common import SHARED_SAMPLE

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.corpora.phoenix import FRAMES_DIR
from phoenix_keypoints.extract.sample import build_sample

HEADER = "name|video|start|end|speaker|orth|translation"


def source_videos(tmp: Path) -> tuple[str, list[Path]]:
    """(where from, frame folders to repeat)."""
    train = SHARED_SAMPLE / FRAMES_DIR / "train"
    shared = [train / "signer_demo-1", train / "fingerspelling_hand-1"]
    if all(d.is_dir() for d in shared):
        return "shared sample (signer_demo-1, fingerspelling_hand-1)", shared
    root = build_sample(tmp / "embedded")
    ds = discover(root)
    return "embedded sample (extract.sample)", [root / v.folder for v in ds.videos if v.files]


def _write_corpus(manual: Path, train_lines: list[str]) -> None:
    """train's corpus, and header-only dev/test files (a release always has all three)."""
    (manual / "PHOENIX-2014-T.train.corpus.csv").write_text("\n".join(train_lines) + "\n")
    for split in ("dev", "test"):
        (manual / f"PHOENIX-2014-T.{split}.corpus.csv").write_text(HEADER + "\n")


def frame_count(folder: Path) -> int:
    return len(list(folder.glob("*.png")))


def build_workload(root: Path, copies: int, frames_per_video: int | None = None) -> dict:
    """A dataset of `copies` x each source video, in split train; returns its summary.

    frames_per_video keeps only the source videos of exactly that length, so that a workload
    named "8 x 58" is 8 videos of 58 frames each.
    """
    shutil.rmtree(root, ignore_errors=True)
    origin, sources = source_videos(root.parent)
    if frames_per_video is not None:
        sources = [s for s in sources if frame_count(s) == frames_per_video]
        if not sources:
            raise SystemExit(f"no source video of {frames_per_video} frames in the {origin}")
    manual = root / "annotations" / "manual"
    manual.mkdir(parents=True)
    frames_dir = root / FRAMES_DIR / "train"
    frames_dir.mkdir(parents=True)
    lines, frames = [HEADER], 0
    n = 0
    for i in range(copies):
        for src in sources:
            name = f"bench{n:05d}-{src.name}"
            (frames_dir / name).symlink_to(src.resolve(), target_is_directory=True)
            lines.append(f"{name}|{name}/1/*.png|-1|-1|SignerB|BENCH|{src.name} copy {i}")
            frames += frame_count(src)
            n += 1
    _write_corpus(manual, lines)
    return {"root": str(root), "origin": origin, "videos": n, "frames": frames,
            "per_source": {s.name: frame_count(s) for s in sources}}


def build_one_frame(root: Path) -> dict:
    """A dataset of one video with one frame: a run on it costs only the job's fixed start-up."""
    shutil.rmtree(root, ignore_errors=True)
    _, sources = source_videos(root.parent)
    manual = root / "annotations" / "manual"
    manual.mkdir(parents=True)
    folder = root / FRAMES_DIR / "train" / "one-1"
    folder.mkdir(parents=True)
    first = sorted(sources[0].glob("*.png"))[0]
    (folder / "images0001.png").symlink_to(first.resolve())
    _write_corpus(manual, [HEADER, "one-1|one-1/1/*.png|-1|-1|SignerB|BENCH|one frame"])
    return {"root": str(root), "videos": 1, "frames": 1}
