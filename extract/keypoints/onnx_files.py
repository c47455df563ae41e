"""What a user's ONNX file may make onnxruntime open, checked by us before onnxruntime opens it.

A model file is untrusted input. onnxruntime reads, besides the file itself, every *external data*
file its tensors name (`location`, relative to the model's folder); onnxruntime before 1.24 read
any path there (`../../etc/ld.so.cache`, an absolute path, a link out of the folder), so the tool
checks them itself, whatever onnxruntime is installed: each location must be a plain relative
path without `..`, naming a regular file inside the model's folder reached through no link. The
files found are hashed into the model's record, so a rewritten `w.bin` is a changed model.

The file's tensors are found by walking the protobuf wire format along ONNX's schema (model ->
graph -> initializers, nodes' attribute tensors and subgraphs, sparse tensors, functions,
training graphs): no onnx package at run time, tensor bytes skipped by length, not read.
The model path itself must be a regular file: a FIFO or a device (a link to /dev/zero) is named,
never opened.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.frames import irregular

_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
_MAX_DEPTH = 64  # nested subgraphs deeper than any exported model: refused, not recursed into
# (message, field number) -> the message that field holds; only the paths that lead to tensors
_SCHEMA: dict[str, dict[int, str]] = {
    "model": {7: "graph", 20: "training", 25: "function"},
    "training": {1: "graph", 2: "graph"},
    "function": {7: "node"},
    "graph": {1: "node", 5: "tensor", 15: "sparse"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "sparse": {1: "tensor", 2: "tensor"},
}


class _Malformed(Exception):
    pass


def _varint(buf: Any, i: int, end: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= end or shift > 63:
            raise _Malformed("a varint runs past its message")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf: Any, i: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, value or start, end) of each field of one message."""
    while i < end:
        key, i = _varint(buf, i, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i, end)
            yield number, wire, value, i
        elif wire == 2:
            size, i = _varint(buf, i, end)
            if i + size > end:
                raise _Malformed("a field runs past its message")
            yield number, wire, i, i + size
            i += size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise _Malformed(f"wire type {wire}")
    if i != end:
        raise _Malformed("a field runs past its message")


def _tensor_location(buf: Any, start: int, end: int) -> str | None:
    """The external data location a TensorProto names (None: its data is inside the file)."""
    location, external = None, False
    for number, wire, a, b in _fields(buf, start, end):
        if number == 14 and wire == 0:
            external = a == _EXTERNAL
        elif number == 13 and wire == 2:
            entry = {n: bytes(buf[s:e]) for n, w, s, e in _fields(buf, a, b) if w == 2}
            if entry.get(1) == b"location":
                location = entry.get(2, b"").decode("utf-8", "surrogateescape")
    return location if external or location is not None else None


def _locations(buf: Any, kind: str, start: int, end: int, depth: int = 0) -> Iterator[str]:
    if depth > _MAX_DEPTH:
        raise _Malformed(f"subgraphs nested deeper than {_MAX_DEPTH}")
    if kind == "tensor":
        loc = _tensor_location(buf, start, end)
        if loc is not None:
            yield loc
        return
    inner = _SCHEMA[kind]
    for number, wire, a, b in _fields(buf, start, end):
        if wire == 2 and number in inner:
            yield from _locations(buf, inner[number], a, b, depth + 1)


def model_problem(path: Path) -> str:
    """Why the model path cannot be a model file ("" when it is a regular file): said before
    anything opens it, so a FIFO is never waited on and a device never read."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a link to nothing" if os.path.islink(path) else "no such file"
    except OSError as e:
        return f"cannot be read ({e.strerror or type(e).__name__})"
    why = irregular(st)
    if why and os.path.islink(path):
        return f"a link to {why} ({os.path.realpath(path)}), not a model file"
    return f"{why}, not a model file" if why else ""


_walked: dict[tuple[int, int, int, int], list[str]] = {}  # (dev, inode, size, mtime) -> locations


def external_locations(path: Path, flag: str) -> list[str]:
    """Every external data location the model names, in order, each once (a file walked once
    per process: a run makes several sessions of each model)."""
    fd = _open_regular(Path(path), flag, follow=True)
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in _walked:
            if st.st_size == 0:
                return []
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
                _walked[key] = list(dict.fromkeys(_locations(buf, "model", 0, len(buf))))
        return list(_walked[key])
    except _Malformed as e:
        raise ModelFileError(f"{flag} {path}: not an ONNX model ({e}). Pass the .onnx file itself "
                             "(unzip rtmlib's downloads first).") from None
    finally:
        os.close(fd)


def _open_regular(path: Path, flag: str, follow: bool) -> int:
    """A file descriptor of a regular file (O_NONBLOCK: a FIFO swapped in is not waited on)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    except OSError as e:
        raise ModelFileError(f"{flag} {path}: cannot be read ({e.strerror or e}).") from None
    why = irregular(os.fstat(fd))
    if why:
        os.close(fd)
        raise ModelFileError(f"{flag} {path}: {why}, not a model file.")
    return fd


