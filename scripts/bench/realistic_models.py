#!/usr/bin/env python3
"""ONNX models with rtmlib's inputs and outputs and the compute cost of the published ones.

The tests' tiny models (tests/tiny_onnx.py) cost ~1 ms a frame, so a benchmark on them weighs the
job's own work far more than a user's real YOLOX + RTMW would. Real weights cannot be fetched here
(nothing downloads weights), so this writes stand-ins: the tiny models' heads (the same outputs:
YOLOX with NMS inside `dets`/`labels` and its raw grid `output`, SimCC `simcc_x`/`simcc_y` for 133
points), at the published input sizes, behind a trunk of 3x3 convolutions with random weights sized
so that the model's multiply-accumulates (MACs, counted on the written graph by `count_macs`) match
the published model's. The trunk's result is added to the input times zero: the outputs are the
tiny models' functions of the pixels, and onnxruntime cannot drop the trunk as unused.

Published costs (docs/performance.md cites them): YOLOX's table gives GFLOPs = 2 x MACs (YOLOX-tiny
6.45 at 416x416, YOLOX-m 73.8 at 640x640); mmpose's RTMW table gives MACs (RTMW-m 4.3 G at 256x192;
rtmlib's "performance" pose model rtmw-dw-x-l, an RTMW-l distilled from RTMW-x, 17.7 G at 384x288).

    .venv/bin/python scripts/bench/realistic_models.py --out /tmp/models           # all, full cost
    .venv/bin/python scripts/bench/realistic_models.py --out /tmp/m --scale 0.01 --only yolox-tiny,rtmw-m

Writes NAME.onnx (and NAME-raw.onnx for detectors) and models.json (sizes, counted and published
MACs). The batch axis is named (any frames per call) unless --fixed-batch.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] / "tests")]
from tiny_onnx import detector_end2end, detector_raw, pose_simcc  # noqa: E402

TRUNK_DEPTH = 24  # 3x3 convolutions at 1/8 of the input: channels follow from the MACs wanted


@dataclass(frozen=True)
class Spec:
    kind: str  # "detector" or "pose"
    hw: tuple[int, int]  # input (height, width)
    gmacs: float  # the published model's multiply-accumulates a frame, in billions
    source: str


SPECS = {
    "yolox-tiny": Spec("detector", (416, 416), 6.45 / 2, "YOLOX README: 6.45 GFLOPs (2 x MACs) at 416"),
    "yolox-m": Spec("detector", (640, 640), 73.8 / 2, "YOLOX README: 73.8 GFLOPs (2 x MACs) at 640"),
    "rtmw-m": Spec("pose", (256, 192), 4.3, "mmpose RTMW table: RTMW-m 4.3 G at 256x192"),
    "rtmw-x-l": Spec("pose", (384, 288), 17.7, "mmpose RTMW table: RTMW-l 17.7 G at 384x288 "
                                               "(rtmlib's rtmw-dw-x-l, distilled from RTMW-x)"),
}
PAIRS = {"light": ("yolox-tiny", "rtmw-m"), "heavy": ("yolox-m", "rtmw-x-l")}


def _out(size: int, stride: int) -> int:
    return (size - 1) // stride + 1  # a 3x3 convolution with padding 1


def plan_trunk(hw: tuple[int, int], macs: float) -> list[tuple[int, int, int]]:
    """(in channels, out channels, stride) of each 3x3 convolution: three stride-2 ones to 1/8 of
    the input, then TRUNK_DEPTH-ish at that size, then one narrower to land on `macs`."""
    h8, w8 = _out(_out(_out(hw[0], 2), 2), 2), _out(_out(_out(hw[1], 2), 2), 2)
    c = max(8, 8 * round(math.sqrt(max(macs, 0) / (TRUNK_DEPTH * h8 * w8 * 9)) / 8))
    convs = [(3, c, 2), (c, c, 2), (c, c, 2)]
    left = macs - trunk_macs(hw, convs)
    convs += [(c, c, 1)] * max(0, int(left // (h8 * w8 * 9 * c * c)))
    last = round((macs - trunk_macs(hw, convs)) / (h8 * w8 * 9 * c))
    if last >= 1:
        convs.append((c, last, 1))
    return convs


def trunk_macs(hw: tuple[int, int], convs: list[tuple[int, int, int]]) -> int:
    """MACs of plan_trunk's convolutions on one frame (count_macs counts the written graph)."""
    h, w, total = hw[0], hw[1], 0
    for cin, cout, stride in convs:
        h, w = _out(h, stride), _out(w, stride)
        total += h * w * cout * cin * 9
    return total


