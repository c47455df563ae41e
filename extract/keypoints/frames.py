"""Read one frame into the 8-bit RGB array an estimator takes, or say why it cannot be, and record
what the frame was made from.

Choices (documented in the README's bad-input table):
- 0-byte file, neither a PNG nor a JPEG (by its signature), or undecodable: not processed; status
  says which (`not_png` for a `.png` name, `not_jpeg` for a `.jpg`/`.jpeg` one, else `not_image`;
  `corrupt_png` or `corrupt_jpeg` by the signature found).
- a frame name that is no readable regular file: a dangling link or vanished file is "missing",
  a directory (or FIFO, device) is "not_a_file", an open or read that fails is "unreadable". The
  row is kept either way, so frame numbers never shift.
- 16-bit: scaled to 8 bit (>> 8); grayscale: replicated to RGB; RGBA: alpha dropped. These are
  processed and the row's `note` says what was converted.
- another size than the video's first frame: processed as it is (points are made in the
  frame's own width and height, which the row records) and noted.
- bounded before decoding: more pixels than --max-pixels is `too_large`; work beyond the pixels
  (PNG data inflating past what its size needs, PNG text or ICC chunks past PIL's limits, more JPEG
  scans than --max-scans, counted from the markers) is `over_budget`.
- what libpng or libjpeg says while decoding goes into the note; a JPEG whose data ends early
  (libjpeg fills the rest with grey) is `corrupt_jpeg`, not ok.
- a JPEG's EXIF orientation is applied, as a video's display rotation is, and noted; a PNG is
  never turned.

Provenance: size and mtime come from fstat of the descriptor the bytes are read from, and the
sha256 from those very bytes, so the three always describe what the estimator was shown (a stat before
opening could describe another file than the one read). sha256, because anyone can check it with
`sha256sum`; it adds well under 1% to a frame's time (docs/provenance.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import struct
import tempfile
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

import cv2
import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"

STATUS_OK = "ok"
STATUS_EMPTY = "empty_file"
STATUS_NOT_PNG = "not_png"
STATUS_UNREADABLE = "unreadable"
STATUS_CORRUPT = "corrupt_png"
STATUS_NOT_JPEG = "not_jpeg"
STATUS_NOT_IMAGE = "not_image"
STATUS_CORRUPT_JPEG = "corrupt_jpeg"
STATUS_MISSING = "missing"
STATUS_NOT_A_FILE = "not_a_file"
STATUS_TOO_LARGE = "too_large"
STATUS_OVER_BUDGET = "over_budget"

# Frames above this many pixels are refused from their header, never decoded (--max-pixels): 8K
# video (7680 x 4320, 33 MP) passes; a 390 KB PNG of 20000 x 20000 (400 MP, 1.2 GB as RGB) does not.
MAX_PIXELS = 40_000_000
# A JPEG of more scans than this is `over_budget`, never decoded (--max-scans): each scan is a pass
# over the whole image, so a 1.2 MB progressive JPEG of 12,000 scans cost 39 s of CPU. A progressive
# encoder writes about 10; libjpeg-turbo's own tools stop at 500 (its advice against this attack).
MAX_SCANS = 500
# JPEG start-of-frame markers (SOF0-SOF15 but DHT, JPG and DAC, which share the range)
_SOF = {m for m in range(0xC0, 0xD0)} - {0xC4, 0xC8, 0xCC}

# A file rewritten while it is read is read again, this many times in all, before giving up.
_READ_TRIES = 3


class Frame(NamedTuple):
    """One planned row's frame: the image the estimator is shown, or why there is none."""

    rgb: np.ndarray | None  # uint8 [H, W, 3] RGB, or None
    status: str  # "ok" when rgb is usable
    note: str
    image: str  # the row's `image`: what it was made from
    size: int | None = None  # provenance: size, mtime and sha256 of the bytes read
    mtime_ns: int | None = None
    sha256: str | None = None
    time_s: float | None = None  # presentation time, for sources that have one


@dataclass(frozen=True)
class Source:
    """What a frame's row was made from; all None when its bytes could not be read."""

    size: int | None = None
    mtime_ns: int | None = None
    sha256: str | None = None