def external_file(model: Path, location: str, flag: str) -> Path:
    """The file an external data location names, refused unless it is a regular file inside the
    model's folder, reached by a plain relative path without `..` and through no link."""
    def refuse(why: str) -> ModelFileError:
        return ModelFileError(f"{flag} {model}: its external data location {location!r} {why}. "
                              "A model's external data must be plain files in its own folder; "
                              "this file is refused (it could make onnxruntime read other files).")
    parts = location.split("/")
    if not location or "\x00" in location or "\\" in location:
        raise refuse("is not a plain file name")
    if location.startswith("/"):
        raise refuse("is an absolute path")
    if ".." in parts:
        raise refuse("climbs out of the model's folder (`..`)")
    here = Path(model).absolute().parent
    for k, part in enumerate(p for p in parts if p not in ("", ".")):
        here = here / part
        try:
            st = os.lstat(here)
        except OSError:
            raise refuse("names no file beside the model") from None
        if stat.S_ISLNK(st.st_mode):
            raise refuse(f"goes through a link ({here.name})")
        last = k == len([p for p in parts if p not in ("", ".")]) - 1
        if not last and not stat.S_ISDIR(st.st_mode):
            raise refuse("names no file beside the model")
        if last and irregular(st):
            raise refuse(f"is {irregular(st)}")
    return here


def sha256_of(path: Path, flag: str, follow: bool = True) -> tuple[str, int]:
    """(sha256, size) of a regular file's bytes, read through one descriptor."""
    fd = _open_regular(Path(path), flag, follow)
    h, size = hashlib.sha256(), 0
    try:
        while block := os.read(fd, 1 << 20):
            h.update(block)
            size += len(block)
    finally:
        os.close(fd)
    return h.hexdigest(), size


def check_model_file(path: Path, flag: str) -> list[tuple[str, Path]]:
    """Refuse a model path that is no regular file or whose external data leaves its folder;
    each external data location with the file it names, in the model's order. Run before every
    onnxruntime session is made, in every process."""
    why = model_problem(path)
    if why:
        raise ModelFileError(f"{flag} {path}: {why}. Pass the .onnx file of the model "
                             "(docs/wholebody.md says where rtmlib's published models are).")
    return [(loc, external_file(path, loc, flag)) for loc in external_locations(path, flag)]


def as_given(path: Path) -> tuple[str, str]:
    """(the path to record, where its links lead) of a model path: absolute but not resolved
    through links, since onnxruntime opens the path as given and reads external data beside it
    (beside a link, not beside its target). `..` is folded away only where that names the same
    folder; the second is recorded beside the first where it differs."""
    given = Path(path).absolute()
    tidy = Path(os.path.abspath(path))
    try:
        same = os.path.samefile(tidy.parent, given.parent) and os.path.samefile(tidy, given)
    except OSError:
        same = False
    shown = tidy if same else given
    return str(shown), str(Path(path).resolve())


def external_record(path: Path, flag: str) -> list[dict[str, Any]]:
    """The model's external data files as recorded (location, sha256, size): part of the model."""
    out = []
    for location, file in check_model_file(path, flag):
        sha, size = sha256_of(file, flag, follow=False)
        out.append({"location": location, "sha256": sha, "size": size})
    return out


def external_problems(path: Path, recorded: list[dict[str, Any]], flag: str) -> list[str]:
    """What differs between the external data files a run recorded and those beside the model
    now (gone, refused, other bytes)."""
    out = []
    for rec in recorded:
        try:
            now = sha256_of(external_file(path, rec["location"], flag), flag, follow=False)
        except ModelFileError as e:
            out.append(str(e))
            continue
        if now != (rec["sha256"], rec["size"]):
            out.append(f"{flag} {path}: its external data {rec['location']!r} is not the file "
                       f"this run was made with (sha256 {rec['sha256']}). Put that file back, "
                       "or start a new --out.")
    return out