def add_trunk(path: Path, macs: float, seed: int = 7) -> None:
    """Put a convolution trunk of about `macs` in front of the model at `path` (rewritten): its
    result times zero is added to the input every other node reads."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(path))
    g = model.graph
    hw = tuple(d.dim_value for d in g.input[0].type.tensor_type.shape.dim[2:])
    rng = np.random.default_rng(seed)
    nodes, x = [], "input"
    for i, (cin, cout, stride) in enumerate(plan_trunk(hw, max(0.0, macs - count_macs(model)))):
        w = (rng.standard_normal((cout, cin, 3, 3)) * math.sqrt(2 / (cin * 9))).astype(np.float32)
        g.initializer.extend([numpy_helper.from_array(w, f"trunk{i}_w"),
                              numpy_helper.from_array(np.zeros(cout, np.float32), f"trunk{i}_b")])
        nodes += [helper.make_node("Conv", [x, f"trunk{i}_w", f"trunk{i}_b"], [f"trunk{i}_c"],
                                   kernel_shape=[3, 3], strides=[stride, stride], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"trunk{i}_c"], [f"trunk{i}"])]
        x = f"trunk{i}"
    g.initializer.append(numpy_helper.from_array(np.zeros(1, np.float32), "trunk_zero"))
    nodes += [helper.make_node("ReduceMean", [x], ["trunk_mean"], axes=[1, 2, 3], keepdims=1),
              helper.make_node("Sigmoid", ["trunk_mean"], ["trunk_unit"]),  # never inf: 0 x it is 0
              helper.make_node("Mul", ["trunk_unit", "trunk_zero"], ["trunk_nothing"]),
              helper.make_node("Add", ["input", "trunk_nothing"], ["input_t"])]
    for node in g.node:
        node.input[:] = ["input_t" if name == "input" else name for name in node.input]
    old = list(g.node)
    del g.node[:]
    g.node.extend(nodes + old)
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())


def _dims(shape) -> list[int]:
    """A tensor's dimensions, a named (batch) axis counted as 1: MACs are per frame."""
    return [d.dim_value or 1 for d in shape.dim]


def count_macs(model) -> int:
    """Multiply-accumulates of one frame through the graph's Conv, MatMul and Gemm nodes, from
    ONNX shape inference (a model or a path); the other nodes' arithmetic is not counted."""
    import onnx

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model))
    g = onnx.shape_inference.infer_shapes(model).graph
    shapes = {v.name: _dims(v.type.tensor_type.shape) for v in (*g.input, *g.value_info, *g.output)}
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    total = 0
    for node in g.node:
        if node.op_type == "Conv":  # each output value: in channels per group x kernel
            total += math.prod(shapes[node.output[0]]) * math.prod(shapes[node.input[1]][1:])
        elif node.op_type in ("MatMul", "Gemm"):
            a = shapes[node.input[0]]
            trans_a = any(at.name == "transA" and at.i for at in node.attribute)
            total += math.prod(shapes[node.output[0]]) * (a[-2] if trans_a else a[-1])
    return total


def write(name: str, out: Path, scale: float = 1.0, batch: int | str = "batch") -> dict:
    """NAME.onnx (and NAME-raw.onnx for a detector) in out, at `scale` x the published MACs."""
    spec = SPECS[name]
    makers: dict[str, Callable] = ({"": pose_simcc} if spec.kind == "pose" else
                                   {"": detector_end2end, "-raw": detector_raw})
    files = {}
    out.mkdir(parents=True, exist_ok=True)
    for tail, make in makers.items():
        path = out / f"{name}{tail}.onnx"
        make(path, hw=spec.hw, batch=batch)
        add_trunk(path, spec.gmacs * 1e9 * scale)
        files[f"{spec.kind}{tail.replace('-', '_')}"] = {
            "path": str(path), "bytes": path.stat().st_size, "gmacs": count_macs(path) / 1e9}
    return {"kind": spec.kind, "input_hw": list(spec.hw), "published_gmacs": spec.gmacs,
            "scale": scale, "source": spec.source, "files": files}


def time_cpu(path: Path, frames: int) -> dict:
    """One intra-op thread, as a worker's session has: CPU and wall ms a frame over `frames`
    calls of one frame after one warm-up call (the input is noise: the cost does not depend on it)."""
    import time

    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    shape = [1, *session.get_inputs()[0].shape[1:]]
    x = (np.random.default_rng(0).random(shape) * 255).astype(np.float32)
    session.run(None, {"input": x})
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(frames):
        session.run(None, {"input": x})
    return {"cpu_ms": round((time.process_time() - cpu) / frames * 1e3, 1),
            "wall_ms": round((time.perf_counter() - wall) / frames * 1e3, 1), "frames": frames}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder to write the models into")
    p.add_argument("--scale", type=float, default=1.0,
                   help="fraction of the published MACs (a small one for tests: 0.01)")
    p.add_argument("--only", default=",".join(SPECS), help=f"comma-separated, of {', '.join(SPECS)}")
    p.add_argument("--fixed-batch", action="store_true", help="batch axis fixed at 1")
    p.add_argument("--time", type=int, default=0, metavar="FRAMES",
                   help="also time each model on one CPU thread over FRAMES frames")
    p.add_argument("--json", default="", help="with --time: also write models.json's content as "
                                              "this file under docs/results/")
    args = p.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in SPECS]
    if unknown or not 0 < args.scale <= 1:
        p.error(f"unknown model {unknown} (known: {', '.join(SPECS)})" if unknown else
                "--scale must be in (0, 1]")
    args.out.mkdir(parents=True, exist_ok=True)
    made = {n: write(n, args.out, args.scale, 1 if args.fixed_batch else "batch") for n in names}
    for info in made.values():
        for f in info["files"].values():
            f.update(time_cpu(Path(f["path"]), args.time) if args.time else {})
    (args.out / "models.json").write_text(json.dumps(made, indent=2) + "\n")
    if args.json:
        from common import loadavg, machine, save_json

        print(save_json(args.json, {"command": " ".join(sys.argv), "machine": machine(),
                                    "load_after": loadavg(), "models": made}))
    for name, info in made.items():
        for key, f in info["files"].items():
            cost = f", {f['cpu_ms']} ms CPU a frame" if "cpu_ms" in f else ""
            print(f"{name:10s} {key:13s} {f['gmacs']:7.2f} GMACs (published "
                  f"{info['published_gmacs']:.2f} x {args.scale:g}){cost}, "
                  f"{f['bytes'] / 2**20:.1f} MiB  {f['path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
