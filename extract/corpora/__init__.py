"""The corpus readers, and `discover`: which corpus a folder is, and its selected videos.

Readers are tried in CORPORA's order; the first whose `detect` says yes reads the folder (a
manifest is never detected: it is asked for with --manifest). See extract/corpora/base.py for what
a reader produces and how to add one.

May import: extract.sources, extract.keypoints.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from phoenix_keypoints.extract.corpora.base import SPLITS, Corpus, Dataset, DatasetError
from phoenix_keypoints.extract.corpora.base import no_frames_message as _generic_message
from phoenix_keypoints.extract.sources import archive, links
from phoenix_keypoints.extract.sources.archive import ArchivePath

# name -> module holding CORPUS, in detection order (the most specific layouts first)
CORPORA: dict[str, str] = {
    "phoenix": "phoenix_keypoints.extract.corpora.phoenix",
    "csl-daily": "phoenix_keypoints.extract.corpora.csl_daily",
    "how2sign": "phoenix_keypoints.extract.corpora.how2sign",
    "manifest": "phoenix_keypoints.extract.corpora.manifest",
    "videos": "phoenix_keypoints.extract.corpora.videos",
    # one clip, a folder of frames, a folder of frame folders
    "clips": "phoenix_keypoints.extract.corpora.clips",
}

EXPECTED = ("a PHOENIX-2014-T or PHOENIX-2014 tree (annotations/manual/PHOENIX-2014-T.train.corpus.csv "
            "or train.corpus.csv, and features/fullFrame-210x260px/), CSL-Daily (sentence_label/"
            "split_1.txt), How2Sign (sentence_level/<split>/rgb_front/raw_videos/), a folder holding "
            "video files, one video file, a folder of frames (one video), a folder of frame folders "
            "(one video each), or a manifest file (--manifest, .csv/.tsv/.jsonl)")


def corpus(name: str) -> Corpus:
    return importlib.import_module(CORPORA[name]).CORPUS


def detect(root: Path) -> Corpus:
    """The reader for `root`, or a refusal that says what was expected."""
    for name in CORPORA:
        c = corpus(name)
        if c.detect(root):
            return c
    from phoenix_keypoints.extract.corpora.clips import almost
    from phoenix_keypoints.extract.corpora.phoenix import inner_hint

    if why := archive.unreadable_archive(root):
        raise DatasetError(why)
    what = "does not exist" if not root.exists() else "is not a corpus this tool reads"
    raise DatasetError(f"--dataset {root} {what}: expected {EXPECTED}."
                       f"{inner_hint(root) or almost(root)}")


def discover(root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None, max_per_split: int | None = None,
             follow_links: bool = True, manifest_root: Path | None = None) -> Dataset:
    """Detect the corpus at root and read its selected videos, sorted by (split, name).

    root may be an archive file, or a folder inside one (`ARCHIVE/inner/folder`): the corpus in it is
    read as from a folder, and its frames come from the archive source (extract/sources/archive.py).
    manifest_root: root is a manifest whose paths lie under this folder (--manifest-root).
    """
    root = Path(root)
    found = archive_root(root) if manifest_root is None else None
    if found is None:  # on disk: links followed and recorded, or left out (extract/sources/links.py)
        with links.following(follow_links):
            ds = _read(root, splits, videos, limit_videos, max_per_split, manifest_root)
            try:
                return links.check(ds, follow_links)
            except links.LinkRefused as e:
                raise DatasetError(str(e)) from None
    inside, name = found
    ds = corpus(name).read(inside, splits, videos,  # type: ignore[arg-type]
                           limit_videos, max_per_split)
    cut = _cut_folder(inside)
    ds.videos = [replace(v, source="archive", problem=v.problem or (
        TRUNCATED if f"{inside.rel}/{v.folder}".strip("/") == cut else ""))
        if v.source == "folder" else v for v in ds.videos]
    return ds


def _read(root: Path, splits: Sequence[str], videos: Iterable[str] | None,
          limit_videos: int | None, max_per_split: int | None,
          manifest_root: Path | None) -> Dataset:
    """The corpus at root read; a manifest under --manifest-root with that root."""
    if manifest_root is None:
        return detect(root).read(root, splits, videos, limit_videos, max_per_split)
    from phoenix_keypoints.extract.corpora.manifest import CORPUS as MANIFEST

    if not MANIFEST.detect(root):
        raise DatasetError(f"--manifest-root {manifest_root} is for --manifest FILE (.csv, .tsv, "
                           f".jsonl); {root} is none.")
    return MANIFEST.read(root, splits, videos, limit_videos, max_per_split, manifest_root)


TRUNCATED = "the archive ends inside its frames (truncated)"


def _cut_folder(inside: ArchivePath) -> str | None:
    """The folder of the last member a damaged archive could be read to: its video may have lost
    frames, so it is not planned with fewer than it has."""
    index = inside.index
    if not index.problem or not index.members.num_rows:
        return None
    last = int(np.argmax(index.offset))  # the member furthest into the archive
    return index.members["name"][last].as_py().rpartition("/")[0]


# Corpora read from inside an archive, as from a folder: frame folders through the archive source,
# video files through the video source reading the member in place. The generic folder of videos
# is taken only where no specific corpus is found. (A manifest is given as a file on disk.)
ARCHIVE_CORPORA = ("phoenix", "csl-daily", "how2sign")
ARCHIVE_EXPECTED = EXPECTED.partition(", one video file")[0]


def _folders(top: ArchivePath, depth: int) -> list[ArchivePath]:
    """top and the folders down to `depth` levels below it, but hidden ones and the `__MACOSX/`
    copy of the tree (resource forks, `._name`) that macOS puts in the zips it makes."""
    level, found = [top], [top]
    for _ in range(depth):
        level = [p for d in level for p in d.iterdir()
                 if p.is_dir() and not p.name.startswith(".") and p.name != "__MACOSX"]
        found += level
    return found


def _single_folder(top: ArchivePath) -> ArchivePath:
    """The folder the archive's files are packed under (`zip -r clips.zip clips/` holds one top
    folder, clips/): its first level below then names the splits, as in the folder."""
    from phoenix_keypoints.extract.corpora.entries import (
        split_of,  # (entries imports the sources, which import us)
    )

    while len(entries := [e for e in top.scandir() if e.name != "__MACOSX"]) == 1 \
            and entries[0].is_dir() and split_of(entries[0].name) is None:
        top = top / entries[0].name
    return top


def archive_root(root: Path) -> tuple[ArchivePath, str] | None:
    """(the corpus folder inside an archive, its reader's name); None when root is no archive.

    The same discovery whether root names the archive alone or a folder in it (`ARCHIVE/inner`):
    that folder if it is a corpus, else the one corpus one or two levels down (the release's own
    top folders); a folder of video files is that folder, or the one folder that holds everything.
    """
    found = archive.split_root(root)
    if found is None:
        return None
    path, inner = found
    try:
        top = ArchivePath(archive.open_index(path))
    except archive.ArchiveError as e:
        raise DatasetError(str(e)) from None
    if inner:
        if not (top / inner).is_dir():
            raise DatasetError(f"--dataset {root}: the archive {path} has no folder {inner}/.")
        top = top / inner
        name = next((n for n in ARCHIVE_CORPORA if corpus(n).detect(top)), None)
        if name is not None:
            return top, name
    corpora = [(p, n) for p in _folders(top, 2)
               for n in [next((n for n in ARCHIVE_CORPORA if corpus(n).detect(p)), None)] if n]
    if len(corpora) == 1:
        return corpora[0]
    if not corpora and corpus("videos").detect(top):
        return _single_folder(top), "videos"
    where = f"{path}/{inner}" if inner else str(path)
    if not corpora:
        shown = ", ".join(sorted(e.name + ("/" if e.is_dir() else "") for e in top.scandir())[:8])
        raise DatasetError(f"--dataset {where}: no corpus inside the archive (looked at "
                           f"{'that folder' if inner else 'its top'} and two folders down for "
                           f"{ARCHIVE_EXPECTED}; it holds {shown or 'nothing'}).")
    listed = ", ".join(f"{path}/{p.rel}" for p, _ in corpora[:5])
    raise DatasetError(f"--dataset {where}: the archive holds {len(corpora)} corpora ({listed}). "
                       "Pass the one to use as --dataset, written as above.")


# --- one identity for a run's input ---------------------------------------------------------------
def input_key(path: Path) -> str:
    """The one name of a run's input, however it was typed (relative, through symlinks or `..`, an
    archive alone or `ARCHIVE/inner`): the resolved file or folder, and for an archive the corpus
    folder that discovery finds in it (`/real/X.tar.gz/PHOENIX-2014-T`). run.json records it."""
    real = Path(os.path.realpath(path))
    found = archive_root(real)
    return str(real) if found is None else str(found[0])


def same_input(asked: Path, key: str) -> bool:
    """Whether `asked` (as typed now) names the input recorded as `key` (input_key at planning).

    Cheap, so that a resume never re-reads an archive to answer it: the same resolved path, or the
    same archive file typed alone or through a folder that holds the planned corpus folder (the
    archive alone stands for the corpus that discovery found in it when the run was planned).
    """
    real = Path(os.path.realpath(asked))
    if str(real) == key:
        return True
    found, planned = archive.split_root(real), archive.split_root(key)
    if found is None or planned is None or found[0] != planned[0]:
        return False
    inner, corpus_folder = found[1], planned[1]
    return not inner or corpus_folder == inner or corpus_folder.startswith(inner + "/")


def spelled_root(given: str, key: str) -> str:
    """The corpus folder in the user's own spelling: `given` as typed, followed by the folders
    discovery went down inside an archive (`R.tar.gz` -> `R.tar.gz/PHOENIX-2014-T`)."""
    found, planned = archive.split_root(Path(os.path.realpath(given))), archive.split_root(key)
    if found is None or planned is None or found[0] != planned[0] or found[1] == planned[1]:
        return given
    below = planned[1].removeprefix(found[1]).strip("/")
    return f"{given.rstrip('/')}/{below}" if below else given


def placeholder(layout: str) -> str:
    """How messages spell the input of a run of that layout (`--dataset PHOENIX_ROOT`); "" when
    no reader has that layout."""
    for name in CORPORA:
        c = corpus(name)
        if layout in getattr(c, "layouts", (c.name,)):
            return c.placeholder
    return ""


def no_frames_message(ds: Dataset) -> str:
    """Why a selection holds no frame at all, in the words of the reader that made it."""
    for name in CORPORA:
        c = corpus(name)
        if ds.layout in getattr(c, "layouts", (c.name,)) and hasattr(c, "no_frames_message"):
            return c.no_frames_message(ds)
    return _generic_message(ds)
