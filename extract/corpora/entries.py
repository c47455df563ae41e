"""One listed video -> a Video, whatever holds its frames: a video file, a frame folder, a glob.

The corpora that list videos by path (a folder of videos, a manifest, How2Sign, CSL-Daily) share
this: which frame source a path is, the scan of that source, and a frame range.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from phoenix_keypoints.extract.corpora.base import (
    SPLITS,
    Dataset,
    DatasetError,
    Video,
    select,
    unique_names,
)
from phoenix_keypoints.extract.sources.files import not_regular
from phoenix_keypoints.extract.sources.folder import FolderSource
from phoenix_keypoints.extract.sources.video import VIDEO_SUFFIXES, VideoSource

# Frame files of a folder given without a pattern: any visible PNG or JPEG.
IMAGE_NAMES = re.compile(r"[^.].*\.(png|jpe?g)", re.IGNORECASE | re.DOTALL)
_FOLDERS = FolderSource()
_VIDEOS = VideoSource()


@dataclass(frozen=True)
class Listing:
    """A video as a corpus lists it: its name, split, path (relative to root) and what it says."""

    split: str
    name: str
    path: str  # a video file, a frame folder, or a glob of frame files
    source: str  # "file:line", for messages and duplicate names
    start: int | None = None  # 1-based inclusive frames
    end: int | None = None
    start_s: float | None = None  # or seconds: frames with start_s <= time < end_s
    end_s: float | None = None
    speaker: str = ""
    gloss: str = ""
    translation: str = ""
    extra: str = ""  # other columns, one JSON object
    glob: bool = False  # `path` may be a glob (a manifest's): names found on disk are literal


def spelled(root: Path, path: str) -> str:
    """The path as the one spelling a plan keeps, so that a file is compared by the file it names:
    `./a//b.mp4` is `a/b.mp4`, and an absolute path into root (as typed, or through links to
    root's folder) is made relative to it. Anything else is left as written (a path that leaves
    root keeps that problem)."""
    if not isinstance(root, os.PathLike) or path.startswith("\\"):
        return path
    if not path.startswith("/"):
        norm = posixpath.normpath(path)
        return path if norm.startswith("../") or norm in ("..", ".") else norm
    for base in (os.path.abspath(root), os.path.realpath(root)):
        for whole in (posixpath.normpath(path),
                      os.path.join(os.path.realpath(posixpath.dirname(path)), posixpath.basename(path))):
            if whole.startswith(base.rstrip("/") + "/"):
                return whole[len(base.rstrip("/")) + 1:]
    return path


def _outside(path: str) -> bool:
    p = PurePosixPath(path)
    return path.startswith("/") or bool(re.match(r"^[A-Za-z]:", path)) or ".." in p.parts


def is_glob(root: Path, path: str) -> bool:
    """Whether a listed path is a glob: its name holds `*`, `?` or `[` and nothing on disk has
    that very name (`clip[1].mp4` that exists is that file)."""
    return any(c in PurePosixPath(path).name for c in "*?[") and not os.path.lexists(root / path)


def is_video(path: str) -> bool:
    return path.lower().endswith(VIDEO_SUFFIXES)


def _slice(files: tuple[str, ...], e: Listing) -> tuple[tuple[str, ...], str]:
    """A frame folder's files cut to the listing's 1-based inclusive range."""
    if e.start_s is not None or e.end_s is not None:
        return (), "a range in seconds needs a video file (frame files have no times)"
    if e.start is None and e.end is None:
        return files, ""
    first, last = e.start or 1, len(files) if e.end in (None, -1) else e.end
    if first < 1 or last < first or last > len(files):
        return (), f"range {first}-{last} does not fit the {len(files)} frame files"
    return files[first - 1:last], ""


def to_video(root: Path, e: Listing) -> Video:
    """The listing scanned by its frame source, or with the problem that keeps it out."""
    meta = dict(speaker=e.speaker, gloss=e.gloss, translation=e.translation, extra=e.extra)
    path = spelled(root, e.path)
    if _outside(path):
        return Video(e.split, e.name, path, (), problem=f"path {path!r} leaves the dataset's folder "
                     "(absolute or '..'): paths are relative to it", **meta)
    if e.glob and is_glob(root, path):  # a glob of frame files
        folder = str(PurePosixPath(path).parent)
        if any(c in folder for c in "*?[") and not (root / folder).is_dir():
            return Video(e.split, e.name, path, (), problem=f"path {path!r}: a glob picks frame "
                         "files in one folder (frames/a/*.png); its folders are named plainly",
                         **meta)
        pattern = re.compile(fnmatch.translate(PurePosixPath(path).name), re.DOTALL)
        scan = _FOLDERS.scan(root, folder, pattern)
    elif why := not_regular(root / path):  # a link to a device, a FIFO, /proc: never opened
        return Video(e.split, e.name, path, (), problem=why, **meta)
    elif is_video(path) or (root / path).is_file():
        s = _VIDEOS.scan(root, path, e.start, e.end, e.start_s, e.end_s)
        return Video(e.split, e.name, path, (), problem=s.problem, note=s.note,
                     source="video", count=s.count, start=s.start, **meta)
    else:
        scan = _FOLDERS.scan(root, path, IMAGE_NAMES)
        if scan.problem == "no folder" and not (root / path).exists():
            scan = type(scan)(problem=f"nothing at {path}", locator=path)
    files, problem = _slice(scan.files, e) if not scan.problem else ((), scan.problem)
    return Video(e.split, e.name, scan.locator or path, files, problem=problem,
                 ignored=scan.ignored, frame_links=scan.links, **meta)


def pick_splits(present: set[str], splits: tuple[str, ...] | list[str]) -> set[str]:
    """The splits to read: all the corpus has unless --splits named others (the default names
    PHOENIX's three, so it stands for "every split")."""
    if tuple(splits) == SPLITS:
        return present
    absent = [s for s in splits if s not in present]
    if absent:
        raise DatasetError(f"--splits: no video in split(s) {', '.join(absent)}; this corpus has "
                           f"{', '.join(sorted(present)) or 'no video'}.")
    return set(splits)


def build(root: Path, layout: str, listings: list[Listing], digest: str,
          splits: tuple[str, ...] | list[str], videos: Iterable[str] | None,
          limit_videos: int | None, hint: str = "", fix: str = "",
          max_per_split: int | None = None) -> Dataset:
    """The Dataset of a corpus's listings: names checked unique, selection, scan, output order."""
    listed = unique_names(listings, fix=fix) if fix else unique_names(listings)
    keep = pick_splits({e.split for e in listings}, splits)
    rows = select([e for e in listings if e.split in keep], listed, sorted(keep), videos,
                  limit_videos, max_per_split)
    out = [to_video(root, e) for e in rows]
    out.sort(key=lambda v: (v.split, v.name))
    return Dataset(root, layout, out, [], digest, hint)


def split_of(folder: str) -> str | None:
    """A first folder level that names a split: train, dev, test; `val` (How2Sign's, and many
    others') is the dev split and named `dev`, as PHOENIX names it."""
    name = folder.lower()
    return {"train": "train", "dev": "dev", "val": "dev", "test": "test"}.get(name)