NO_SOURCE = Source()


def frame_bytes(max_pixels: int) -> int:
    """The most bytes a frame file of max_pixels pixels can hold (16-bit RGBA stored uncompressed,
    and room for its other chunks): a larger one is no frame of that size, and is not read (a
    zip bomb's member, a disk image named like a frame)."""
    return 8 * max_pixels + 16 * 2**20


def too_many_bytes(size: int, max_pixels: int) -> str:
    """The note of a frame file refused for its size in bytes, "" when it may be a frame."""
    if size <= frame_bytes(max_pixels):
        return ""
    return (f"a file of {size:,} bytes, more than a frame of --max-pixels {max_pixels:,} can hold: "
            "not read")


def _read_fd(fd: int, digest: bool, max_pixels: int) -> tuple[bytes | None, Source, str, str]:
    """Read an open descriptor whole; size and mtime from fstat around the read, so they match."""
    for attempt in range(_READ_TRIES):
        before = os.fstat(fd)
        if why := irregular(before):
            return None, NO_SOURCE, STATUS_NOT_A_FILE, why
        if big := too_many_bytes(before.st_size, max_pixels):
            return None, Source(before.st_size, before.st_mtime_ns), STATUS_TOO_LARGE, big
        if attempt:
            os.lseek(fd, 0, os.SEEK_SET)
        chunks, left = [], before.st_size + 1  # one byte more, to see a file that grew
        while True:
            chunk = os.read(fd, max(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        after = os.fstat(fd)
        if (after.st_size, after.st_mtime_ns, len(data)) == (before.st_size, before.st_mtime_ns,
                                                              before.st_size):
            sha = hashlib.sha256(data).hexdigest() if digest else None
            return data, Source(after.st_size, after.st_mtime_ns, sha), STATUS_OK, ""
    return None, NO_SOURCE, STATUS_UNREADABLE, "changed while it was read"


_PSEUDO = ("/proc", "/sys", "/dev")  # the kernel's file systems: their "files" are no data


@cache
def _pseudo_devices() -> frozenset[int]:
    found = set()
    for folder in _PSEUDO:
        with contextlib.suppress(OSError):
            found.add(os.stat(folder).st_dev)
    return frozenset(found)


def irregular(st: os.stat_result) -> str:
    """Why a file with this stat is never read as corpus data, or "" when it is a regular file:
    a link in a corpus may lead to a device, a FIFO, a socket or /proc/self/mem."""
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    if st.st_dev in _pseudo_devices():
        return "a file of the kernel's /proc, /sys or /dev"
    return ""


def read_file(path: Path, digest: bool = True,
              max_pixels: int = MAX_PIXELS) -> tuple[bytes | None, Source, str, str]:
    """(bytes or None, source, status, note): a frame file's bytes and what they were read from.

    O_NONBLOCK so that a FIFO named like a frame is reported, not waited on forever; a file larger
    than any frame of max_pixels is `too_large`, its size and mtime recorded, its bytes not read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, NO_SOURCE, STATUS_MISSING, "no such file (or a link to nothing)"
    except OSError as e:
        return None, NO_SOURCE, STATUS_UNREADABLE, e.strerror or type(e).__name__
    try:
        return _read_fd(fd, digest, max_pixels)
    except OSError as e:
        return None, NO_SOURCE, STATUS_UNREADABLE, e.strerror or type(e).__name__
    finally:
        os.close(fd)


def _not_an_image(name: str) -> str:
    suffix = name.rpartition(".")[2].lower()
    return {"png": STATUS_NOT_PNG, "jpg": STATUS_NOT_JPEG, "jpeg": STATUS_NOT_JPEG}.get(
        suffix, STATUS_NOT_IMAGE)


# In entropy-coded data a marker is FF followed by neither 00 (a stuffed FF) nor a restart marker
# (D0-D7) nor another FF (fill): the next marker after a scan's data.
_NEXT_MARKER = re.compile(rb"\xff(?=[^\x00\xd0-\xd7\xff])")


def _jpeg_segments(data: bytes) -> Iterator[tuple[int, int]]:
    """(marker, where it starts) of each marker segment of a JPEG, walking them: fill bytes and
    standalone markers passed over, each segment skipped by its length, a scan's entropy-coded data
    up to the next marker. Ends at the end of image, or where no marker is where one belongs."""
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return  # damaged: the decoder says so
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers: no length
            i += 2
            continue
        yield marker, i
        if marker == 0xD9:  # end of image
            return
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
        if marker == 0xDA:
            found = _NEXT_MARKER.search(data, i)
            if found is None:
                return
            i = found.start()


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a JPEG's start-of-frame segment, walking the segments before it."""
    for marker, i in _jpeg_segments(data):
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no size before them
            return None
        if marker in _SOF and i + 9 <= len(data):
            return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) as a PNG's IHDR or a JPEG's start of frame says, read before decoding (a
    390 KB PNG can decode to gigabytes); None when the header says no size."""
    if data.startswith(PNG_SIGNATURE):
        if len(data) >= 24 and data[12:16] == b"IHDR":
            return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        return None
    return _jpeg_size(data) if data.startswith(JPEG_SIGNATURE) else None


def too_large(width: int, height: int, max_pixels: int) -> str:
    """The note of a frame refused for its size, "" when it is within the limit."""
    if width * height <= max_pixels:
        return ""
    return (f"{width}x{height} = {width * height:,} pixels, more than --max-pixels {max_pixels:,}: "
            "not decoded")


_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # PNG colour type -> samples a pixel
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))  # (x0, y0, dx, dy) of each interlace pass


def _png_raw_size(ihdr: bytes) -> int:
    """The bytes a PNG's IDAT inflates to for its IHDR: each row (each pass's row, interlaced)
    with its filter byte."""
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", ihdr[:13])
    bits = depth * _CHANNELS.get(colour, 4)
    passes = _ADAM7 if interlace else ((0, 0, 1, 1),)
    total = 0
    for x0, y0, dx, dy in passes:
        w, h = (width - x0 + dx - 1) // dx, (height - y0 + dy - 1) // dy
        if w > 0 and h > 0:
            total += h * (1 + (w * bits + 7) // 8)
    return total


def _png_idat(data: bytes) -> tuple[bytes, bytes]:
    """(IHDR's data, every IDAT's data joined), walking the chunks without checking them."""
    ihdr, idat, i = b"", [], 8
    while i + 8 <= len(data):
        length, kind = int.from_bytes(data[i:i + 4], "big"), data[i + 4:i + 8]
        if kind == b"IHDR":
            ihdr = data[i + 8:i + 8 + length]
        elif kind == b"IDAT":
            idat.append(data[i + 8:i + 8 + length])
        elif kind == b"IEND":
            break
        i += 12 + length
    return ihdr, b"".join(idat)


# A PNG's text and ICC chunks, which libpng inflates and keeps whole before the first pixel: bounded
# as PIL bounds them (MAX_TEXT_CHUNK, MAX_TEXT_MEMORY): at most 1 MiB inflated a compressed chunk,
# 64 MiB in all (1000 iTXt chunks of 7 MB in a 6.9 MB file cost libpng 58 s and 6.7 GB).
MAX_TEXT_CHUNK = 2**20
MAX_TEXT_MEMORY = 64 * 2**20
_KEPT = (b"tEXt", b"zTXt", b"iTXt", b"iCCP", b"sPLT", b"eXIf")  # the ancillary chunks libpng keeps


def _compressed_part(kind: bytes, body: bytes) -> bytes | None:
    """The zlib stream inside a zTXt, iCCP or compressed iTXt chunk, None for text stored plain."""
    key_end = body.find(b"\0")
    if key_end < 0:
        return None
    if kind in (b"zTXt", b"iCCP"):
        return body[key_end + 2:]
    if kind == b"iTXt" and body[key_end + 1:key_end + 2] == b"\1":  # compression flag
        lang_end = body.find(b"\0", key_end + 3)
        word_end = body.find(b"\0", lang_end + 1) if lang_end >= 0 else -1
        return body[word_end + 1:] if word_end >= 0 else None
    return None


def _inflated_size(stream: bytes, limit: int) -> int:
    """What a zlib stream inflates to, counted up to limit + 1 (no more is ever inflated); a damaged
    stream counts what came before the damage (the decoder says the rest)."""
    d, got, left = zlib.decompressobj(), 0, stream
    try:
        while left and not d.eof and got <= limit:
            got += len(d.decompress(left, limit + 1 - got))
            left = d.unconsumed_tail
    except zlib.error:
        pass
    return got


def _png_text_budget(data: bytes) -> str:
    """Why a PNG's text or ICC chunks would cost the decoder more than PIL allows ("" when they
    would not): a compressed one inflating past MAX_TEXT_CHUNK, or all of them past MAX_TEXT_MEMORY.
    Each is inflated here at most to its limit, so the check costs at most what it allows."""
    total, i = 0, 8
    while i + 8 <= len(data):
        length, kind = int.from_bytes(data[i:i + 4], "big"), data[i + 4:i + 8]
        if kind == b"IEND":
            break
        if kind in _KEPT:
            body = data[i + 8:i + 8 + length]
            stream = _compressed_part(kind, body)
            size = len(body) if stream is None else _inflated_size(stream, MAX_TEXT_CHUNK)
            if stream is not None and size > MAX_TEXT_CHUNK:
                return (f"its {kind.decode()} chunk at byte {i:,} inflates past {MAX_TEXT_CHUNK:,} "
                        "bytes, the most a compressed text or ICC chunk may (as PIL allows): not "
                        "decoded")
            total += size
            if total > MAX_TEXT_MEMORY:
                return (f"its text and ICC chunks hold more than {MAX_TEXT_MEMORY:,} bytes by the "
                        f"{kind.decode()} chunk at byte {i:,} (as PIL allows at most): not decoded")
        i += 12 + length
    return ""


_DEFLATE_RATIO = 1032  # the most bytes deflate can inflate one compressed byte to
_SURPLUS = 256 * 2**20  # inflating this much beyond the pixels costs well under a second


def _png_budget(data: bytes) -> str:
    """Why a PNG would make the decoder work beyond its pixels ("" when it would not): compressed
    data larger than the image stored raw, or a stream that inflates past what the image needs
    (libpng inflates it all: 24 GiB from a 25 MB file of 100x100), or text and ICC chunks past
    what PIL allows. Only data that could inflate more than _SURPLUS beyond the pixels is inflated
    here, at most the image's own bytes (a PHOENIX frame never is)."""
    if text := _png_text_budget(data):
        return text
    ihdr, idat = _png_idat(data)
    if len(ihdr) < 13:
        return ""
    need = _png_raw_size(ihdr)
    if len(idat) > need + need // 100 + 65536:  # a stored (uncompressed) stream is at most this
        return (f"its image data is {len(idat):,} bytes compressed, more than its pixels take raw "
                f"({need:,}): not decoded")
    if len(idat) * _DEFLATE_RATIO <= need + _SURPLUS:
        return ""  # whatever it holds, it cannot inflate past the budget: not inflated here
    try:
        got = zlib.decompressobj().decompress(idat, need + 1)
    except zlib.error:
        return ""  # damaged: the decoder says so
    if len(got) > need:
        return (f"its image data inflates past the {need:,} bytes its pixels need (surplus data a "
                "decoder would inflate whole): not decoded")
    return ""


