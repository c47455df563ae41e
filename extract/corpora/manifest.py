"""A manifest (`--manifest FILE`): one row per video, in csv, tsv or jsonl (by the file's suffix).

Columns: `name` (the video's name in every output), `split`, `path` (relative to the manifest's
folder, the one it really lies in when reached through a symlink: a video file, a folder of
PNG/JPEG frames, or a glob of frame files such as
`frames/a/*.jpg`), optional `start`/`end` (frames, 1-based, inclusive; `end` -1 = to the end) or
`start_s`/`end_s` (seconds: the frames whose time is in [start_s, end_s)), and any other columns:
`text` (or `translation`), `gloss` and `signer` (or `speaker`) reach the tensors' index, the pkl
export and the report like PHOENIX's; the rest is carried as one JSON object (the plan's `extra`).

Values are read as written (a blank or a backslash may belong to a file's name; a name or split
with a blank around it is refused), and a path is a glob only when nothing has that very name.

A row whose path leaves the manifest's folder (absolute, `..`) or points at nothing keeps its
place with that problem, reported at the end: a manifest that arrives with a corpus from elsewhere
reads nothing outside its folder. A user's own list of absolute paths gets in with `--manifest-root
DIR` (`base` here): the dataset's root is DIR, relative paths are relative to it and absolute
ones must lie under it (links and `..` judged after resolving, as always). A file that cannot be
parsed, a missing column, a bad number or a name used twice is refused with its file and line.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from phoenix_keypoints.extract.corpora.base import (
    MAX_LINE,
    SPLITS,
    Dataset,
    DatasetError,
    Video,
    located,
    read_corpus_text,
)
from phoenix_keypoints.extract.corpora.entries import Listing, build

LAYOUT = "manifest"
SUFFIXES = (".csv", ".tsv", ".jsonl")
REQUIRED = ("name", "split", "path")
_ALIASES = {"text": "translation", "translation": "translation", "gloss": "gloss",
            "signer": "speaker", "speaker": "speaker"}
_RANGE = ("start", "end", "start_s", "end_s")


def _records(path: Path, text: str) -> Iterable[tuple[str, dict]]:
    """("file:line", row as strings) of each row of the file."""
    if path.suffix.lower() == ".jsonl":
        for where, line in located(path, text.splitlines()):
            try:
                row = json.loads(line)
            except ValueError as e:
                raise DatasetError(f"{where}: not a JSON object ({e}).") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{where}: not a JSON object.")
            yield where, {k: "" if v is None else str(v) for k, v in row.items()}
        return
    reader = csv.DictReader(io.StringIO(text), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise DatasetError(f"{path}:1: header lacks column(s) {', '.join(missing)}; a manifest needs "
                           f"{', '.join(REQUIRED)} (optional start, end or start_s, end_s, then any).")
    # values as written: a blank or `\` may belong to a file's name
    for where, row in located(path, reader):
        yield where, {k: v or "" for k, v in row.items() if k is not None}


def _number(row: dict, key: str, where: str, kind: type) -> int | float | None:
    value = row.get(key, "")
    if value == "":
        return None
    try:
        return kind(value)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise DatasetError(f"{where}: {key} {value!r} is not {what}. Fix that row.") from None


def _listing(row: dict, where: str) -> Listing:
    for c in REQUIRED:
        if not row.get(c):
            raise DatasetError(f"{where}: empty or missing {c!r}; every row needs name, split, path.")
    for c in ("name", "split"):
        if "/" in row[c] or "\0" in row[c] or row[c] in (".", ".."):
            raise DatasetError(f"{where}: {c} {row[c]!r} is not a plain name (no '/').")
        if row[c] != row[c].strip():
            raise DatasetError(f"{where}: {c} {row[c]!r} begins or ends with a blank; values are "
                               "read as written: remove the blank (a csv has none after commas).")
    meta = {v: row.get(k, "") for k, v in _ALIASES.items() if row.get(k)}
    extra = {k: v for k, v in row.items() if k not in (*REQUIRED, *_RANGE, *_ALIASES) and v != ""}
    return Listing(row["split"], row["name"], row["path"], where,
                   _number(row, "start", where, int), _number(row, "end", where, int),
                   _number(row, "start_s", where, float), _number(row, "end_s", where, float),
                   extra=json.dumps(extra, ensure_ascii=False, sort_keys=True) if extra else "",
                   glob=True, **meta)


def _listings(path: Path, text: str) -> list[Listing]:
    """Every row as a listing; a quoted csv field past the csv module's limit (MAX_LINE, over several
    lines) is refused naming the line it ends on."""
    rows = _records(path, text)
    out = []
    while True:
        try:
            where, row = next(rows)
        except StopIteration:
            return out
        except csv.Error as e:
            raise DatasetError(f"{path}: cannot be read as csv after {len(out)} row(s) ({e}; a "
                               f"field may hold at most {MAX_LINE:,} characters). Check the quotes "
                               "there.") from None
        out.append(_listing(row, where))


class Manifest:
    name = LAYOUT
    placeholder = "--manifest FILE"

    def detect(self, root: Path) -> bool:
        return root.is_file() and root.suffix.lower() in SUFFIXES

    def read(self, root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None, max_per_split: int | None = None,
             base: Path | None = None) -> Dataset:
        """`root` is the manifest file; paths are relative to its folder, the dataset's root (for a
        manifest reached through a symlink, the folder it really lies in, where its author wrote
        the paths from), or to `base` (--manifest-root) where given."""
        path = Path(os.path.realpath(root))
        top = Path(os.path.realpath(base)) if base is not None else path.parent
        if not top.is_dir():
            raise DatasetError(f"--manifest-root {base}: not a folder.")
        try:
            text, sha = read_corpus_text(path, "utf-8-sig")
        except UnicodeDecodeError as e:
            raise DatasetError(f"{path}: not UTF-8 ({e}). Save it as UTF-8.") from None
        except OSError as e:
            raise DatasetError(f"{path}: cannot read ({e.strerror}).") from None
        listings = _listings(path, text)
        if not listings:
            raise DatasetError(f"{path}: no rows; a manifest lists one video per row.")
        ds = build(top, LAYOUT, listings, sha, splits, videos, limit_videos,
                   hint=f"Paths in {path} are relative to {top}.")
        ds.manifest = path.name if top == path.parent else os.path.relpath(path, top) \
            if path.is_relative_to(top) else str(path)
        ds.videos = [_rooted(_respelled(top, v), base is None) for v in ds.videos]
        return ds


_ROOT_HINT = ("; a list of absolute paths (your own) gets in with --manifest-root DIR, the folder "
              "they lie under")


def _rooted(v: Video, own_folder: bool) -> Video:
    """A video whose path leaves the manifest's folder, its problem saying how a user's own list
    gets in (--manifest-root); with one given, the root it left."""
    if not v.problem.startswith("path ") or "leaves the dataset's folder" not in v.problem:
        return v
    how = (_ROOT_HINT.removeprefix("; ") if own_folder else
           "outside --manifest-root, which every path must lie under")
    return replace(v, problem=f"{v.problem}; {how}")


def _respelled(root: Path, v: Video) -> Video:
    """A video not found at its path as written, with what lies at the path trimmed of blanks and
    with `\\` as `/` (a manifest written by hand, or on Windows): paths are never rewritten, since
    both are legal in a file's name; the problem says which spelling to write instead."""
    other = v.folder.strip().replace("\\", "/")
    if not v.problem or other == v.folder or not other or not os.path.lexists(root / other):
        return v
    return replace(v, problem=f"{v.problem}; {other!r} exists: a manifest's paths are read as "
                   "written (blanks and '\\' included), write that instead")


CORPUS = Manifest()
