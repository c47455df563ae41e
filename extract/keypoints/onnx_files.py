"""What a user's ONNX file may make onnxruntime open, checked by us before onnxruntime opens it.

A model file is untrusted input. onnxruntime reads, besides the file itself, every *external data*
file its tensors name (`location`, relative to the model's folder); onnxruntime before 1.24 read
any path there (`../../etc/ld.so.cache`, an absolute path, a link out of the folder), so the tool
checks them itself, whatever onnxruntime is installed: each location must be a plain relative
path without `..`, naming a regular file inside the model's folder reached through no link. The
files found are hashed into the model's record, so a rewritten `w.bin` is a changed model.

The file's tensors are found by walking the protobuf wire format along ONNX's schema (model ->
graph -> initializers, nodes' attribute tensors and subgraphs, sparse tensors, functions,
training graphs): no onnx package at run time, tensor bytes skipped by length, not read. Fields
are read as protobuf's parser (and so onnxruntime) reads them: a singular field's last value on
the wire wins, a repeated field's values accumulate, a singular message given twice is one message
(merged). Each walk is bounded whatever the file holds: it reads lazily, holding nothing it is not
asked for, and a file of more than MAX_NODES nodes, or whose walk would read more than MAX_FIELDS
fields or keep more than MAX_NAMES names, is refused naming the limit (a graph of 6,000
convolutions reads 474,019 fields: docs/outputs.md).
The model path itself must be a regular file: a FIFO or a device (a link to /dev/zero) is named,
never opened.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.frames import irregular

T = TypeVar("T")
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


MAX_NODES = 100_000  # nodes of its graphs, functions, subgraphs (published: a few thousand)
MAX_FIELDS = 3_000_000  # protobuf fields one walk reads (6,000 convolutions: 474,019)
MAX_NAMES = 200_000  # names the loop check keeps (initializers, inputs, outputs of nodes)
_SINGULAR = {("model", 7), ("training", 1), ("training", 2), ("attribute", 5), ("attribute", 6),
             ("attribute", 22), ("sparse", 1), ("sparse", 2)}  # message fields that are not repeated


class _Malformed(Exception):
    pass


class _TooBig(Exception):
    """A walk that passed MAX_NODES or MAX_FIELDS: the file is refused, whatever else it holds."""


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


class _Wire:
    """A file's bytes, read field by field with every read counted: a walk is bounded by
    MAX_FIELDS reads and MAX_NODES nodes whatever the file holds (30,000,000 empty nodes took 73 s
    and 4 GB before, issue 52), and nothing of it is held but what a check asks for."""

    def __init__(self, buf: Any) -> None:
        self.buf, self.reads, self.nodes, self.names = buf, 0, 0, 0

    def node(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooBig(f"its graphs hold more than {MAX_NODES:,} nodes")

    def name(self, name: bytes) -> bytes:
        """A name a walk keeps, counted: what it holds is bounded too (the names' own bytes by
        the file's size)."""
        self.names += 1
        if self.names > MAX_NAMES:
            raise _TooBig(f"its graphs define more than {MAX_NAMES:,} names")
        return name

    def fields(self, spans: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int, int, int]]:
        """(field number, wire type, value or start, end) of each field of the spans, in order."""
        for start, end in spans:
            yield from self._fields(start, end)

    def _fields(self, i: int, end: int) -> Iterator[tuple[int, int, int, int]]:
        buf = self.buf
        while i < end:
            self.reads += 1
            if self.reads > MAX_FIELDS:
                raise _TooBig(f"it holds more than {MAX_FIELDS:,} protobuf fields to read")
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


class _Msg:
    """One message as protobuf's parser builds it, read lazily off the wire: a singular message
    field given several times is one message, the fields of each occurrence in wire order
    (merged); a singular scalar's last value wins; a repeated field's values accumulate."""

    def __init__(self, wire: _Wire, spans: tuple[tuple[int, int], ...] = (),
                 parent: _Msg | None = None, number: int = 0) -> None:
        self.wire, self.spans, self.parent, self.number = wire, spans, parent, number

    def __iter__(self) -> Iterator[tuple[int, int]]:
        if self.parent is None:
            yield from self.spans
            return
        for n, w, a, b in self.parent.fields():
            if n == self.number and w == 2:
                yield a, b

    def fields(self) -> Iterator[tuple[int, int, int, int]]:
        return self.wire.fields(self)

    def one(self, number: int) -> _Msg:
        """Singular message field `number` (every occurrence merged; empty when absent)."""
        return _Msg(self.wire, parent=self, number=number)

    def each(self, number: int) -> Iterator[_Msg]:
        """Each value of repeated message field `number`."""
        for n, w, a, b in self.fields():
            if n == number and w == 2:
                yield _Msg(self.wire, ((a, b),))

    def has(self, number: int) -> bool:
        return any(n == number and w == 2 for n, w, _, _ in self.fields())

    def last(self, number: int, wire: int) -> tuple[int, int] | None:
        """Singular scalar field `number` as protobuf keeps it: its last value on the wire."""
        found = None
        for n, w, a, b in self.fields():
            if n == number and w == wire:
                found = (a, b)
        return found

    def text(self, number: int) -> bytes:
        """Singular string field `number` (its last value; b"" when absent)."""
        found = self.last(number, 2)
        return bytes(self.wire.buf[found[0]:found[1]]) if found else b""

    def texts(self, number: int) -> Iterator[bytes]:
        """Each value of repeated string field `number`."""
        for n, w, a, b in self.fields():
            if n == number and w == 2:
                yield bytes(self.wire.buf[a:b])