def jpeg_scans(data: bytes) -> int:
    """How many scans (SOS segments) a JPEG holds, from its markers: bytes FF DA inside a segment
    (an EXIF block, a comment) or inside a scan's data are no scan."""
    return sum(1 for marker, _ in _jpeg_segments(data) if marker == 0xDA)


def _jpeg_budget(data: bytes, max_scans: int) -> str:
    """Why a JPEG would make the decoder work beyond its pixels: more scans than max_scans (each is
    a pass over the image); "" when it would not."""
    scans = jpeg_scans(data)
    if scans > max_scans:
        return f"{scans:,} scans, more than --max-scans {max_scans:,}: not decoded"
    return ""


def over_budget(data: bytes, max_scans: int = MAX_SCANS) -> str:
    """The note of a PNG or JPEG refused for the work it would make the decoder do beyond its
    pixels (`over_budget`), "" when it is within the budget."""
    if data.startswith(PNG_SIGNATURE):
        return _png_budget(data)
    return _jpeg_budget(data, max_scans) if data.startswith(JPEG_SIGNATURE) else ""


def _refused(data: bytes, name: str, max_pixels: int,
             max_scans: int = MAX_SCANS) -> tuple[str, str, str]:
    """(the status a failed decode gets, and the status and note that refuse the bytes before
    decoding, or "", "")."""
    if not data:
        return "", STATUS_EMPTY, ""
    if data.startswith(PNG_SIGNATURE):
        corrupt = STATUS_CORRUPT
    elif data.startswith(JPEG_SIGNATURE):
        corrupt = STATUS_CORRUPT_JPEG
        if not data.rstrip(b"\0").endswith(b"\xff\xd9"):  # libjpeg would fill the rest with grey
            return corrupt, corrupt, "truncated (no end-of-image marker)"
    else:
        return "", _not_an_image(name), ""
    size = image_size(data)
    if size is None:
        return corrupt, corrupt, "no image size in its header"
    big = too_large(*size, max_pixels)
    if big:
        return corrupt, STATUS_TOO_LARGE, big
    costly = over_budget(data, max_scans)
    return corrupt, STATUS_OVER_BUDGET if costly else "", costly


