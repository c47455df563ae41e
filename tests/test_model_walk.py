"""The tool's own walk of a model file, before onnxruntime opens it, bounded and read as protobuf
reads it (issue 52 item 2).

Files are tiny models made with onnx.helper (tests/tiny_onnx.py), then changed byte by byte: a
graph padded with empty nodes (a singular message given twice on the wire: protobuf merges the
two, so the nodes join the graph), a NodeProto whose `op_type` is on the wire twice, a Constant
whose attribute's name, int or tensor is given twice. protobuf's own parser (onnx's ModelProto)
is the reference for what each file holds: the last value of a singular field wins, repeated ones
accumulate, a singular message given twice is merged; onnxruntime builds its graph from that.
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from helpers import assert_no_traceback, run_cli
from tiny_onnx import looping, padded, tiny_models, twice_op_type
from tiny_onnx import wire_field as field
from tiny_onnx import wire_scalar as scalar

from phoenix_keypoints.extract.keypoints import onnx_files, onnx_graph
from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

onnx = pytest.importorskip("onnx")
LIMIT = getattr(onnx_files, "MAX_NODES", 100_000)  # (a597681 had none: seen walking on)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory.mktemp("models"))


def walk(path: Path) -> str:
    """Both of the tool's walks of a file, afresh (their answers are kept per file)."""
    onnx_files._walked.clear()
    onnx_graph._read.clear()
    onnx_files.external_locations(path, "--detector")
    return onnx_graph.graph_problem(path, "--detector")