def _tensor_locations(t: _Msg) -> Iterator[str]:
    """Every external data location a TensorProto names (none: its data is inside the file)."""
    for entry in t.each(13):
        if entry.text(1) == b"location":
            yield entry.text(2).decode("utf-8", "surrogateescape")


def _locations(msg: _Msg, kind: str, depth: int = 0) -> Iterator[str]:
    if depth > _MAX_DEPTH:
        raise _Malformed(f"subgraphs nested deeper than {_MAX_DEPTH}")
    if kind == "tensor":
        yield from _tensor_locations(msg)
        return
    if kind == "node":
        msg.wire.node()
    inner, merged = _SCHEMA[kind], set()
    for number, wire, a, b in msg.fields():
        if wire != 2 or number not in inner or number in merged:
            continue
        if (kind, number) in _SINGULAR:  # every occurrence walked as the one message it is
            merged.add(number)
            yield from _locations(msg.one(number), inner[number], depth + 1)
        else:
            yield from _locations(_Msg(msg.wire, ((a, b),)), inner[number], depth + 1)


def advised(advice: str) -> str:
    """A family's own words on its model files, after a refusal's neutral ones ("" for none):
    the helpers here serve every family, so only the family knows where its models are."""
    return f" ({advice})" if advice else ""


def walked(path: Path, flag: str, walk: Callable[[_Msg], T],
           cache: dict[tuple[int, int, int, int], T], advice: str = "") -> T:
    """`walk` of a model file's top message, read through one descriptor of a regular file and
    kept in `cache` under its (device, inode, size, mtime); a ModelFileError for a file that is no
    ONNX model or that passes the walk's bounds (`advice`: the family's words, advised)."""
    fd = _open_regular(Path(path), flag, follow=True)
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in cache:
            if st.st_size == 0:
                cache[key] = walk(_Msg(_Wire(b""), ((0, 0),)))
            else:
                with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
                    cache[key] = walk(_Msg(_Wire(buf), ((0, len(buf)),)))
        return cache[key]
    except _Malformed as e:
        raise ModelFileError(f"{flag} {path}: not an ONNX model ({e}). Pass the .onnx file "
                             f"itself{advised(advice)}.") from None
    except _TooBig as e:
        raise ModelFileError(f"{flag} {path}: {e}, more than any published detector or pose "
                             "model: refused before onnxruntime reads it (the limit bounds the "
                             "tool's own reading of the file). Pass the model's .onnx file"
                             f"{advised(advice)}.") from None
    finally:
        os.close(fd)


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


def external_locations(path: Path, flag: str, advice: str = "") -> list[str]:
    """Every external data location the model names, in order, each once (a file walked once
    per process: a run makes several sessions of each model)."""
    return list(walked(path, flag, lambda m: list(dict.fromkeys(_locations(m, "model"))), _walked,
                       advice))


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


def check_model_file(path: Path, flag: str, advice: str = "") -> list[tuple[str, Path]]:
    """Refuse a model path that is no regular file or whose external data leaves its folder;
    each external data location with the file it names, in the model's order. Run before every
    onnxruntime session is made, in every process. `advice`: the family's own words after a
    refusal (where its models are; none: the neutral wording alone)."""
    why = model_problem(path)
    if why:
        raise ModelFileError(f"{flag} {path}: {why}. Pass the .onnx file of the model"
                             f"{advised(advice)}.")
    return [(loc, external_file(path, loc, flag))
            for loc in external_locations(path, flag, advice)]


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


def external_record(path: Path, flag: str, advice: str = "") -> list[dict[str, Any]]:
    """The model's external data files as recorded (location, sha256, size): part of the model."""
    out = []
    for location, file in check_model_file(path, flag, advice):
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
