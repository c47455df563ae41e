"""One clip or one folder: `--dataset clip.mp4`, a folder of frames, or a folder of frame folders.

What a researcher tries first, before writing a manifest. Three layouts, one reader:
- `video-file`: one video file; one video named by the file's stem.
- `frame-folder`: a folder holding PNG/JPEG frames directly; one video named by the folder.
- `frame-folders`: a folder whose subfolders hold the frames; one video per subfolder.
Every video is in split `all` (a folder of videos or a manifest gives splits). The dataset's root
is the folder the clip or frame folder lies in (for a folder of frame folders, that folder), so
rows name `clip.mp4#frame=3` or `name/images0001.png` as other corpora do; the run's input stays
the path as given (its key: extract.corpora.input_key). Tried after every other reader, so a
corpus or a folder of videos is never taken for one of these; `almost` says, for a path none
reads, which of these it nearly is.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from phoenix_keypoints.extract.corpora.base import SPLITS, Dataset, DatasetError
from phoenix_keypoints.extract.corpora.entries import IMAGE_NAMES, Listing, build, is_video
from phoenix_keypoints.extract.sources.base import is_utf8, shown

SPLIT = "all"
LAYOUTS = ("video-file", "frame-folder", "frame-folders")
_SHOWN = 4


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError:
        return []


def _has_frames(folder: Path) -> bool:
    """Whether the folder holds a PNG/JPEG file directly."""
    return any(IMAGE_NAMES.fullmatch(e.name) and e.is_file() for e in _entries(folder))


def frame_folders(root: Path) -> list[str]:
    """The visible subfolders of root that hold frames directly, by name (any bytes)."""
    return [e.name for e in _entries(root) if e.is_dir() and _has_frames(Path(e.path))]


def _not_utf8(root: Path, what: str) -> str:
    """Why a one-video input cannot be read: its name would be the video's in every output."""
    return (f"--dataset {shown(str(root))}: the {what}'s name is not UTF-8, and it would name the "
            "video in every output (Parquet and JSON hold text): rename it, or copy it under a "
            "UTF-8 name.")


def layout_of(root: Path) -> str | None:
    """Which of the three layouts root is, or None."""
    if root.is_file():
        return "video-file" if is_video(root.name) else None
    if not root.is_dir():
        return None
    if _has_frames(root):
        return "frame-folder"
    return "frame-folders" if frame_folders(root) else None


class Clips:
    name = "clips"
    layouts = LAYOUTS
    placeholder = "--dataset CLIP_OR_FOLDER"

    def detect(self, root: Path) -> bool:
        return layout_of(root) is not None

    def read(self, root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None, max_per_split: int | None = None) -> Dataset:
        layout = layout_of(root)
        real = Path(os.path.realpath(root))
        odd: list[str] = []
        if layout == "frame-folders":  # a subfolder that no output could name is skipped, named
            top, names = real, frame_folders(real)
            odd = [shown(n) for n in names if not is_utf8(n)]
            names = [n for n in names if is_utf8(n)]
            listings = [Listing(SPLIT, n, n, source=str(real / n)) for n in names]
        else:  # one clip, or one folder of frames: one video, read from the folder it lies in
            if not is_utf8(real.name):
                raise DatasetError(_not_utf8(root, "file" if layout == "video-file" else "folder"))
            top, names = real.parent, [real.name]
            name = real.stem if layout == "video-file" else real.name
            listings = [Listing(SPLIT, name, real.name, source=str(real))]
        digest = hashlib.sha256(f"{layout}\0".encode() + "\0".join(names).encode()).hexdigest()
        ds = build(top, layout or "", listings, digest, splits, videos, limit_videos,
                   max_per_split=max_per_split,
                   hint=f"Expected PNG/JPEG frames in {real} or in its subfolders, or a video file.")
        ds.entry = "" if layout == "frame-folders" else real.name  # the input is root/entry
        ds.unlisted = [f"{n} (its name is not UTF-8: rename it to read it)" for n in odd]
        return ds


def almost(root: Path) -> str:
    """For a path no reader takes: which of one clip, a folder of frames or a folder of frame
    folders it nearly is, and what it lacks ("" when it is none of them)."""
    if root.is_file():
        return (f" It is a file, but not a video file ({', '.join(_SUFFIXES)}, ...): one clip is "
                "a video file; a list of videos is a manifest (--manifest, .csv/.tsv/.jsonl).")
    if not root.is_dir():
        return ""
    entries = _entries(root)
    files = [e.name for e in entries if e.is_file()][:_SHOWN]
    subs = [e.name + "/" for e in entries if e.is_dir()][:_SHOWN]
    deeper = next((f"{root}/{s}" for s in subs if frame_folders(root / s)), "")
    if deeper:
        return (f" It is a folder of folders; its subfolder {deeper} holds frame folders: give "
                f"--dataset {deeper} (a folder of frame folders, one video each).")
    held = ", ".join(files + subs) or "nothing visible"
    return (f" It is a folder, but neither a folder of frames (PNG/JPEG files in it) nor a folder "
            f"of frame folders (subfolders holding PNG/JPEG files): it holds {held}.")


_SUFFIXES = (".mp4", ".webm", ".mkv", ".mov", ".avi")

CORPUS = Clips()
