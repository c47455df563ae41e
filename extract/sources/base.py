"""Frame sources: where a video's frames come from (a folder of frame files, a video file, ...).

A corpus reader (extract/corpora/) says, per video, which source holds its frames and where (the
source's kind and a locator relative to the dataset root). A source then plays three roles, in
three places:

- `scan` on the coordinator, at plan time: what the video holds (frame names or a frame count) or
  the `problem` that keeps it out of the plan. Counts must be exact: a worker emits exactly the
  planned rows, and a part is trusted only when it holds them.
- `frames` in a worker process, after spawn: the video's frames in order, one `Frame` per planned
  row, from a small picklable `Ref` (plain strings and ints; open files and decoders are never
  pickled: the worker opens them itself). A frame that cannot be read or decoded is still yielded,
  with rgb None and a status saying why, so frame numbers never shift and one bad frame costs only
  its row. Whatever fails for the whole video (cannot open it, it ends early) becomes that status
  on each remaining row, never an exception that would cost the chunk's other videos.
- `image` for the report and `show`: a recorded row's frame again, by its `image`.
- optionally `read_order(root, refs)` in the worker: the order to extract one chunk's videos in
  (an archive's: forward through the file); rows are still written in plan order.
- `stale` for resume and `verify`: given recorded rows (their `image` and the provenance columns
  file_size, file_mtime_ns, file_sha256) say which rows were made from bytes that are not on disk
  any more, and why. Each row's provenance describes the very bytes the frame was decoded from
  (for a frame file: the file; for a frame inside a container: the container).

A row's `image` names what it was made from: a frame file's path for "folder"; for a frame inside
another file, `<path>#<FRAGMENT>=<detail>` (video: `clip.mp4#frame=12`), so that `stale` can hand
each recorded row to the source that made it (extract/sources/__init__.py: `source_of_image`).
`image_ref` writes it and `parse_image` reads it, nothing else: `%` and `#` inside the path and the
detail are written `%25` and `%23`, so the one bare `#` is the tag's whatever the names hold (a
folder `V#frame=1`, an archive `a#b.tar.gz`), and paths without them read as they always did.

Adding a source (e.g. frames inside a tar.gz or zip): one module in extract/sources/ defining a
class with `kind` (the name plans and corpus readers use), `fragment` (the `#key=` of its images,
"" for plain paths) and the three methods of `FrameSource` below; register it in SOURCES in
extract/sources/__init__.py; corpus readers then name it in Video.source. Keep heavy imports (a
decoder library) inside the methods, so that the coordinator and other sources never pay for them.
Tests: a tree built in the test from the shared data, the frames compared with a direct decode,
and one test per way the input can be broken.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.frames import MAX_PIXELS, MAX_SCANS, Frame  # noqa: F401 (a source yields Frames)


def nfc(name: str) -> str:
    """The one normalisation names are compared in (see extract/corpora/phoenix.py)."""
    return unicodedata.normalize("NFC", name)


def is_utf8(name: str) -> bool:
    """Whether a name read from disk is text: a byte string that is no UTF-8 comes from the OS as
    lone surrogates (Python's surrogateescape), which no Parquet or JSON column can hold."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(name: str) -> str:
    """A name as text that any output can hold: each byte that is no UTF-8 as `\\udcNN`, as
    run.json's JSON escapes it (byte 0xff is \\udcff), the rest unchanged."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("#", "%23") if "%" in text or "#" in text else text


def _unescape(text: str) -> str:
    return text.replace("%23", "#").replace("%25", "%") if "%" in text else text


def image_ref(path: str, fragment: str = "", detail: str = "") -> str:
    """A row's `image`: the path (posix, relative to the dataset root), and for a frame inside
    another file the source's `#fragment=detail`; reversible by parse_image for any names."""
    ref = _escape(path)
    return f"{ref}#{fragment}={_escape(detail)}" if fragment else ref


class ImageRef(NamedTuple):
    """A row's `image` taken apart: the file's path, and the tag of a frame inside it ("" if none)."""

    path: str
    fragment: str = ""
    detail: str = ""


def parse_image(image: str) -> ImageRef:
    """The inverse of image_ref (the only place an `image` string is taken apart)."""
    path, sep, tag = image.partition("#")
    if not sep:
        return ImageRef(_unescape(path))
    fragment, _, detail = tag.partition("=")
    return ImageRef(_unescape(path), fragment, _unescape(detail))


@dataclass(frozen=True)
class Ref:
    """What a worker needs to read one video's frames: picklable, plain values only."""

    source: str  # a source's kind
    locator: str  # relative to the dataset root
    files: tuple[str, ...] = ()  # frame names, for sources that list them
    start: int = 0  # 0-based index of the first frame taken
    count: int = 0  # frames to yield (len(files) when files are given)
    max_pixels: int = MAX_PIXELS  # a frame above it is `too_large`, never decoded (--max-pixels)
    max_scans: int = MAX_SCANS  # a JPEG of more scans is `over_budget`, never decoded (--max-scans)


@dataclass(frozen=True)
class Scan:
    """What the coordinator found for one video: frame names or a count, or why it is unusable."""

    files: tuple[str, ...] = ()
    count: int | None = None  # None: the frames are `files`
    problem: str = ""
    ignored: tuple[tuple[str, str], ...] = ()  # (name, why it is no frame), to be reported
    locator: str = ""  # the locator as found on disk, when it differs from the one asked for
    start: int = 0  # 0-based index of the first frame taken (a range cut from a longer video)
    note: str = ""  # something worth telling that does not keep the video out
    links: tuple[str, ...] = ()  # frames that are symbolic links (their targets: sources/links.py)


class Mismatch(NamedTuple):
    """One recorded row that no longer matches what is on disk: the row's index, image and why."""

    row: int
    image: str
    why: str


class FrameSource(Protocol):
    kind: str
    fragment: str

    def frames(self, root: Path, ref: Ref) -> Iterator[Frame]:
        """Exactly ref's planned frames, in order (see the module docstring)."""
        ...

    def stale(self, root: Path, recorded: pa.Table, content: bool, threads: int) -> list[Mismatch]:
        """Rows of `recorded` (image and provenance columns) whose bytes changed on disk."""
        ...

    def image(self, root: Path, image: str) -> np.ndarray | None:
        """A recorded row's frame again, by its `image` (report and show draw on it); None when it
        cannot be had."""
        ...
