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
import os
import stat
from pathlib import Path
from typing import BinaryIO

from extract.keypoints.frames import irregular

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


def decoder_path(path: Path | str) -> str:
    """The absolute path of a regular file, for a library that opens by name (an absolute name is
    never a URL); NotRegular when it is none."""
    with open_corpus_file(path):
        return os.path.abspath(path)
