"""Frame files in a folder (PNG or JPEG): the source of PHOENIX and CSL-Daily.

A video's frames are the names its corpus gives them (a pattern): a dangling link or a directory
named like a frame is still a frame, and its row says why it could not be read, so frame numbers
never shift. Anything else in the folder (hidden files such as macOS's `._images0001.png`,
`notes.txt`, `images0001.png.bak`, subfolders) is no frame: it is kept in Scan.ignored with the
reason, to be reported, and never numbered. Reading one file is extract/keypoints/frames.py; the
stat-based check of recorded rows is extract/sources/provenance.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.frames import STATUS_OK, read_frame
from phoenix_keypoints.extract.sources import links
from phoenix_keypoints.extract.sources.base import (
    Frame,
    Mismatch,
    Ref,
    Scan,
    image_ref,
    is_utf8,
    nfc,
    parse_image,
    shown,
)

IGNORED_HIDDEN = "hidden file"
IGNORED_FOLDER = "folder"
IGNORED_NAME = "not a frame name"
IGNORED_NOT_UTF8 = "name not UTF-8"

_DIGITS = re.compile(r"([0-9]+)")


def frame_sort_key(name: str) -> tuple:
    """Natural order: images0002 before images0010; 2014's fn000009-0 before fn000010-0. Numbers
    are runs of ASCII digits only (the odd pieces of the split): `²` or `٣` is text, never an int."""
    return tuple(int(t) if k % 2 else t for k, t in enumerate(_DIGITS.split(name)))


def scandir(folder: Path):
    """os.scandir, or the entries of a folder inside an archive (extract/sources/archive.py)."""
    return folder.scandir() if hasattr(folder, "scandir") else os.scandir(folder)


def walk(root: Path, not_utf8: list[str] | None = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk over a folder or a folder inside an archive, top-down: (folder relative to root,
    posix, "" first; its subfolders, which the caller may prune in place; its files). Links to
    folders are followed (each real folder once, so a loop of links ends), but not those leaving
    root under --no-follow-links (extract/sources/links.py). Names that are no UTF-8 are left out,
    and added (shown as run.json writes them) to `not_utf8`: no output could hold them."""
    if hasattr(root, "walk_tree"):
        yield from root.walk_tree()
        return
    seen: set[str] = set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        rel = Path(folder).relative_to(root).as_posix()
        rel = "" if rel == "." else rel
        odd = [n for n in (*dirs, *files) if not is_utf8(n)]
        if odd and not_utf8 is not None:
            not_utf8.extend(shown(f"{rel}/{n}" if rel else n) for n in odd)
        dirs[:] = [d for d in dirs if is_utf8(d) and links.may_enter(root, Path(folder) / d)]
        yield rel, dirs, [f for f in files if is_utf8(f)]


class FrameListing(NamedTuple):
    frames: list[str]  # frame names in frame order
    ignored: list[tuple[str, str]]  # (name, why it is no frame)
    links: list[str]  # the frames that are symbolic links (extract/sources/links.py)


def list_frames(folder: Path, pattern: re.Pattern[str]) -> FrameListing | None:
    """A folder's frames, the entries that are no frames, and the frames that are links; None
    when there is no folder.

    A name is a frame by its name alone, never by what it points to: a dangling link or a directory
    named like a frame stays in the list, so that its row says why and later frames keep their
    numbers. Hidden names are never frames (`._images0001.png` is macOS metadata, not an image).
    """
    frames: list[str] = []
    ignored: list[tuple[str, str]] = []
    links: list[str] = []
    try:
        for e in scandir(folder):
            if not is_utf8(e.name):
                ignored.append((shown(e.name), IGNORED_NOT_UTF8))
            elif e.name.startswith("."):
                ignored.append((e.name, IGNORED_HIDDEN))
            elif pattern.fullmatch(e.name):
                frames.append(e.name)
                if e.is_symlink():
                    links.append(e.name)
            else:
                ignored.append((e.name, IGNORED_FOLDER if _is_dir(e) else IGNORED_NAME))
    except (FileNotFoundError, NotADirectoryError):
        return None
    frames.sort(key=frame_sort_key)
    ignored.sort()
    return FrameListing(frames, ignored, sorted(links))


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _decodings(name: str) -> list[tuple[str, str]]:
    """A name as it reads when its bytes are taken in another encoding than they were: bytes that
    are no UTF-8 as cp1252 (Windows) or cp437 (DOS zips), and a UTF-8 name that a tool read as
    cp437 (a zip made by Info-ZIP, unpacked by an old unzip) as UTF-8."""
    if not is_utf8(name):
        raw = os.fsencode(name)
        return [(raw.decode(enc, errors="replace"), f"read as {enc} (it is no UTF-8)")
                for enc in ("cp1252", "cp437")]
    try:
        other = name.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return []
    return [(other, "once its cp437 reading is undone")] if other != name else []


