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

The graph is read by walking the protobuf wire format (extract/keypoints/onnx_files.py, bounded,
each field read as protobuf reads it: a NodeProto saying `op_type` "Identity" then "Loop" is a
Loop): the model's graph and functions, each node's subgraphs (If, Loop, Scan bodies) to any
depth (64), a name looked up in the graph that holds the node and then the graphs around it; a
name that graph's inputs or other nodes' outputs define is the data's, and one defined twice is
no known constant.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.onnx_files import (
    _MAX_DEPTH,
    _Malformed,
    _Msg,
    _varint,
    advised,
    walked,
)

MAX_TRIPS = 10_000  # a Loop's constant trip count may be at most this
_INT64 = 7  # TensorProto.DataType.INT64
_VALUES = {b"value", b"value_int", b"value_ints", b"value_float", b"value_floats", b"value_string",
           b"value_strings", b"sparse_value"}  # the attributes a Constant node holds its value in


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _tensor_int(t: _Msg) -> int | None:
    """The one int64 a TensorProto holds (a trip count), or None (another type, several values,
    data outside the file). Its fields as protobuf keeps them: the last data_type, raw_data and
    data_location; int64_data accumulated (counted to two, never listed)."""
    buf = t.wire.buf
    kind, raw, external, count, first = None, None, False, 0, 0
    for number, wire, a, b in t.fields():
        if number == 2 and wire == 0:
            kind = a
        elif number == 7 and wire == 0:
            count, first = count + 1, _int64(a) if count == 0 else first
        elif number == 7 and wire == 2 and a < b:
            value, i = _varint(buf, a, b)
            count, first = count + (1 if i == b else 2), _int64(value) if count == 0 else first
        elif number == 9 and wire == 2:
            raw = (a, b)
        elif number == 14 and wire == 0:
            external = a == 1
    if kind != _INT64 or external:
        return None
    if raw is not None:  # onnxruntime reads raw_data where there is one
        return struct.unpack("<q", buf[raw[0]:raw[1]])[0] if raw[1] - raw[0] == 8 and not count \
            else None
    return first if count == 1 else None


def _constant_value(node: _Msg) -> int | None:
    """The int64 a Constant node gives, or None (another value, or more than one attribute)."""
    found: list[tuple[bytes, _Msg]] = []
    for one in node.each(5):
        name = one.text(1)
        if name in _VALUES:
            found.append((name, one))
            if len(found) > 1:
                return None
    if not found or found[0][1].last(21, 2):  # ref_attr_name: the caller's value
        return None
    name, attr = found[0]
    if name == b"value":
        return _tensor_int(attr.one(5))
    if name == b"value_int":
        i = attr.last(3, 0)
        return _int64(i[0]) if i else None
    return None


class _Graph:
    """One graph's (or function's) constants and the names its data defines, read off the wire in
    one pass; its nodes are read again as it is walked, never held."""

    def __init__(self, msg: _Msg, node_field: int, outer: _Graph | None) -> None:
        self.msg, self.node_field, self.outer = msg, node_field, outer
        self.constants: dict[bytes, int | None] = {}  # name -> its int64, None: another constant
        self.data: set[bytes] = set()  # inputs and other nodes' outputs: values of the data
        for number, wire, a, b in msg.fields():
            if wire != 2:
                continue
            one = _Msg(msg.wire, ((a, b),))
            if number == node_field:
                self._node(one)
            elif number == 5 and node_field == 1:  # a graph's initializer
                self._define(one.text(8), _tensor_int(one))
            elif number == 11 and node_field == 1:  # a graph's input
                self.data.add(msg.wire.name(one.text(1)))
            elif number == 4 and node_field == 7:  # a function's input
                self.data.add(msg.wire.name(bytes(msg.wire.buf[a:b])))

    def _node(self, node: _Msg) -> None:
        node.wire.node()
        if node.text(4) == b"Constant":
            self._define(next(node.texts(2), b""), _constant_value(node))
        else:
            self.data.update(node.wire.name(out) for out in node.texts(2))

    def _define(self, name: bytes, value: int | None) -> None:
        """A constant; one defined twice is none known (which one onnxruntime keeps is not ours
        to guess)."""
        self.constants[self.msg.wire.name(name)] = None if name in self.constants else value

    def constant(self, name: bytes) -> tuple[bool, int | None]:
        """(whether `name` is a constant of this graph or one around it, its int64 if one); a name
        that the data defines in a graph on the way out is the data's."""
        graph: _Graph | None = self
        while graph is not None:
            if name in graph.data:
                return False, None
            if name in graph.constants:
                return True, graph.constants[name]
            graph = graph.outer
        return False, None


def _loop_problem(graph: _Graph, node: _Msg) -> str:
    """Why a Loop node is refused ("" when it is not)."""
    trips = next(node.texts(1), b"")
    shown = trips.decode("utf-8", "replace")
    if not trips:
        return "a Loop without a trip count (it runs for as long as its condition, a value of " \
               "the data, holds)"
    known, value = graph.constant(trips)
    if not known:
        return f"a Loop whose trip count ({shown!r}) comes from the data"
    if value is None:
        return f"a Loop whose trip count ({shown!r}) is no single int64 the file holds"
    if value > MAX_TRIPS:
        return f"a Loop of {value:,} trips, more than the {MAX_TRIPS:,} a model's loop may run"
    return ""


def _subgraphs(node: _Msg) -> Iterator[_Msg]:
    """Each graph a node's attributes hold: `g` (every occurrence, merged) and each of `graphs`."""
    for attr in node.each(5):
        merged = False
        for number, wire, a, b in attr.fields():
            if number == 11 and wire == 2:
                yield _Msg(attr.wire, ((a, b),))
            elif number == 6 and wire == 2 and not merged:
                merged = True
                yield attr.one(6)


def _walk(graph: _Graph, depth: int) -> str:
    """The first refused Loop in a graph and the subgraphs of its nodes ("" when none)."""
    if depth > _MAX_DEPTH:
        raise _Malformed(f"subgraphs nested deeper than {_MAX_DEPTH}")
    for node in graph.msg.each(graph.node_field):
        why = _loop_problem(graph, node) if node.text(4) == b"Loop" else ""
        if why:
            return why
        for sub in _subgraphs(node):
            why = _walk(_Graph(sub, 1, graph), depth + 1)
            if why:
                return why
    return ""


def _model_problem(model: _Msg) -> str:
    """The first refused Loop of the model's graph (every occurrence of it, merged) or functions."""
    why = _walk(_Graph(model.one(7), 1, None), 0) if model.has(7) else ""
    for function in model.each(25):  # its nodes: field 7
        why = why or _walk(_Graph(function, 7, None), 0)
    return why


_read: dict[tuple[int, int, int, int], str] = {}  # (dev, inode, size, mtime) -> the refusal


def graph_problem(path: Path, flag: str, advice: str = "") -> str:
    """Why the model's control flow is refused ("" when it is not): the first Loop of its graph or
    functions that no published model needs (a file read once per process)."""
    return walked(path, flag, _model_problem, _read, advice)


def check_graph(path: Path, flag: str, advice: str = "") -> None:
    """Refuse a model whose control flow no published pose or detection model needs (`advice`:
    the family's own words after the refusal, as check_model_file's)."""
    why = graph_problem(path, flag, advice)
    if why:
        raise ModelFileError(f"{flag} {path}: its graph holds {why}. No published detector or "
                             "pose model loops (their work is fixed by their input's size): this "
                             f"file is refused before it runs. Pass the model's .onnx file"
                             f"{advised(advice)}.")