_said_file: list = []  # the one temporary file a process's decoders' stderr goes to, made once
_SAID_LOCK = threading.Lock()
_TRUNCATED = "premature end of data segment"  # libjpeg: the rest of the image is made up (grey)
# Lines other threads of the process may write meanwhile (a family's library runs on beside the
# decode): not the decoder's words, so they go back to stderr, not into a note. Log prefixes
# (glog, Python's logging) here; each family's own lines are its LOG_LINES (a regex).
_LOG_PREFIXES = r"^(INFO|WARNING|ERROR|FATAL): |^[IWEF]\d{4} "


@cache
def _not_decoder(families: tuple[str, ...]) -> re.Pattern[str]:
    """The lines that are not the decoder's, for the families this process has loaded (the
    built-in ones and an installed one it runs: `loaded()`; one loaded later makes another
    pattern)."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    own = [family(n).LOG_LINES for n in families]
    return re.compile("|".join([_LOG_PREFIXES, *filter(None, own)]))


def _imdecode(data: bytes) -> tuple[np.ndarray | None, str]:
    """cv2.imdecode, and what libpng or libjpeg wrote to stderr meanwhile (their warnings and
    errors: a CRC error, data that ends early), which would otherwise reach only a worker's log."""
    with _SAID_LOCK:  # fd 2 is the process's: one decode at a time redirects it
        try:
            if not _said_file:
                _said_file.append(tempfile.TemporaryFile())  # noqa: SIM115 (kept for the process)
            fd = _said_file[0].fileno()
            saved = os.dup(2)
        except OSError:  # no stderr to catch (closed), or no temporary file: decode as it is
            return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED), ""
        try:
            os.dup2(fd, 2)
            img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        return img, _caught(fd)