class NameIndex:
    """Finds a path on disk whose components equal the wanted ones in NFC; one scan per folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dirs: dict[str, dict[str, list[str]]] = {}
        self._other: dict[str, dict[str, tuple[str, str]]] = {}  # folder -> read otherwise

    def _entries(self, rel: str) -> dict[str, list[str]]:
        if rel not in self._dirs:
            found: dict[str, list[str]] = {}
            other: dict[str, tuple[str, str]] = {}
            try:
                for e in scandir(self.root / rel):
                    found.setdefault(nfc(e.name), []).append(e.name)
                    for name, how in _decodings(e.name):
                        other.setdefault(nfc(name), (e.name, how))
            except OSError:
                pass
            self._dirs[rel], self._other[rel] = found, other
        return self._dirs[rel]

    def misread(self, rel: str) -> str:
        """Why no folder was found for `rel` when a folder on its way has its name only when its
        bytes are read in another encoding (a tree packed or copied on another system), else ""."""
        cur = PurePosixPath()
        for part in PurePosixPath(rel).parts:
            if not (self.root / cur / part).exists():
                self._entries(str(cur))
                hit = self._other.get(str(cur), {}).get(nfc(part))
                return "" if hit is None else (
                    f"no folder named {part!r}; {shown(hit[0])!r} is that name {hit[1]}: rename "
                    "the folder (its name's bytes in UTF-8)")
            cur /= part
        return ""

    def resolve(self, rel: str) -> tuple[str | None, str]:
        """(the folder as spelt on disk or None, "" or why no folder can be chosen)."""
        cur = PurePosixPath()
        for part in PurePosixPath(rel).parts:
            if (self.root / cur / part).exists():
                cur /= part
                continue
            names = sorted(self._entries(str(cur)).get(nfc(part), []))
            if len(names) > 1:
                shown = " and ".join(repr(n) for n in names)
                return None, f"folders {shown} differ only in Unicode normalisation"
            if not names:
                return None, ""
            cur /= names[0]
        return str(cur), ""


class FolderSource:
    """Frame files named by a pattern, in one folder per video."""

    kind = "folder"
    fragment = ""

    def scan(self, root: Path, locator: str, pattern: re.Pattern[str],
             names: NameIndex | None = None) -> Scan:
        """The folder's frames, found in NFC when its spelling on disk differs (see NameIndex)."""
        listing = list_frames(root / locator, pattern)
        problem = ""
        if listing is None and names is not None:
            found, problem = names.resolve(locator)
            if found is not None:
                locator, listing = found, list_frames(root / found, pattern)
            elif not problem:
                problem = names.misread(locator)
        frames, ignored, links = listing or ([], [], [])
        if not problem:
            problem = "no folder" if listing is None else ("no frames" if not frames else "")
        return Scan(tuple(frames), None, problem, tuple(ignored), locator, links=tuple(links))

    def frames(self, root: Path, ref: Ref) -> Iterator[Frame]:
        for name in ref.files:
            rel = f"{ref.locator}/{name}"
            rgb, status, note, src = read_frame(root / rel, max_pixels=ref.max_pixels,
                                           max_scans=ref.max_scans)
            yield Frame(rgb, status, note, image_ref(rel), src.size, src.mtime_ns, src.sha256)

    def image(self, root: Path, image: str) -> np.ndarray | None:
        """One recorded row's frame again (for drawing), None when it cannot be read."""
        rgb, status, _, _ = read_frame(root / parse_image(image).path, digest=False)
        return rgb if status == STATUS_OK else None

    def stale(self, root: Path, recorded: pa.Table, content: bool, threads: int) -> list[Mismatch]:
        from phoenix_keypoints.extract.sources.provenance import changed_frames

        return changed_frames(root, recorded, content=content, threads=threads)