# --- bounded whatever the file holds --------------------------------------------------------------
def test_a_graph_padded_past_the_node_limit_is_refused_at_once(
        models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a597681 30,000,000 empty nodes took 73 s and 4.17 GB (a MemoryError past 200 MB): now
    the walk stops at MAX_NODES (made small here to keep the test cheap), in time and memory that
    do not grow with the padding (100 times more of it here)."""
    monkeypatch.setattr(onnx_files, "MAX_NODES", 2_000, raising=False)
    small = padded(models["detector"], tmp_path / "small.onnx", 2_010)
    large = padded(models["detector"], tmp_path / "large.onnx", 201_000)
    assert len(onnx.load(str(small)).graph.node) > 2_000  # protobuf: the two graphs merged
    costs = []
    for path in (small, large):
        tracemalloc.start()
        t0 = time.monotonic()
        with pytest.raises(ModelFileError, match=f"--detector {path}: its graphs hold more than "
                                                 "2,000 nodes"):
            walk(path)
        costs.append((time.monotonic() - t0, tracemalloc.get_traced_memory()[1]))
        tracemalloc.stop()
    (t_small, m_small), (t_large, m_large) = costs
    assert m_large < 2 * m_small + (1 << 20), costs
    assert t_large < 3 * t_small + 0.5, costs


def test_a_walk_past_the_field_limit_is_refused(models: dict[str, Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Fields that are no nodes (unknown ones, skipped by protobuf) count too: a file of more
    fields than MAX_FIELDS is refused, naming the limit (made small here to keep the test cheap)."""
    monkeypatch.setattr(onnx_files, "MAX_FIELDS", 50_000, raising=False)
    path = tmp_path / "unknown.onnx"
    path.write_bytes(models["detector"].read_bytes() + scalar(99, 1) * 60_000)
    assert onnx.load(str(path)).graph.node  # protobuf reads it (the fields are unknown)
    with pytest.raises(ModelFileError, match="it holds more than 50,000 protobuf fields to read"):
        walk(path)


def test_a_walk_past_the_name_limit_is_refused(models: dict[str, Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The names the loop check keeps (graph inputs here, merged into the graph) are counted:
    past MAX_NAMES (made small here) refused, so what it holds is bounded too."""
    monkeypatch.setattr(onnx_files, "MAX_NAMES", 1_000, raising=False)
    path = tmp_path / "inputs.onnx"
    inputs = b"".join(field(11, field(1, b"in%d" % k)) for k in range(1_100))
    path.write_bytes(models["detector"].read_bytes() + field(7, inputs))
    assert len(onnx.load(str(path)).graph.input) > 1_100  # protobuf: the two graphs merged
    with pytest.raises(ModelFileError, match="its graphs define more than 1,000 names"):
        walk(path)


def test_run_refuses_a_padded_model_with_exit_2(models: dict[str, Path], sample_root: Path,
                                                tmp_path: Path) -> None:
    """The command: a message naming the file and the limit, exit 2, no traceback, no --out."""
    bad = padded(models["detector"], tmp_path / "padded.onnx", LIMIT + 1)
    frames = next((sample_root / "features" / "fullFrame-210x260px" / "dev").iterdir())
    t0 = time.monotonic()
    proc = run_cli(["run", "--dataset", frames, "--out", tmp_path / "R", "--estimator", "wholebody",
                    "--detector", bad, "--pose-model", models["pose"], "--workers", "1"], timeout=120)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert f"--detector {bad}: its graphs hold more than {LIMIT:,} nodes" \
        in proc.stderr, proc.stderr
    assert not (tmp_path / "R").exists() and time.monotonic() - t0 < 60


# --- read as protobuf reads it --------------------------------------------------------------------
def test_an_op_type_given_twice_is_the_last_one(models: dict[str, Path], tmp_path: Path) -> None:
    """On a597681 the walk read "Identity": the Loop was not refused and ran until the 60 s
    deadline. protobuf (and onnxruntime) keep "Loop": refused at load, at once."""
    bad = twice_op_type(models["detector"], tmp_path / "twice.onnx")
    assert sum(n.op_type == "Loop" for n in onnx.load(str(bad)).graph.node) == 1
    t0 = time.monotonic()
    assert walk(bad) == "a Loop of 4,611,686,018,427,387,904 trips, more than the 10,000 a " \
                        "model's loop may run"
    assert time.monotonic() - t0 < 5


def constant_trips(src: Path, out: Path, attribute: bytes) -> Path:
    """src with a Loop whose trip count is a Constant node's output; `attribute`: the bytes of
    that node's one AttributeProto (so a field can be given twice)."""
    model = onnx.load(str(looping(src, out, "dets", 7)))
    model.graph.initializer.remove(next(t for t in model.graph.initializer
                                        if t.name == "loop_trips"))
    node = onnx.helper.make_node("Constant", [], ["loop_trips"], value_int=0)
    del node.attribute[:]
    node_bytes = node.SerializeToString() + field(5, attribute)
    graph = model.graph.SerializeToString()
    model.ClearField("graph")
    out.write_bytes(model.SerializeToString() + field(7, field(1, node_bytes) + graph))
    return out


def tensor(value: int, *more: bytes) -> bytes:
    """A TensorProto of one int64 in raw_data, then `more` fields."""
    return scalar(2, 7) + field(9, int(value).to_bytes(8, "little", signed=True)) + b"".join(more)


BIG = 2**62
CASES = {  # name -> (the Constant's AttributeProto bytes, the trip count protobuf reads)
    "name-twice": (field(1, b"value") + field(5, tensor(5)) + scalar(3, BIG) + field(1, b"value_int")
                   + scalar(20, 2), BIG),
    "int-twice": (field(1, b"value_int") + scalar(3, 5) + scalar(3, BIG) + scalar(20, 2), BIG),
    "tensor-twice": (field(1, b"value") + field(5, tensor(5)) + field(5, tensor(BIG))
                     + scalar(20, 4), BIG),
    "raw-then-type": (field(1, b"value") + field(5, field(9, (BIG).to_bytes(8, "little")))
                      + field(5, scalar(2, 1)) + field(5, scalar(2, 7)) + scalar(20, 4), BIG),
    "small-last": (field(1, b"value_int") + scalar(3, BIG) + scalar(3, 5) + scalar(20, 2), 5),
}


def protobuf_trips(path: Path) -> int:
    """The trip count as protobuf's parser reads the file: the reference."""
    from onnx import numpy_helper

    node = next(n for n in onnx.load(str(path)).graph.node if n.op_type == "Constant")
    (attr,) = node.attribute
    return attr.i if attr.name == "value_int" else int(numpy_helper.to_array(attr.t).item())


@pytest.mark.parametrize("case", CASES)
def test_a_constants_fields_given_twice_are_read_as_protobuf_reads_them(
        case: str, models: dict[str, Path], tmp_path: Path) -> None:
    """An attribute's name, its int, its tensor (a singular message: merged), the tensor's type
    given twice: the walk sees the trip count protobuf sees. On a597681 it read the first name,
    int or tensor: a Loop of 2^62 trips passed as one of 5."""
    attribute, trips = CASES[case]
    path = constant_trips(models["detector"], tmp_path / f"{case}.onnx", attribute)
    assert protobuf_trips(path) == trips
    said = walk(path)
    assert said == ("" if trips <= onnx_graph.MAX_TRIPS else
                    f"a Loop of {trips:,} trips, more than the 10,000 a model's loop may run")


def test_the_wire_reader_keeps_what_protobuf_keeps() -> None:
    """Singular strings and ints: the last; repeated ones: all, in order; a singular message given
    twice: one, merged; each read off bytes protobuf's parser reads the same."""
    node = (field(4, b"Identity") + field(1, b"a") + field(4, b"Loop") + field(1, b"b")
            + field(5, field(1, b"x") + scalar(3, 1) + field(1, b"y") + scalar(3, 2)
                    + field(5, scalar(2, 1)) + field(5, field(8, b"t1")) + field(5, field(8, b"t2")))
            + field(3, b"n1") + field(3, b"n2"))
    ref = onnx.NodeProto.FromString(node)
    msg = onnx_files._Msg(onnx_files._Wire(node), ((0, len(node)),))
    assert msg.text(4).decode() == ref.op_type == "Loop"
    assert [t.decode() for t in msg.texts(1)] == list(ref.input) == ["a", "b"]
    assert msg.text(3).decode() == ref.name == "n2"
    (attr,) = list(msg.each(5))
    assert attr.text(1).decode() == ref.attribute[0].name == "y"
    assert attr.last(3, 0)[0] == ref.attribute[0].i == 2
    t = attr.one(5)
    assert t.text(8).decode() == ref.attribute[0].t.name == "t2"
    assert t.last(2, 0)[0] == ref.attribute[0].t.data_type == 1


def test_padding_merged_into_the_graph_is_walked_as_protobuf_merges_it(
        models: dict[str, Path], tmp_path: Path) -> None:
    """A Loop of 2^62 trips given in a second `graph` field (protobuf merges it into the first)
    is found, and its trip count looked up among the first one's initializers."""
    model = onnx.load(str(looping(models["detector"], tmp_path / "l.onnx", "dets", 2**62)))
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    model.graph.node.remove(loop)
    path = tmp_path / "split.onnx"
    path.write_bytes(model.SerializeToString() + field(7, field(1, loop.SerializeToString())))
    assert [n.op_type for n in onnx.load(str(path)).graph.node].count("Loop") == 1
    assert walk(path).startswith("a Loop of 4,611,686,018,427,387,904 trips")
