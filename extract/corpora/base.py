"""What every corpus reader produces, and what is shared between readers.

A corpus reader (one module in extract/corpora/) turns the folder the user gives into a Dataset: one
Video per listed video, with its split, its name as the corpus spells it, what the corpus says of it
(speaker, gloss, translation: these reach the tensors' index, the pkl export and the report), and
where its frames are: a frame source (extract/sources/) and a locator that source understands.
A video the reader lists but cannot use keeps its place with a `problem`, so that plan, status and
the end of a run can report it; a corpus file that cannot be trusted is refused whole with a
DatasetError that says what, where and what to do.

Adding a corpus: a module with a `Corpus` object (name, placeholder, detect, read, and optionally
hint), listed
in extract/corpora/__init__.py's CORPORA, and its tests on a tree built in the test.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from phoenix_keypoints.extract.sources.archive import member_of, reader
from phoenix_keypoints.extract.sources.base import nfc  # noqa: F401 (the readers' one normalisation)
from phoenix_keypoints.extract.sources.files import open_corpus_file

SPLITS: tuple[str, ...] = ("train", "dev", "test")


class DatasetError(Exception):
    """The dataset cannot be used as given; the message says what, where and what to do."""


# What a corpus file (PHOENIX's csv, How2Sign's, CSL-Daily's split list, a manifest) may hold, tied
# to the real ones: the largest lists about 31,000 rows (How2Sign's train csv; PHOENIX-2014-T's 7,096),
# so about 10x that; the longest PHOENIX-2014-T line is 602 characters; real files hold a few MB.
# The file is read a line at a time and refused at the first limit it passes, before it is parsed,
# so a crafted file costs at most what the limits allow, never its own size (2,000,000 rows took 2.9
# GB and minutes of planning; a 1 GiB manifest read whole took 2.25 GB; 299,000 missing rows plan in
# 14 s of CPU and 0.6 GB). 131,072 is also the csv module's own field limit.
MAX_ROWS = 300_000
MAX_LINE = 131_072
MAX_CORPUS_BYTES = 64 * 2**20
_BLOCK = 2**20


def _lines_left(f) -> int:
    """The lines left in an open file, counted a block at a time (nothing kept)."""
    n, last = 0, b"\n"
    while block := f.read(_BLOCK):
        n, last = n + block.count(b"\n"), block[-1:]
    return n + (last != b"\n")


def _line_chars(f, head: bytes, encoding: str) -> int:
    """The characters of a line that starts with `head` and goes on in f up to its line break,
    counted a block at a time."""
    decoder = codecs.getincrementaldecoder(encoding)("replace")
    chars, block = len(decoder.decode(head.rstrip(b"\n"))), head
    while not block.endswith(b"\n") and (block := f.readline(_BLOCK)):
        chars += len(decoder.decode(block.rstrip(b"\n")))
    return chars


def _too_big(path: object, size: int) -> DatasetError:
    return DatasetError(f"{path}: {size:,} bytes, more than the {MAX_CORPUS_BYTES:,} a corpus file "
                        "may hold (real ones hold a few MB). Check the file, or split the corpus "
                        "into several runs.")


def _open_corpus(path: object) -> BinaryIO:
    """A corpus file open for reading: on disk, the file itself; inside an archive, the member's
    bytes, read at once when its indexed size is within MAX_CORPUS_BYTES (a deflated zip member
    streamed through zipfile would parse the whole central directory in this process)."""
    inside = member_of(path)
    if inside is None:
        return open_corpus_file(path)
    index, i = inside
    if int(index.length[i]) > MAX_CORPUS_BYTES:
        raise _too_big(path, int(index.length[i]))
    data, why = reader(index).read(i)
    if data is None:
        raise OSError(why)
    return io.BytesIO(data)


def read_corpus_text(path: object, encoding: str = "utf-8") -> tuple[str, str]:
    """(text, sha256 of its bytes) of a corpus file on disk or inside an archive, read a line at a
    time: past MAX_ROWS lines, a line past MAX_LINE characters or MAX_CORPUS_BYTES in all, it is
    refused naming the file, the line and the limit, having held no more than the limits allow.
    OSError and UnicodeDecodeError as a read would raise them; never blocks on a FIFO."""
    f = _open_corpus(path)
    digest, lines, size = hashlib.sha256(), [], 0
    with f:
        while line := f.readline(4 * MAX_LINE + 2):  # a character is at most 4 bytes
            digest.update(line)
            size += len(line)
            if len(line) > MAX_LINE and (n := _line_chars(f, line, encoding)) > MAX_LINE:
                raise DatasetError(f"{path}:{len(lines) + 1}: a line of {n:,} characters, more "
                                   f"than the {MAX_LINE:,} a corpus line may hold (real ones hold a "
                                   "few hundred). Check that line (a missing line break or quote?).")
            lines.append(line)
            if len(lines) > MAX_ROWS + 1:  # + its header
                n = len(lines) + _lines_left(f)
                raise DatasetError(f"{path}: {n:,} lines, more than the {MAX_ROWS:,} rows a corpus "
                                   "file may list (the largest real one lists about 31,000). Check "
                                   "the file, or split the corpus into several runs.")
            if size > MAX_CORPUS_BYTES:
                raise _too_big(path, size + sum(len(b) for b in iter(lambda: f.read(_BLOCK), b"")))
    return b"".join(lines).decode(encoding), digest.hexdigest()


def located(path: object, rows: csv.DictReader | Iterable[str], first: int = 1
            ) -> Iterator[tuple[str, Any]]:
    """Each entry of a corpus file with where it is, "file:line", for its messages: the rows of
    a csv reader (at the line each ends on: a quoted field may span lines), or the lines given
    (numbered from `first`) that are not blank. Every reader of a corpus's text lists its entries
    through here (PHOENIX's and CSL-Daily's '|' files, How2Sign's tsv, a manifest)."""
    if isinstance(rows, csv.DictReader):
        for row in rows:
            yield f"{path}:{rows.line_num}", row
        return
    for lineno, line in enumerate(rows, start=first):
        if line.strip():
            yield f"{path}:{lineno}", line


@dataclass(frozen=True)
class Video:
    """One listed video: where its frames are and what the corpus says of it.

    `source` names the frame source (extract/sources/) and `folder` is its locator relative to the
    dataset root: a frame folder for "folder", a video file for "video". `files` are a folder's frame
    names in frame order; a source without names (a video file) gives `count` instead, and `start`,
    the 0-based index in the source of the first frame taken (a range cut from a longer video).
    """

    split: str
    name: str
    folder: str  # locator, relative to the dataset root, posix separators
    files: tuple[str, ...]  # frame file names in folder, in frame order
    speaker: str = ""
    gloss: str = ""
    translation: str = ""
    problem: str = ""  # "" when frames were found, else why the video cannot be processed
    # (name, reason) of each entry of the frame folder that is no frame, in name order
    ignored: tuple[tuple[str, str], ...] = ()
    source: str = "folder"
    count: int | None = None  # frames, for a source whose frames have no names
    start: int = 0
    extra: str = ""  # other corpus columns as one JSON object ("" when none)
    note: str = ""  # what the source noticed that does not keep the video out (a wrong header)
    frame_links: tuple[str, ...] = ()  # frame files that are symbolic links, as the scan met them
    links: tuple[str, ...] = ()  # "path -> target" of the links its frames are read through

    @property
    def num_frames(self) -> int:
        return len(self.files) if self.count is None else self.count


@dataclass
class Dataset:
    root: Path
    layout: str
    videos: list[Video]
    unlisted: list[str] = field(default_factory=list)  # "<split>/<folder>" on disk, in no csv
    corpus_sha256: str = ""
    hint: str = ""  # what a reader adds when nothing is found (where it looked, what it expected)
    manifest: str = ""  # the manifest's file name in root, for a dataset listed by one
    entry: str = ""  # the one clip or frame folder in root the input names (extract/corpora/clips.py)
    corpus_files: list[str] = field(default_factory=list)  # the corpus files read, relative to root
    links_inside: int = 0  # links followed that stay inside root (extract/sources/links.py)
    links_outside: list[str] = field(default_factory=list)  # "path -> target" of those that leave

    @property
    def num_frames(self) -> int:
        return sum(v.num_frames for v in self.videos)

    def fingerprint(self) -> str:
        """A digest of everything that decides the output: corpus text and every frame path."""
        h = hashlib.sha256()
        h.update(self.layout.encode())
        h.update(self.corpus_sha256.encode())
        for v in self.videos:
            h.update(f"\0{v.split}\0{v.name}\0{v.folder}\0".encode())
            h.update("\0".join(v.files).encode())
            if v.source != "folder":  # kept out for folders: their fingerprints stay as they were
                h.update(f"\0{v.source}\0{v.count}\0{v.start}\0{v.extra}".encode())
        return h.hexdigest()


class Corpus(Protocol):
    """A corpus reader: recognises its layout and lists its videos."""

    name: str
    placeholder: str  # how messages spell its input: `--dataset PHOENIX_ROOT`, `--manifest FILE`

    def detect(self, root: Path) -> bool:
        """Whether `root` is this corpus (cheap: a few file checks)."""
        ...

    def read(self, root: Path, splits: Sequence[str], videos: Iterable[str] | None,
             limit_videos: int | None, max_per_split: int | None = None) -> Dataset:
        """The selected videos, sorted by (split, name), with their frames listed."""
        ...


def check_splits(splits: Sequence[str], known: Sequence[str] = SPLITS) -> None:
    for s in splits:
        if s not in known:
            raise DatasetError(f"--splits: unknown split {s!r}; use some of {','.join(known)}.")


def _first_by_name(rows: list, n: int) -> list:
    """--max_samples_per_split: the first n videos of each split by name, as the older script
    chose them (sorted folder names), whatever their corpus order."""
    keep: set[tuple[str, str]] = set()
    for split in dict.fromkeys(r.split for r in rows):
        names = sorted(nfc(r.name) for r in rows if r.split == split)
        keep.update((split, name) for name in names[:n])
    return [r for r in rows if (r.split, nfc(r.name)) in keep]


def select(rows: list, listed: set[str], splits: Sequence[str],
           videos: Iterable[str] | None, limit_videos: int | None,
           max_per_split: int | None = None) -> list:
    """--videos (by name, in NFC), --limit-videos (first N of each split, in corpus order) and
    --max_samples_per_split (first N of each split by name).

    `rows` are anything with `split` and `name`; `listed` the NFC names of every split."""
    if videos is not None:
        wanted = list(dict.fromkeys(videos))
        unknown = [n for n in wanted if nfc(n) not in listed]
        if unknown:
            raise DatasetError(not_listed(unknown, listed, splits, rows))
        keep = {nfc(n) for n in wanted}
        rows = [r for r in rows if nfc(r.name) in keep]
    if limit_videos is not None:
        per_split: dict[str, int] = {}
        kept = []
        for r in rows:
            per_split[r.split] = per_split.get(r.split, 0) + 1
            if per_split[r.split] <= limit_videos:
                kept.append(r)
        rows = kept
    if max_per_split is not None:
        rows = _first_by_name(rows, max_per_split)
    return rows


SHOWN_CLOSE = 5  # names offered for one not found


def closest(name: str, names: Sequence[str], n: int = SHOWN_CLOSE) -> list[str]:
    """The names nearest `name`: those it begins (or that begin it, any case), then the closest
    by difflib's ratio (a typo, a missing digit)."""
    low = name.lower()
    prefix = [x for x in names if x.lower().startswith(low) or low.startswith(x.lower())]
    import difflib

    near = difflib.get_close_matches(name, names, n=n, cutoff=0.6)
    return list(dict.fromkeys([*sorted(prefix)[:n], *near]))[:n]


def not_listed(unknown: list[str], listed: set[str], splits: Sequence[str], rows: list) -> str:
    """--videos named what the corpus does not list: the closest names to each, and where every
    name is (the corpus files the rows come from, when few; else the plan of a run)."""
    names = sorted(listed)
    hints = []
    for name in unknown[:3]:
        near = closest(nfc(name), names)
        hints.append(f"for {name}: {', '.join(near)}" if near else f"none near {name}")
    files = sorted({re.sub(r":\d+$", "", str(getattr(r, "source", ""))) for r in rows} - {""})
    where = (f"every name is listed in {', '.join(files)}" if 0 < len(files) <= 3 else
             "every name is in the `video` column of a run's plan.parquet (a run without "
             "--videos, or with --limit-videos 1 for a few of each split)")
    return (f"--videos: {', '.join(unknown[:5])} not listed in the corpus of split(s) "
            f"{','.join(splits)} ({len(names)} video(s) listed). Closest: {'; '.join(hints)}. "
            f"{where[0].upper()}{where[1:]}.")


def unique_names(rows: Iterable, what: str = "video",
                 fix: str = "Remove one of the lines, or give them different names.") -> set[str]:
    """NFC names of rows (each with `name` and `source`), refusing a name listed twice."""
    seen: dict[str, tuple[str, str]] = {}
    for r in rows:
        key = nfc(r.name)
        if key in seen:
            first, where = seen[key]
            how = "" if first == r.name else f" as {first!r}, equal in Unicode NFC"
            raise DatasetError(
                f"{r.source}: {what} {r.name!r} is listed twice (first at {where}{how}). {fix}"
            )
        seen[key] = (r.name, r.source)
    return set(seen)


def safe_component(value: str, what: str, where: str) -> str:
    if not value or value in (".", "..") or "/" in value or "\\" in value or "\0" in value:
        raise DatasetError(
            f"{where}: {what} {value!r} is not a plain folder name (no '/', '..' or empty). "
            "Fix or remove that line of the corpus file."
        )
    return value


def safe_relative(value: str, where: str) -> str:
    p = PurePosixPath(value.replace("\\", "/"))
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value) or ".." in p.parts:
        raise DatasetError(
            f"{where}: video path {value!r} points outside the dataset root (absolute or '..'). "
            "Fix or remove that line of the corpus file."
        )
    return str(p)


# --- a selection without a single frame: where we looked and what we expected -------------------
SHOWN = 5


def names(videos: Sequence[Video]) -> str:
    shown = ", ".join(f"{v.split}/{v.name}" for v in videos[:SHOWN])
    return shown + (" ..." if len(videos) > SHOWN else "")


def count(videos: Sequence[Video]) -> str:
    return f"{len(videos)} {'has' if len(videos) == 1 else 'have'}"


def no_frames_message(ds: Dataset) -> str:
    """Why a selection holds no frame at all, for a reader without its own message."""
    if not ds.videos:
        return (f"no frames found: {ds.root} ({ds.layout}) lists no video for this selection. "
                f"Check --splits, --videos and the corpus files. {ds.hint}").strip()
    bits = ", ".join(f"{v.split}/{v.name}: {v.problem or 'no frames'}" for v in ds.videos[:SHOWN])
    more = " ..." if len(ds.videos) > SHOWN else ""
    return f"no frames found: of the {len(ds.videos)} listed video(s), {bits}{more}. {ds.hint}".strip()
