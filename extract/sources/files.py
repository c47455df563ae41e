"""A corpus file handed to a decoder: the file itself, never its name read as a URL or an option.

A corpus is made by someone else, so what it names is data. FFmpeg reads a name with no '/' before
its first ':' as a protocol (`http:127.0.0.1:8899.mp4` is a request to that host, `subfile,,...:x`
another file's bytes), a link may lead to a device, a FIFO or a file of /proc, and a demuxer may
open files a video names inside it (ffconcat, HLS). So every decoder meets a corpus file here:

- `open_corpus_file`: the file on disk opened by this process, checked on the open descriptor to be
  a regular file outside the kernel's pseudo file systems (/proc, /sys, /dev) without blocking on
  a FIFO; PyAV gets this file object, never a name;
- `AV_OPTIONS`: the options PyAV opens it with: no protocol at all, so a demuxer can open nothing
  beside the file it was given;
- `decoder_path`: for a library that takes only a name (rapidgzip), the checked absolute path.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from phoenix_keypoints.extract.keypoints.frames import irregular
from phoenix_keypoints.extract.sources.base import is_utf8

AV_OPTIONS = {"protocol_whitelist": "none"}  # no demuxer may open a URL or another file


class NotRegular(OSError):
    """The name leads to something that is no regular file: never opened for reading."""


def not_regular(path: Path | str) -> str:
    """Why the file a path on disk leads to (through links) is not read, "" when it is a regular
    file, a folder or nothing (the caller says "missing"); nothing is opened."""
    if not isinstance(path, (str, os.PathLike)):
        return ""  # a member inside an archive: never a device
    try:
        st = os.stat(path)
    except OSError:
        return ""
    why = "" if stat.S_ISDIR(st.st_mode) else irregular(st)
    return f"{why}, not a regular file: not opened" if why else ""


def open_corpus_file(path: Path | str) -> BinaryIO:
    """The regular file at path, open for binary reading. NotRegular (an OSError) for a device,
    FIFO, socket or a file of /proc; the open never blocks and never gives a terminal."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(os.path.abspath(path), flags)
    try:
        why = irregular(os.fstat(fd))
        if why:
            raise NotRegular(errno.EINVAL, f"{why}, not a regular file: not opened")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def decoder_path(path: Path | str, end: int = 0) -> str | BinaryIO:
    """For a library that opens by name (rapidgzip): the absolute path of a regular file (an
    absolute name is never a URL), NotRegular when it is none; with `end`, the file's first `end`
    bytes as a file object instead (a gzip stream with bytes after it, see gzip_end); the same for
    a path whose bytes are no UTF-8, which the library would refuse to encode."""
    whole = os.path.abspath(path)
    if not end and not is_utf8(whole):  # a name the library cannot take (it wants UTF-8): the file
        with open_corpus_file(path) as f:
            end = os.fstat(f.fileno()).st_size
    if end:
        f = open_corpus_file(path)

        def read_at(pos: int, n: int) -> bytes:
            f.seek(pos)
            return f.read(n)

        return io.BufferedReader(FileView(read_at, end, f.close), 1 << 20)
    with open_corpus_file(path):
        return whole


class FileView(io.RawIOBase):
    """Bytes as a seekable file: reads at a position through `read_at` (a member of an archive,
    the head of a file); a damaged or cut archive surfaces as OSError (what readers of files
    expect), never the library's own error."""

    def __init__(self, read_at, size: int, on_close=None) -> None:
        super().__init__()
        self.read_at, self.size, self.pos, self.on_close = read_at, size, 0, on_close

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + pos)
        return self.pos

    def readinto(self, b) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        try:
            data = self.read_at(self.pos, n)
        except (RuntimeError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise OSError(f"cannot read it from the archive ({type(e).__name__}: {e})") from None
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed and self.on_close is not None:
            self.on_close()
        super().close()


def gzip_end(path: Path | str) -> int | None:
    """Where the last gzip member of a file ends when bytes that are no gzip member follow it (as
    gzip -t and GNU tar read such a file: the trailing bytes ignored), else None. Reads the whole
    file: only asked once rapidgzip has refused it."""
    with open_corpus_file(path) as f:
        pos = 0
        while f.read(2) == b"\x1f\x8b":
            f.seek(pos)
            d = zlib.decompressobj(31)
            while not d.eof:
                block = f.read(1 << 20)
                if not block:
                    return None  # cut inside a member: truncated, not trailing bytes
                d.decompress(block, 1 << 20)
                while d.unconsumed_tail and not d.eof:
                    d.decompress(d.unconsumed_tail, 1 << 20)
            pos = f.tell() - len(d.unused_data)
            f.seek(pos)
        return pos if pos and pos < os.fstat(f.fileno()).st_size else None