def _caught(fd: int) -> str:
    """What the decoder wrote to the file behind `fd`, which is emptied; other threads' lines go
    back to stderr."""
    said = ""
    size = os.fstat(fd).st_size
    if size:
        text = os.pread(fd, min(size, 65536), 0).decode("utf-8", "replace")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        from phoenix_keypoints.extract.keypoints.estimator import loaded

        not_decoder = _not_decoder(tuple(name for name, _ in loaded()))
        others = [line for line in lines if not_decoder.search(line)]
        if others:
            os.write(2, ("\n".join(others) + "\n").encode())
        said = "; ".join(dict.fromkeys(line for line in lines if line not in others))
    return said[:300]


def _exif_orientation(data: bytes) -> int:
    """A JPEG's EXIF orientation (1-8; 1 when it has none), from its APP1 segment's first IFD."""
    i = 2
    while i + 4 <= len(data) and data[i] == 0xFF and data[i + 1] not in (0xDA, 0xD9):
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if data[i + 1] == 0xE1 and data[i + 4:i + 10] == b"Exif\0\0":
            return _ifd0_orientation(data[i + 10:i + 2 + length])
        i += 2 + length
    return 1


def _ifd0_orientation(tiff: bytes) -> int:
    """Tag 0x0112 of a TIFF header's first IFD, 1 when absent or unreadable."""
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return 1
    ifd = struct.unpack(order + "I", tiff[4:8])[0]
    if ifd + 2 > len(tiff):
        return 1
    for k in range(struct.unpack(order + "H", tiff[ifd:ifd + 2])[0]):
        at = ifd + 2 + 12 * k
        if at + 12 > len(tiff):
            break
        tag, kind, _, value = struct.unpack(order + "HHIH", tiff[at:at + 10])
        if tag == 0x0112 and kind == 3:
            return value if 1 <= value <= 8 else 1
    return 1


