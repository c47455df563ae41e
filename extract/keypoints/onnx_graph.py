"""Control flow in a user's ONNX file, read before onnxruntime opens it: loops no published pose or
detection model needs are refused at load, with the reason.

Published detectors and pose models (YOLOX, RTMDet, RTMPose, RTMW, DWPose, ViTPose, HRNet, as
exported by mmdeploy and rtmlib) hold no `Loop` at all: their work is fixed by their input's size.
A `Loop` runs its body M times (its first input), and while its condition holds; so a file is
refused whose Loop has no trip count (it runs while the condition, a value of the data, says so),
a trip count that is not a constant of the file (it comes from the data), or a constant one
above MAX_TRIPS (2^62 trips: for ever). A loop within these bounds, a `Scan` (its trips are its
input's length, bounded by a tensor that exists) and anything else a graph does are bounded at
run time instead (extract/keypoints/model_calls.py).

The graph is read by walking the protobuf wire format (extract/keypoints/onnx_files.py): the
model's graph and functions, each node's subgraphs (If, Loop, Scan bodies) to any depth, a name
looked up in the graph that holds the node and then the graphs around it.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.onnx_files import (
    _MAX_DEPTH,
    _fields,
    _Malformed,
    _open_regular,
    _varint,
)

MAX_TRIPS = 10_000  # a Loop's constant trip count may be at most this
_INT64 = 7  # TensorProto.DataType.INT64


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _tensor_int(buf: Any, start: int, end: int) -> int | None:
    """The one int64 a TensorProto holds (a trip count), or None (another type, several values,
    data outside the file)."""
    kind, values = None, []
    for number, wire, a, b in _fields(buf, start, end):
        if number == 2 and wire == 0:
            kind = a
        elif number == 7 and wire == 0:
            values.append(_int64(a))
        elif number == 7 and wire == 2:
            values += _packed(buf, a, b)
        elif number == 9 and wire == 2 and (b - a) % 8 == 0:
            values += [v for (v,) in struct.iter_unpack("<q", bytes(buf[a:b]))]
        elif number == 14 and wire == 0 and a == 1:  # external data: not read here
            return None
    return values[0] if kind == _INT64 and len(values) == 1 else None


def _packed(buf: Any, start: int, end: int) -> list[int]:
    out, i = [], start
    while i < end:
        value, i = _varint(buf, i, end)
        out.append(_int64(value))
    return out


def _text(buf: Any, a: int, b: int) -> str:
    return bytes(buf[a:b]).decode("utf-8", "replace")


class _Graph:
    """One graph's (or function's) constants and the nodes it holds, read off the wire."""

    def __init__(self, buf: Any, start: int, end: int, node_field: int, outer: _Graph | None
                 ) -> None:
        self.buf, self.outer = buf, outer
        self.constants: dict[str, int | None] = {}  # name -> its int64, None: another constant
        self.nodes: list[tuple[int, int]] = []
        for number, wire, a, b in _fields(buf, start, end):
            if wire != 2:
                continue
            if number == node_field:
                self.nodes.append((a, b))
            elif number == 5 and node_field == 1:  # a graph's initializer
                name = next((_text(buf, s, e) for n, w, s, e in _fields(buf, a, b)
                             if n == 8 and w == 2), "")
                self.constants[name] = _tensor_int(buf, a, b)
        for a, b in self.nodes:
            self._constant_node(a, b)

    def _constant_node(self, start: int, end: int) -> None:
        fields = list(_fields(self.buf, start, end))
        if next((_text(self.buf, a, b) for n, w, a, b in fields if n == 4 and w == 2), "") \
                != "Constant":
            return
        out = next((_text(self.buf, a, b) for n, w, a, b in fields if n == 2 and w == 2), "")
        value = None
        for n, w, a, b in fields:
            if n == 5 and w == 2:
                attr = list(_fields(self.buf, a, b))
                name = next((_text(self.buf, s, e) for m, x, s, e in attr if m == 1 and x == 2), "")
                if name == "value":
                    value = next((_tensor_int(self.buf, s, e) for m, x, s, e in attr
                                  if m == 5 and x == 2), None)
                elif name == "value_int":
                    value = next((_int64(s) for m, x, s, _ in attr if m == 3 and x == 0), None)
        self.constants[out] = value

    def constant(self, name: str) -> tuple[bool, int | None]:
        """(whether `name` is a constant of this graph or one around it, its int64 if one)."""
        graph: _Graph | None = self
        while graph is not None:
            if name in graph.constants:
                return True, graph.constants[name]
            graph = graph.outer
        return False, None


def _loop_problem(graph: _Graph, inputs: list[str]) -> str:
    """Why a Loop node with these inputs is refused ("" when it is not)."""
    trips = inputs[0] if inputs else ""
    if not trips:
        return "a Loop without a trip count (it runs for as long as its condition, a value of " \
               "the data, holds)"
    known, value = graph.constant(trips)
    if not known:
        return f"a Loop whose trip count ({trips!r}) comes from the data"
    if value is None:
        return f"a Loop whose trip count ({trips!r}) is no single int64 the file holds"
    if value > MAX_TRIPS:
        return f"a Loop of {value:,} trips, more than the {MAX_TRIPS:,} a model's loop may run"
    return ""


def _walk(graph: _Graph, depth: int) -> str:
    """The first refused Loop in a graph and the subgraphs of its nodes ("" when none)."""
    if depth > _MAX_DEPTH:
        raise _Malformed(f"subgraphs nested deeper than {_MAX_DEPTH}")
    buf = graph.buf
    for start, end in graph.nodes:
        fields = list(_fields(buf, start, end))
        op = next((_text(buf, a, b) for n, w, a, b in fields if n == 4 and w == 2), "")
        if op == "Loop":
            why = _loop_problem(graph, [_text(buf, a, b) for n, w, a, b in fields
                                        if n == 1 and w == 2])
            if why:
                return why
        for n, w, a, b in fields:
            if n != 5 or w != 2:
                continue
            for m, x, s, e in _fields(buf, a, b):  # an attribute's graph (6) or graphs (11)
                if m in (6, 11) and x == 2:
                    why = _walk(_Graph(buf, s, e, 1, graph), depth + 1)
                    if why:
                        return why
    return ""


_read: dict[tuple[int, int, int, int], str] = {}  # (dev, inode, size, mtime) -> the refusal


def graph_problem(path: Path, flag: str) -> str:
    """Why the model's control flow is refused ("" when it is not): the first Loop of its graph or
    functions that no published model needs (a file read once per process)."""
    fd = _open_regular(Path(path), flag, follow=True)
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in _read:
            _read[key] = _model_problem(fd) if st.st_size else ""
        return _read[key]
    except _Malformed as e:
        raise ModelFileError(f"{flag} {path}: not an ONNX model ({e}). Pass the .onnx file itself "
                             "(unzip rtmlib's downloads first).") from None
    finally:
        os.close(fd)


def _model_problem(fd: int) -> str:
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
        for number, wire, a, b in _fields(buf, 0, len(buf)):
            if wire == 2 and number in (7, 25):  # the graph; a function (its nodes: field 7)
                why = _walk(_Graph(buf, a, b, 1 if number == 7 else 7, None), 0)
                if why:
                    return why
    return ""


def check_graph(path: Path, flag: str) -> None:
    """Refuse a model whose control flow no published pose or detection model needs."""
    why = graph_problem(path, flag)
    if why:
        raise ModelFileError(f"{flag} {path}: its graph holds {why}. No published detector or "
                             "pose model loops (their work is fixed by their input's size): this "
                             "file is refused before it runs. Pass the .onnx file of a detector or "
                             "pose model (docs/wholebody.md).")
