"""How2Sign: the sentence clips and the realigned csv of each split.

Reads `how2sign_realigned_<split>.csv` (TAB-separated: VIDEO_ID, VIDEO_NAME, SENTENCE_ID,
SENTENCE_NAME, START_REALIGNED, END_REALIGNED, SENTENCE), found at the root or anywhere under it
outside the video folders, and the clips `sentence_level/<split>/rgb_front/raw_videos/
<SENTENCE_NAME>.mp4`. Each clip is one video named SENTENCE_NAME; its SENTENCE is the translation,
and VIDEO_NAME and the realigned times (seconds within the full video; the clips are already cut to
them, so they are carried, not applied) go into `extra`. Splits: train, val, test; `val` is named
`dev` in every output, as PHOENIX names its development split. A listed clip that is missing keeps
its place with the problem; a clip that no csv lists is reported as unlisted.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from phoenix_keypoints.extract.corpora.base import (
    SPLITS,
    Dataset,
    DatasetError,
    located,
    read_corpus_text,
)
from phoenix_keypoints.extract.corpora.entries import Listing, build, split_of
from phoenix_keypoints.extract.sources import links
from phoenix_keypoints.extract.sources.folder import scandir, walk

LAYOUT = "how2sign"
RELEASE_SPLITS = ("train", "val", "test")
CSV_NAME = "how2sign_realigned_{split}.csv"
CLIPS = "sentence_level/{split}/rgb_front/raw_videos"
COLUMNS = ("VIDEO_NAME", "SENTENCE_NAME", "START_REALIGNED", "END_REALIGNED", "SENTENCE")
_SKIP = {"raw_videos", "video_level", "rgb_front", "rgb_side", "keypoints"}


def find_csvs(root: Path) -> dict[str, Path]:
    """split -> its realigned csv (the first found, the root first)."""
    wanted = {CSV_NAME.format(split=s): s for s in RELEASE_SPLITS}
    found: dict[str, Path] = {}
    for folder, dirs, files in walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and not d.startswith("."))
        for f in files:
            if f in wanted and wanted[f] not in found:
                found[wanted[f]] = root / folder / f
    return found


def read_csv(path: Path, split: str) -> list[Listing]:
    try:
        text = read_corpus_text(path, "utf-8-sig")[0]
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: cannot read as UTF-8 text ({e}).") from None
    reader = csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DatasetError(f"{path}:1: header lacks column(s) {', '.join(missing)} (How2Sign's "
                           "realigned csv is TAB-separated with VIDEO_ID, VIDEO_NAME, SENTENCE_ID, "
                           "SENTENCE_NAME, START_REALIGNED, END_REALIGNED, SENTENCE).")
    out = []
    for where, row in located(path, reader):
        name = (row.get("SENTENCE_NAME") or "").strip()
        if not name or "/" in name or name in (".", ".."):
            raise DatasetError(f"{where}: SENTENCE_NAME {name!r} is not a plain file name.")
        extra = {"video_name": row.get("VIDEO_NAME") or "", "start_realigned": row.get("START_REALIGNED")
                 or "", "end_realigned": row.get("END_REALIGNED") or ""}
        out.append(Listing(split_of(split) or split, name, f"{CLIPS.format(split=split)}/{name}.mp4",
                           where, translation=(row.get("SENTENCE") or "").strip(),
                           extra=json.dumps(extra, sort_keys=True)))
    return out


class How2Sign:
    name = LAYOUT
    placeholder = "--dataset HOW2SIGN_ROOT"

    def detect(self, root: Path) -> bool:
        return root.is_dir() and (
            any((root / CLIPS.format(split=s)).is_dir() for s in RELEASE_SPLITS)
            or any((root / CSV_NAME.format(split=s)).is_file() for s in RELEASE_SPLITS))

    def read(self, root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None, max_per_split: int | None = None) -> Dataset:
        csvs = find_csvs(root)
        if not csvs:
            raise DatasetError(f"--dataset {root}: a How2Sign tree without its annotations: expected "
                               f"{CSV_NAME.format(split='train')} (and _val, _test) under it.")
        digest = hashlib.sha256()
        listings: list[Listing] = []
        for split in RELEASE_SPLITS:
            if split in csvs:
                digest.update(csvs[split].read_bytes())
                listings.extend(read_csv(csvs[split], split))
        ds = build(root, LAYOUT, listings, digest.hexdigest(), splits, videos, limit_videos,
                   hint=f"Expected clips in {root}/{CLIPS.format(split='<split>')}/<SENTENCE_NAME>.mp4.")
        if videos is None and limit_videos is None and max_per_split is None:
            ds.unlisted = _unlisted(root, {v.folder for v in ds.videos})
        top = len(str(root))  # (a folder inside an archive is no os.PathLike: its str names it)
        ds.corpus_files = [str(csvs[s])[top:].lstrip("/") for s in RELEASE_SPLITS if s in csvs]
        return ds


def _unlisted(root: Path, listed: set[str]) -> list[str]:
    """"<split>/<clip>" of each clip on disk that no csv lists."""
    out = []
    for split in RELEASE_SPLITS:
        folder = root / CLIPS.format(split=split)
        if folder.is_dir() and not links.outside(root, folder):
            out.extend(f"{split}/{f}" for f in sorted(e.name for e in scandir(folder))
                       if not f.startswith(".") and f"{CLIPS.format(split=split)}/{f}" not in listed)
    return out


CORPUS = How2Sign()
