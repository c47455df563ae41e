"""A folder of video files: every video under it, like pose-format's videos_to_poses.

Each video is named by its file name without extension and lies in the split its first folder
level names (train, dev, test; `val` is named `dev`); a video outside such a folder is in split
`all`. Hidden files and folders are skipped. Two videos with one name in a split (`a.mp4` and
`a.webm`, or the same name in two subfolders) are refused with both paths: give them different
names, or list them in a manifest (--manifest) with a `name` column.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from phoenix_keypoints.extract.corpora.base import SPLITS, Dataset, DatasetError
from phoenix_keypoints.extract.corpora.entries import Listing, build, is_video, split_of
from phoenix_keypoints.extract.sources.folder import walk

LAYOUT = "videos"
UNSPLIT = "all"


def video_files(root: Path, not_utf8: list[str] | None = None) -> list[str]:
    """Every visible video file under root (a folder, or one inside an archive), relative, posix,
    sorted; names that are no UTF-8 go to `not_utf8` instead."""
    found = []
    for folder, dirs, files in walk(root, not_utf8):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = PurePosixPath(folder)
        found.extend(str(rel / f) for f in files if not f.startswith(".") and is_video(f))
    return sorted(found)


class Videos:
    name = LAYOUT
    placeholder = "--dataset VIDEO_FOLDER"

    def detect(self, root: Path) -> bool:
        return root.is_dir() and any(True for _ in _first(root))

    def read(self, root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None, max_per_split: int | None = None) -> Dataset:
        odd: list[str] = []
        paths = video_files(root, odd)
        if not paths:
            raise DatasetError(f"--dataset {root}: no video file ({', '.join(_SHOWN_SUFFIXES)}, ...).")
        listings = []
        for p in paths:
            parts = PurePosixPath(p).parts
            split = (split_of(parts[0]) if len(parts) > 1 else None) or UNSPLIT
            listings.append(Listing(split, PurePosixPath(p).stem, p, source=str(root / p)))
        digest = hashlib.sha256("\0".join(paths).encode()).hexdigest()
        ds = build(root, LAYOUT, listings, digest, splits, videos, limit_videos,
                   max_per_split=max_per_split,
                   hint=f"Expected video files under {root} (train/, dev/ or val/, test/ for splits).",
                   fix="Rename one of the files, or list them in a manifest (--manifest) with "
                       "distinct names.")
        ds.unlisted = [f"{name} (its name is not UTF-8: rename it to read it)" for name in odd]
        return ds


_SHOWN_SUFFIXES = (".mp4", ".webm", ".mkv", ".mov", ".avi")


def _first(root: Path) -> Iterable[str]:
    """Video files under root, lazily (detection stops at the first)."""
    for folder, dirs, files in walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if not f.startswith(".") and is_video(f):
                yield f"{folder}/{f}"


CORPUS = Videos()