# EXIF orientation -> the pixels made upright (as a viewer shows them, and as a video's display
# rotation is applied): flips and quarter turns (np.rot90 turns counter-clockwise)
_UPRIGHT = {
    2: lambda a: a[:, ::-1], 3: lambda a: np.rot90(a, 2), 4: lambda a: a[::-1],
    5: lambda a: a.transpose(1, 0, 2), 6: lambda a: np.rot90(a, -1),
    7: lambda a: np.rot90(a, 2).transpose(1, 0, 2), 8: lambda a: np.rot90(a, 1),
}


def _upright(rgb: np.ndarray, data: bytes, notes: list[str]) -> np.ndarray:
    """A JPEG's pixels with its EXIF orientation applied, noted (a PNG is never turned)."""
    if not data.startswith(JPEG_SIGNATURE):
        return rgb
    orientation = _exif_orientation(data)
    if orientation == 1:
        return rgb
    notes.append(f"EXIF orientation {orientation} applied")
    return np.ascontiguousarray(_UPRIGHT[orientation](rgb))


def decode_frame(data: bytes, name: str = ".png", max_pixels: int = MAX_PIXELS,
                 max_scans: int = MAX_SCANS) -> tuple[np.ndarray | None, str, str]:
    """(rgb uint8 [H, W, 3] or None, status, note) from a PNG or JPEG file's bytes (`name` only
    picks the status of bytes that are neither). A frame whose header says more than max_pixels
    is `too_large` and never decoded, one that would cost the decoder more than its pixels
    `over_budget`; one whose header says no size is corrupt."""
    corrupt, refused, why = _refused(data, name, max_pixels, max_scans)
    if refused:
        return None, refused, why
    img, said = _imdecode(data)
    if img is None or img.size == 0:
        return None, corrupt, said
    if _TRUNCATED in said:  # decoded, but part of it is the decoder's filler, not the frame
        return None, corrupt, f"truncated data ({said})"
    notes = [f"decoder: {said}"] if said else []
    if img.dtype == np.uint16:
        img = (img >> 8).astype(np.uint8)
        notes.append("16-bit to 8-bit")
    elif img.dtype != np.uint8:
        return None, corrupt, f"unsupported sample type {img.dtype}"
    if img.ndim == 2 or img.shape[2] == 1:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
        notes.append("grayscale to RGB")
    elif img.shape[2] == 4:
        img = cv2.cvtColor(img, cv2.COLOR_BGRA2RGB)
        notes.append("alpha dropped")
    else:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    return _upright(img, data, notes), STATUS_OK, "; ".join(notes)


def read_frame(path: Path, digest: bool = True, max_pixels: int = MAX_PIXELS,
               max_scans: int = MAX_SCANS) -> tuple[np.ndarray | None, str, str, Source]:
    """(rgb uint8 [H, W, 3] or None, status, note, source). status is "ok" when rgb is usable.

    A file that was read but does not decode keeps its source: it is what the row was made from.
    """
    data, source, status, note = read_file(path, digest, max_pixels)
    if data is None:
        return None, status, note, source
    rgb, status, note = decode_frame(data, path.name, max_pixels, max_scans)
    return rgb, status, note, source
