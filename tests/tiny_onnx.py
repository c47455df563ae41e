"""Tiny ONNX models of the whole-body family, built with onnx.helper, so tests run offline.

They have the inputs and outputs of the published files (a YOLOX person detector with NMS inside,
output `[1, N, 5]`, or its raw grid output `[1, A, 5 + classes]`; an RTMPose/RTMW SimCC pose
model with outputs `[1, K, 2w]` and `[1, K, 2h]`; a ViTPose-style heatmap model `[1, K, h/4, w/4]`:
`pose_model(folder, head, K)`; an RTMW3D-style one adding `[1, 133, 2h]` for z) and compute
deterministic functions of the pixels (a coarse average pool through fixed random weights), so
different frames give different boxes, person counts and keypoints. A few milliseconds a frame:
job-level tests can use them freely.

    models = tiny_models(tmp_path)          # {"detector", "detector_raw", "pose"}: paths
    models = tiny_models(tmp_path, dynamic=True)  # the same functions, any frames per call

The batch axis is fixed at 1 by default (the bytes the earlier tests were written on; the tool
then runs one frame per call) or, with `dynamic=True`, named `batch` (one call per batch).
    ref = rtmlib_reference()                # rtmlib, installed --no-deps beside .venv (scripts)

rtmlib is the reference the tool is compared with; scripts/test.sh installs it with --no-deps into
`.venv/rtmlib-ref` (it depends on opencv-python, which would overwrite mediapipe's
opencv-contrib-python), outside pip's view of the environment.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np

DETECTOR_HW = (96, 128)  # (height, width): not square, so a swapped order shows
POSE_HW = (64, 48)  # (height, width), as RTMPose's 256x192 in miniature
POINTS = 133
POOL = 4  # the pool grid: POOL x POOL cells of 3 channels are the models' features
RTMLIB_VERSION = "0.0.16"
RTMLIB_DIR = Path(__file__).resolve().parents[1] / ".venv" / "rtmlib-ref"


def _helpers() -> tuple[Any, Any, Any, Any]:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    return onnx, TensorProto, helper, numpy_helper


def _features(nodes: list, inits: list, hw: tuple[int, int], prefix: str,
              scale: float, shift: float) -> str:
    """Nodes that pool the input to POOL x POOL cells and flatten them: [1, 3 * POOL**2]."""
    _, _, helper, numpy_helper = _helpers()
    kh, kw = hw[0] // POOL, hw[1] // POOL
    inits += [numpy_helper.from_array(np.array([scale], np.float32), f"{prefix}_scale"),
              numpy_helper.from_array(np.array([shift], np.float32), f"{prefix}_shift")]
    nodes += [
        helper.make_node("AveragePool", ["input"], [f"{prefix}_pool"], kernel_shape=[kh, kw],
                         strides=[kh, kw]),
        helper.make_node("Flatten", [f"{prefix}_pool"], [f"{prefix}_flat"], axis=1),
        helper.make_node("Mul", [f"{prefix}_flat", f"{prefix}_scale"], [f"{prefix}_scaled"]),
        helper.make_node("Sub", [f"{prefix}_scaled", f"{prefix}_shift"], [f"{prefix}_feat"]),
    ]
    return f"{prefix}_feat"


def _dense(nodes: list, inits: list, x: str, rng: np.random.Generator, width: int, gain: float,
           bias: np.ndarray | float, name: str) -> str:
    """x @ W + b with fixed random W (features -> width)."""
    _, _, helper, numpy_helper = _helpers()
    w = (rng.standard_normal((3 * POOL * POOL, width)) * gain).astype(np.float32)
    b = (np.zeros(width) + bias).astype(np.float32)
    inits += [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")]
    nodes += [helper.make_node("MatMul", [x, f"{name}_w"], [f"{name}_mm"]),
              helper.make_node("Add", [f"{name}_mm", f"{name}_b"], [name])]
    return name


def _const(inits: list, name: str, value: np.ndarray) -> str:
    _, _, _, numpy_helper = _helpers()
    inits.append(numpy_helper.from_array(value, name))
    return name


def _save(path: Path, nodes: list, inits: list, inputs: list, outputs: list, name: str) -> Path:
    onnx, _, helper, _ = _helpers()
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="phoenix-keypoints tests")
    model.ir_version = 8  # readable by every onnxruntime this project pins
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


def _input(hw: tuple[int, int], batch: int | str = 1) -> Any:
    _, TensorProto, helper, _ = _helpers()
    return helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, *hw])


def _lead(batch: int | str) -> int:
    """The first dimension a Reshape asks for: 1 for a fixed batch, -1 (inferred) for a named one."""
    return 1 if batch == 1 else -1


def detector_end2end(path: Path, hw: tuple[int, int] = DETECTOR_HW, boxes: int = 6,
                     seed: int = 1, batch: int | str = 1, feature: tuple[float, float] = (1 / 255, 0.5),
                     name: str = "tiny_yolox_end2end", spans: np.ndarray | None = None,
                     gain: float = 4.0) -> Path:
    """A YOLOX with NMS inside: `dets` [1, N, 5] (x1, y1, x2, y2 in input pixels, score) and
    `labels` [1, N]. Every box lies in the input (x1 in the left half, x2 in the right one);
    scores spread around rtmlib's 0.3 cut, so the person count varies from frame to frame.
    `feature`: the pooled input's (scale, shift), so the features suit its input's range;
    `spans` [N, 2, 5]: each box's own (low, high) of x1, y1, x2, y2 (fractions of the input) and
    score instead; `gain`: how far the pixels move them."""
    _, TensorProto, helper, _ = _helpers()
    rng = np.random.default_rng(seed)
    nodes: list = []
    inits: list = []
    feat = _features(nodes, inits, hw, "f", *feature)
    z = _dense(nodes, inits, feat, rng, boxes * 5, gain, 0.0, "z")
    h, w = hw
    if spans is None:
        mul = _const(inits, "box_mul", np.array([w / 2, h / 2, w / 2, h / 2, 1], np.float32))
        add = _const(inits, "box_add", np.array([0, 0, w / 2, h / 2, 0], np.float32))
    else:
        size = np.array([w, h, w, h, 1], np.float32)
        mul = _const(inits, "box_mul", ((spans[:, 1] - spans[:, 0]) * size)[None].astype(np.float32))
        add = _const(inits, "box_add", (spans[:, 0] * size)[None].astype(np.float32))
    shape = _const(inits, "shape", np.array([_lead(batch), boxes, 5], np.int64))
    nodes += [helper.make_node("Sigmoid", [z], ["zs"]),
              helper.make_node("Reshape", ["zs", shape], ["zr"]),
              helper.make_node("Mul", ["zr", mul], ["zm"]),
              helper.make_node("Add", ["zm", add], ["dets"]),
              helper.make_node("Shape", ["dets"], ["dshape"]),
              helper.make_node("Slice", ["dshape", _const(inits, "s0", np.array([0], np.int64)),
                                         _const(inits, "s2", np.array([2], np.int64))], ["lshape"]),
              helper.make_node("ConstantOfShape", ["lshape"], ["labels"],
                               value=helper.make_tensor("zero", TensorProto.INT64, [1], [0]))]
    outputs = [helper.make_tensor_value_info("dets", TensorProto.FLOAT, [batch, boxes, 5]),
               helper.make_tensor_value_info("labels", TensorProto.INT64, [batch, boxes])]
    return _save(path, nodes, inits, [_input(hw, batch)], outputs, name)


def detector_raw(path: Path, hw: tuple[int, int] = DETECTOR_HW, classes: int = 1,
                 seed: int = 2, batch: int | str = 1, feature: tuple[float, float] = (1 / 255, 0.5),
                 name: str = "tiny_yolox_raw", level: float = 0.3) -> Path:
    """A YOLOX without NMS: one row per grid cell of strides 8, 16, 32 (cx, cy offsets in the
    cell, log w, log h, objectness, class scores), decoded and suppressed by the caller.
    `feature` as detector_end2end's; `level`: the scores' bias (where they sit about a cut)."""
    _, TensorProto, helper, _ = _helpers()
    rng = np.random.default_rng(seed)
    cells = sum((hw[0] // s) * (hw[1] // s) for s in (8, 16, 32))
    cols = 5 + classes
    nodes: list = []
    inits: list = []
    feat = _features(nodes, inits, hw, "f", *feature)
    bias = np.tile(np.r_[0.0, 0.0, 0.0, 0.0, level, np.full(classes, level)], cells)
    z = _dense(nodes, inits, feat, rng, cells * cols, 0.6, bias, "z")
    mul = _const(inits, "mul", np.r_[1.0, 1.0, 2.5, 2.5, np.ones(1 + classes)].astype(np.float32))
    shape = _const(inits, "shape", np.array([_lead(batch), cells, cols], np.int64))
    nodes += [helper.make_node("Sigmoid", [z], ["zs"]),
              helper.make_node("Reshape", ["zs", shape], ["zr"]),
              helper.make_node("Mul", ["zr", mul], ["output"])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, cells, cols])]
    return _save(path, nodes, inits, [_input(hw, batch)], outputs, name)


def pose_simcc(path: Path, hw: tuple[int, int] = POSE_HW, points: int = POINTS,
               seed: int = 3, batch: int | str = 1) -> Path:
    """An RTMPose-style SimCC model: `simcc_x` [1, K, 2w], `simcc_y` [1, K, 2h]; each point's
    bins are sigmoids of the crop's features times a per-point level, so its argmax moves with the
    crop and its score (rtmlib: the mean of the two maxima) spreads from ~0 to ~1."""
    _, TensorProto, helper, _ = _helpers()
    rng = np.random.default_rng(seed)
    h, w = hw
    nodes: list = []
    inits: list = []
    feat = _features(nodes, inits, hw, "f", 1.0, 0.0)  # the input is normalised already
    level_bias = rng.uniform(-4, 3, points)
    outputs = []
    for axis, bins in (("x", 2 * w), ("y", 2 * h)):
        z = _dense(nodes, inits, feat, rng, points * bins, 2.0, 0.0, f"z{axis}")
        shape = _const(inits, f"shape_{axis}", np.array([_lead(batch), points, bins], np.int64))
        nodes += [helper.make_node("Reshape", [z, shape], [f"r{axis}"]),
                  helper.make_node("Sigmoid", [f"r{axis}"], [f"s{axis}"])]
        outputs.append(helper.make_tensor_value_info(f"simcc_{axis}", TensorProto.FLOAT,
                                                     [batch, points, bins]))
    lv = _dense(nodes, inits, feat, rng, points, 1.0, level_bias, "lv")
    lshape = _const(inits, "shape_lv", np.array([_lead(batch), points, 1], np.int64))
    nodes += [helper.make_node("Reshape", [lv, lshape], ["lvr"]),
              helper.make_node("Sigmoid", ["lvr"], ["lvs"]),
              helper.make_node("Mul", ["sx", "lvs"], ["simcc_x"]),
              helper.make_node("Mul", ["sy", "lvs"], ["simcc_y"])]
    return _save(path, nodes, inits, [_input(hw, batch)], outputs, "tiny_rtmpose_simcc")


def pose_heatmap(path: Path, hw: tuple[int, int] = POSE_HW, points: int = 17, seed: int = 4,
                 batch: int | str = 1, sigma: float = 2.0) -> Path:
    """A ViTPose/HRNet-style heatmap model: `heatmaps` [1, K, h/4, w/4]. Each map is a Gaussian
    blob (sigma in map pixels, as the training targets) at a sub-pixel place the crop's features
    move, times a per-point level, minus 0.02: so scores spread from below 0 (rtmlib's -1 point)
    to ~1, and DARK's refinement has a real peak to find."""
    _, TensorProto, helper, _ = _helpers()
    rng = np.random.default_rng(seed)
    mh, mw = hw[0] // 4, hw[1] // 4
    nodes: list = []
    inits: list = []
    feat = _features(nodes, inits, hw, "f", 1.0, 0.0)
    gy, gx = np.mgrid[0:mh, 0:mw].astype(np.float32)
    gx_, gy_ = _const(inits, "gx", gx[None, None]), _const(inits, "gy", gy[None, None])
    shape = _const(inits, "shape_k", np.array([_lead(batch), points, 1, 1], np.int64))
    for axis, size, grid in (("x", mw, gx_), ("y", mh, gy_)):
        z = _dense(nodes, inits, feat, rng, points, 0.15, 0.0, f"p{axis}")
        nodes += [helper.make_node("Reshape", [z, shape], [f"r{axis}"]),
                  helper.make_node("Sigmoid", [f"r{axis}"], [f"s{axis}"]),
                  helper.make_node("Mul", [f"s{axis}", _const(inits, f"size_{axis}", np.array(
                      [size - 1], np.float32))], [f"c{axis}"]),
                  helper.make_node("Sub", [grid, f"c{axis}"], [f"d{axis}"]),
                  helper.make_node("Mul", [f"d{axis}", f"d{axis}"], [f"q{axis}"])]
    lv = _dense(nodes, inits, feat, rng, points, 1.0, rng.uniform(-6, 3, points), "lv")
    nodes += [helper.make_node("Add", ["qx", "qy"], ["q"]),
              helper.make_node("Mul", ["q", _const(inits, "inv2s2", np.array(
                  [-1 / (2 * sigma ** 2)], np.float32))], ["e"]),
              helper.make_node("Exp", ["e"], ["blob"]),
              helper.make_node("Reshape", [lv, shape], ["lvr"]),
              helper.make_node("Sigmoid", ["lvr"], ["lvs"]),
              helper.make_node("Mul", ["blob", "lvs"], ["scaled"]),
              helper.make_node("Sub", ["scaled", _const(inits, "floor", np.array([0.02], np.float32))],
                               ["heatmaps"])]
    outputs = [helper.make_tensor_value_info("heatmaps", TensorProto.FLOAT, [batch, points, mh, mw])]
    return _save(path, nodes, inits, [_input(hw, batch)], outputs, "tiny_vitpose_heatmap")


def pose_model(folder: Path, head: str, points: int, dynamic: bool = False) -> Path:
    """A tiny pose model of one head ("simcc" or "heatmap") and K points, in folder (made once)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"tiny-{head}-{points}{'-batch' if dynamic else ''}.onnx"
    if not path.exists():
        maker = pose_simcc if head == "simcc" else pose_heatmap
        maker(path, points=points, batch="batch" if dynamic else 1)
    return path


def pose_steady(path: Path, hw: tuple[int, int] = POSE_HW, points: int = POINTS,
                seed: int = 4, batch: int | str = 1, span: tuple[float, float] = (0.15, 0.85)
                ) -> Path:
    """A SimCC model whose points sit near fixed places of the crop (a bump per point within
    `span` of each axis) and move a few bins with the pixels: a person's next box (rtmlib's
    pose_to_bbox) stays near its box, so rtmlib's tracking follows it from frame to frame, as with
    a real model on a real signer (pose_simcc's points jump across the crop). With span (0.18,
    0.82) the next box is the box's size (0.64 x the crop's 1.25 x pose_to_bbox's 1.25), as a real
    signer's; the default's boxes grow a little each frame."""
    _, TensorProto, helper, _ = _helpers()
    rng = np.random.default_rng(seed)
    nodes: list = []
    inits: list = []
    feat = _features(nodes, inits, hw, "f", 1.0, 0.0)
    outputs = []
    for axis, bins in (("x", 2 * hw[1]), ("y", 2 * hw[0])):
        at = rng.uniform(*span, points) * bins
        bump = np.exp(-0.5 * ((np.arange(bins)[None] - at[:, None]) / 4.0) ** 2)
        profile = _const(inits, f"bump_{axis}", (0.9 * bump)[None].astype(np.float32))
        z = _dense(nodes, inits, feat, rng, points * bins, 0.02, 0.0, f"z{axis}")
        shape = _const(inits, f"shape_{axis}", np.array([_lead(batch), points, bins], np.int64))
        nodes += [helper.make_node("Reshape", [z, shape], [f"r{axis}"]),
                  helper.make_node("Add", [f"r{axis}", profile], [f"simcc_{axis}"])]
        outputs.append(helper.make_tensor_value_info(f"simcc_{axis}", TensorProto.FLOAT,
                                                     [batch, points, bins]))
    return _save(path, nodes, inits, [_input(hw, batch)], outputs, "tiny_rtmpose_steady")


def pose_simcc3d(path: Path, hw: tuple[int, int] = POSE_HW, points: int = POINTS,
                 seed: int = 4, batch: int | str = 1) -> Path:
    """An RTMW3D-style SimCC model: `simcc_x` [1, K, 2w], `simcc_y` [1, K, 2h], `simcc_z`
    [1, K, 2h] (rtmlib's RTMPose3d maps z bins through the input height); built as pose_simcc,
    each axis its own sigmoids times its own per-point level, so x, y and z move with the crop
    and the x and y maxima differ (rtmlib's 3D score is the smaller, its 2D one the mean)."""
    _, TensorProto, helper, _ = _helpers()
    rng = np.random.default_rng(seed)
    h, w = hw
    nodes: list = []
    inits: list = []
    feat = _features(nodes, inits, hw, "f", 1.0, 0.0)
    lshape = _const(inits, "shape_lv", np.array([_lead(batch), points, 1], np.int64))
    outputs = []
    for axis, bins in (("x", 2 * w), ("y", 2 * h), ("z", 2 * h)):
        lv = _dense(nodes, inits, feat, rng, points, 1.0, rng.uniform(-4, 3, points), f"lv{axis}")
        z = _dense(nodes, inits, feat, rng, points * bins, 2.0, 0.0, f"z{axis}")
        shape = _const(inits, f"shape_{axis}", np.array([_lead(batch), points, bins], np.int64))
        nodes += [helper.make_node("Reshape", [lv, lshape], [f"lvr{axis}"]),
                  helper.make_node("Sigmoid", [f"lvr{axis}"], [f"lvs{axis}"]),
                  helper.make_node("Reshape", [z, shape], [f"r{axis}"]),
                  helper.make_node("Sigmoid", [f"r{axis}"], [f"s{axis}"]),
                  helper.make_node("Mul", [f"s{axis}", f"lvs{axis}"], [f"simcc_{axis}"])]
        outputs.append(helper.make_tensor_value_info(f"simcc_{axis}", TensorProto.FLOAT,
                                                     [batch, points, bins]))
    return _save(path, nodes, inits, [_input(hw, batch)], outputs, "tiny_rtmw3d_simcc")


def tiny_models(folder: Path, dynamic: bool = False) -> dict[str, Path]:
    """The three models written into folder (made once; the same bytes every time), with a batch
    axis fixed at 1 or (dynamic) named, taking any number of frames per call."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tail = "-batch.onnx" if dynamic else ".onnx"
    out = {"detector": folder / f"tiny-yolox-end2end{tail}",
           "detector_raw": folder / f"tiny-yolox-raw{tail}",
           "pose": folder / f"tiny-rtmpose-simcc{tail}",
           "pose3d": folder / f"tiny-rtmw3d-simcc{tail}"}
    makers = {"detector": detector_end2end, "detector_raw": detector_raw, "pose": pose_simcc,
              "pose3d": pose_simcc3d}
    for key, path in out.items():
        if not path.exists():
            makers[key](path, batch="batch" if dynamic else 1)
    return out


RTMDET_HW = (64, 96)  # (height, width): as rtmlib's Hand's 320x320 RTMDet in miniature, not square


def rtmdet_models(folder: Path, dynamic: bool = False) -> dict[str, Path]:
    """Two RTMDet-style hand detectors (made once): one with NMS inside (`dets` [1, N, 5], `labels`,
    as rtmlib's published hand detector) and a raw grid of two classes (so keeping class 0 alone,
    and RTMDet's 0.3 cut, matter). Their features suit a normalised input ((pixel - mean) / std,
    about -2 to 2.5), which is what tells them from the YOLOX ones: fed raw pixels, they answer
    other boxes."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tail = "-batch.onnx" if dynamic else ".onnx"
    batch = "batch" if dynamic else 1
    out = {"rtmdet": folder / f"tiny-rtmdet-end2end{tail}",
           "rtmdet_raw": folder / f"tiny-rtmdet-raw{tail}"}
    if not out["rtmdet"].exists():
        detector_end2end(out["rtmdet"], RTMDET_HW, boxes=5, seed=7, batch=batch, feature=(1.0, 0.0),
                         name="tiny_rtmdet_end2end")
    if not out["rtmdet_raw"].exists():
        detector_raw(out["rtmdet_raw"], RTMDET_HW, classes=2, seed=8, batch=batch, feature=(1.0, 0.0),
                     name="tiny_rtmdet_raw", level=-1.8)
    return out


TWO_HANDS_HW = (48, 96)  # (height, width): a frame of two square hand crops side by side
# Each box's (low, high) of x1, y1, x2, y2 (fractions of the input) and score: the image's right
# crop first (so the detector's order is not left to right), then the left one, then two small
# boxes about the 0.3 cut; the right crop's score dips below the cut on some frames (one hand).
_TWO_HANDS = np.array([((0.52, 0.02, 0.86, 0.75, 0.15), (0.6, 0.2, 0.98, 0.98, 1.0)),
                       ((0.02, 0.02, 0.36, 0.75, 0.3), (0.1, 0.2, 0.47, 0.98, 1.0)),
                       ((0.42, 0.4, 0.5, 0.55, 0.0), (0.46, 0.5, 0.56, 0.7, 0.34)),
                       ((0.1, 0.3, 0.2, 0.5, 0.0), (0.15, 0.4, 0.26, 0.6, 0.33))])


def two_hands_detector(path: Path) -> Path:
    """An RTMDet-style hand detector with NMS inside (`dets` [1, 4, 5], `labels`) for frames of
    two hand crops side by side: one box about each crop (their corners and scores moving with
    the pixels) and two small ones between, kept on some frames; features of a normalised input,
    as rtmdet_models'."""
    return detector_end2end(path, TWO_HANDS_HW, boxes=len(_TWO_HANDS), seed=11, feature=(1.0, 0.0),
                            name="tiny_rtmdet_two_hands", spans=_TWO_HANDS, gain=0.2)


def many_boxes_detector(path: Path, boxes: int = 20_000, hw: tuple[int, int] = RTMDET_HW,
                        score: float = 0.9, equal: bool = False) -> Path:
    """A detector with NMS inside answering `boxes` boxes on every frame, each scoring `score`
    (the hostile case of issue 46): boxes of assorted sizes spread over the input, all distinct
    areas (`equal`: every one the same box, the middle half of the input), the answer tied to the
    input (times 0) so it runs as a model does."""
    _, TensorProto, helper, _ = _helpers()
    rng = np.random.default_rng(12)
    h, w = hw
    x1, y1 = rng.uniform(0, w * 0.8, boxes), rng.uniform(0, h * 0.8, boxes)
    bw, bh = rng.uniform(2, w * 0.2, boxes), rng.uniform(2, h * 0.2, boxes)
    if equal:
        x1, y1, bw, bh = (np.full(boxes, v) for v in (w / 4, h / 4, w / 2, h / 2))
    dets = np.stack([x1, y1, x1 + bw, y1 + bh, np.full(boxes, score)], 1)[None].astype(np.float32)
    nodes: list = []
    inits: list = []
    nodes += [helper.make_node("ReduceMean", ["input"], ["m"], keepdims=0),
              helper.make_node("Mul", ["m", _const(inits, "zero_f", np.zeros(1, np.float32))],
                               ["m0"]),
              helper.make_node("Add", [_const(inits, "boxes", dets), "m0"], ["dets"]),
              helper.make_node("Constant", [], ["labels"], value=helper.make_tensor(
                  "lab", TensorProto.INT64, [1, boxes], np.zeros(boxes, np.int64)))]
    outputs = [helper.make_tensor_value_info("dets", TensorProto.FLOAT, [1, boxes, 5]),
               helper.make_tensor_value_info("labels", TensorProto.INT64, [1, boxes])]
    return _save(path, nodes, inits, [_input(hw)], outputs, "tiny_rtmdet_many")


def grid_boxes_detector(path: Path, hw: tuple[int, int], score: float = 0.9,
                        side: float = 1.0) -> Path:
    """A YOLOX-style detector without NMS (`[1, cells, 6]`, one class) answering every grid cell
    as a box of `side` pixels at the cell's centre, objectness `score`, class score 1 (the hostile
    case of issue 52): the centres of strides 8, 16 and 32 lie 4 pixels apart at least, so no two
    boxes overlap and NMS keeps them all. The answer is tied to the input (times 0)."""
    _, TensorProto, helper, _ = _helpers()
    cells, strides = [], []
    for s in (8, 16, 32):
        n = (hw[0] // s) * (hw[1] // s)
        cells.append(n)
        strides.append(np.full(n, s, np.float64))
    stride = np.concatenate(strides)
    log = np.log(side / stride)
    rows = np.stack([np.full_like(stride, 0.5), np.full_like(stride, 0.5), log, log,
                     np.full_like(stride, score), np.ones_like(stride)], 1)[None].astype(np.float32)
    nodes: list = []
    inits: list = []
    nodes += [helper.make_node("ReduceMean", ["input"], ["m"], keepdims=0),
              helper.make_node("Mul", ["m", _const(inits, "zero_f", np.zeros(1, np.float32))],
                               ["m0"]),
              helper.make_node("Add", [_const(inits, "rows", rows), "m0"], ["output"])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, sum(cells), 6])]
    return _save(path, nodes, inits, [_input(hw)], outputs, "tiny_yolox_grid_boxes")


def pose_growing(src: Path, out: Path, mib: int) -> Path:
    """src (a SimCC pose model with a dynamic batch axis) whose simcc_x also depends on `mib` MiB
    of floats made for each crop of the call (an Expand to [N, mib * 2^18], its maximum times 0
    added): a model whose memory grows with the crops of a call (issue 52)."""
    _, _, helper, numpy_helper = _helpers()
    inits = [numpy_helper.from_array(np.array([1, mib << 18], np.int64), "grow_shape"),
             numpy_helper.from_array(np.array([-1, 1], np.int64), "grow_col"),
             numpy_helper.from_array(np.array([-1, 1, 1], np.int64), "grow_back"),
             numpy_helper.from_array(np.array(0.0, np.float32), "grow_zero")]
    nodes = [helper.make_node("ReduceMean", ["input"], ["grow_m"], axes=[1, 2, 3], keepdims=1),
             helper.make_node("Reshape", ["grow_m", "grow_col"], ["grow_c"]),
             helper.make_node("Expand", ["grow_c", "grow_shape"], ["grow_big"]),
             helper.make_node("ReduceMax", ["grow_big"], ["grow_max"], axes=[1], keepdims=0),
             helper.make_node("Mul", ["grow_max", "grow_zero"], ["grow_nil"]),
             helper.make_node("Reshape", ["grow_nil", "grow_back"], ["grow_b"]),
             helper.make_node("Add", ["simcc_x_orig", "grow_b"], ["simcc_x"])]
    return _rewired(src, out, "simcc_x", nodes, inits)


def rtmlib_hand(detector: Path, pose: Path, head: str = "simcc") -> Any:
    """rtmlib's Hand solution (RTMDet, then RTMPose on every box) on the given files, input sizes
    read from the files (its RTMDet takes (height, width), its RTMPose (width, height)); head
    "heatmap": its pose model rtmlib's ViTPose on the same boxes."""
    import contextlib
    import io

    import onnx

    rtm = rtmlib_reference()

    def hw(path: Path) -> tuple[int, int]:
        dims = onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim
        return dims[2].dim_value, dims[3].dim_value

    with contextlib.redirect_stdout(io.StringIO()):  # Hand prints its backend
        hand = rtm.Hand(det=str(detector), det_input_size=hw(detector), pose=str(pose),
                        pose_input_size=hw(pose)[::-1], backend="onnxruntime", device="cpu")
    if head != "simcc":
        hand.pose_model = rtmlib_pose(pose, head)
    return hand


def rtmlib_hand_row(hand: Any, bgr: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """rtmlib's Hand on one frame: the row the tool keeps (the person of the largest box, the
    whole frame's when none) as [K, 3] float64, the boxes' count, and every box's [N, K, 3]."""
    boxes = hand.det_model(bgr)
    kpts, scores = hand(bgr)
    every = np.concatenate([kpts, scores[..., None]], axis=-1)
    i = 0
    if len(boxes):
        b = np.asarray(boxes)
        i = int(np.argmax((b[:, 2].astype(np.float64) - b[:, 0]) * (b[:, 3] - b[:, 1])))
    return every[i], len(boxes), every


def rtmlib_reference() -> Any:
    """rtmlib as the reference (YOLOX, RTMPose), from `.venv/rtmlib-ref` or the environment."""
    if RTMLIB_DIR.is_dir() and str(RTMLIB_DIR) not in sys.path:
        sys.path.append(str(RTMLIB_DIR))
    return importlib.import_module("rtmlib")


def rtmlib_wholebody(models: dict[str, Path], detector: str = "detector", device: str = "cpu") -> Any:
    """rtmlib's YOLOX + RTMPose on the given files, input sizes read from the files as the tool
    does (rtmlib's YOLOX takes (height, width), its RTMPose (width, height)); device "cuda" for
    scripts/bench/gpu.py."""
    import onnx

    rtm = rtmlib_reference()

    def hw(path: Path) -> tuple[int, int]:
        dims = onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim
        return dims[2].dim_value, dims[3].dim_value

    det = rtm.YOLOX(str(models[detector]), model_input_size=hw(models[detector]),
                    backend="onnxruntime", device=device)
    ph, pw = hw(models["pose"])
    pose = rtm.RTMPose(str(models["pose"]), model_input_size=(pw, ph), backend="onnxruntime",
                       device=device)
    return det, pose


def rtmlib_pose(path: Path, head: str) -> Any:
    """rtmlib's pose model class for a head (RTMPose for SimCC, ViTPose for heatmaps) on a file,
    its input size read from the file."""
    import onnx

    rtm = rtmlib_reference()
    dims = onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim
    cls = rtm.RTMPose if head == "simcc" else rtm.ViTPose
    return cls(str(path), model_input_size=(dims[3].dim_value, dims[2].dim_value),
               backend="onnxruntime", device="cpu")


def rtmlib_wholebody3d(models: dict[str, Path], detector: str = "detector") -> Any:
    """rtmlib's YOLOX + RTMPose3d (Wholebody3d's two models) on the given files, input sizes read
    from the files (RTMPose3d takes (width, height)), z_range its default."""
    import onnx

    rtm = rtmlib_reference()
    det, _ = rtmlib_wholebody({"pose": models["pose"], detector: models[detector]}, detector)
    dims = onnx.load(str(models["pose3d"])).graph.input[0].type.tensor_type.shape.dim
    pose = rtm.RTMPose3d(str(models["pose3d"]), model_input_size=(dims[3].dim_value,
                                                                  dims[2].dim_value),
                         backend="onnxruntime", device="cpu")
    return det, pose


def rtmlib_signer3d(det: Any, pose: Any, bgr: np.ndarray) -> tuple[dict[str, np.ndarray], int]:
    """rtmlib's 3D keypoints of the signer (the largest box, the whole frame when none): its four
    answers for that box ({"keypoints" [133, 3], "scores", "simcc", "2d"}), and persons."""
    chosen, n = rtmlib_box(det, bgr)
    kpts, scores, simcc, kpts_2d = pose(bgr, bboxes=chosen)
    return {"keypoints": kpts[0], "scores": scores[0], "simcc": simcc[0], "2d": kpts_2d[0]}, n


def rtmlib_box(det: Any, bgr: np.ndarray) -> tuple[list[np.ndarray], int]:
    """The signer's box as a list rtmlib's pose models take (the largest of rtmlib's YOLOX boxes;
    none: the whole frame), and how many boxes it found."""
    boxes = det(bgr)
    boxes = np.asarray(boxes).reshape(-1, 4) if len(boxes) else np.zeros((0, 4))
    if not len(boxes):
        return [], 0
    areas = (boxes[:, 2].astype(np.float64) - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return [boxes[int(np.argmax(areas))]], len(boxes)


def rtmlib_signer(det: Any, pose: Any, bgr: np.ndarray) -> tuple[np.ndarray, int]:
    """rtmlib's keypoints of the signer (the largest box rtmlib's YOLOX returns; the whole frame
    when none): ([K, 3] x, y, score as float64, persons)."""
    chosen, n = rtmlib_box(det, bgr)
    kpts, scores = pose(bgr, bboxes=chosen)
    return np.concatenate([kpts[0], scores[0][:, None]], axis=1), n



class _Recorded:
    """rtmlib's RTMPose, remembering each call's boxes and answer (the boxes PoseTracker chose)."""

    def __init__(self, pose: Any) -> None:
        self.pose, self.calls = pose, []

    def __call__(self, image: np.ndarray, bboxes: Any = ()) -> tuple[np.ndarray, np.ndarray]:
        keypoints, scores = self.pose(image, bboxes=bboxes)
        self.calls.append((list(bboxes), keypoints, scores))
        return keypoints, scores


class _Failing:
    """rtmlib's YOLOX, failing (raising) where its boxes are not finite numbers: a detector that
    fails, which PoseTracker catches (where the tool gives the frame `bad_detector_output`)."""

    det_mode = "human"

    def __init__(self, det: Any) -> None:
        self.det = det

    def __call__(self, image: np.ndarray) -> np.ndarray:
        boxes = self.det(image)
        if not np.isfinite(np.asarray(boxes, np.float64)).all():
            raise ValueError("the detector answered nonsense")
        return boxes


def rtmlib_tracked(models: dict[str, Path], detector: str, every: int, bgrs: list[np.ndarray],
                   head: str = "simcc", people: list | None = None
                   ) -> tuple[list[tuple[np.ndarray, int]], dict[str, int]]:
    """rtmlib's PoseTracker(det_frequency=every) over one video's frames: per frame the signer
    (the person of the largest box its pose model ran on; the whole frame's when none) as
    ([K, 3] float64, boxes), and what happened (frames detected, frames on kept boxes, frames
    whose returned persons are fewer than its boxes, frames that did not advance its count, frames
    whose tracking raised IndexError, after which the tracker is reset, frames whose detector
    failed: None in the list). head "heatmap": the pose model is rtmlib's ViTPose; a detector
    named "rtmdet...": rtmlib's RTMDet (PoseTracker around rtmlib's Hand). `people` gets, per
    frame, the boxes its pose model ran on [N, 4] and every person it posed [M, K, 3]."""
    rtm = rtmlib_reference()
    det, pose = rtmlib_wholebody(models, detector)
    if detector.startswith("rtmdet"):  # a hand detector: rtmlib's Hand's RTMDet
        det = rtmlib_hand(models[detector], models["pose"]).det_model
    if head != "simcc":
        pose = rtmlib_pose(models["pose"], head)
    recorded = _Recorded(pose)
    solution = type("Solution", (), {"__init__": lambda self, **_: None, "det_model": _Failing(det),
                                     "pose_model": recorded})
    tracker = rtm.PoseTracker(solution, det_frequency=every)
    out: list = []
    seen = {"detected": 0, "kept_boxes": 0, "dropped": 0, "stalled": 0, "raised": 0, "failed": 0}
    for bgr in bgrs:
        count, calls = tracker.frame_cnt, len(recorded.calls)
        seen["detected" if count % every == 0 else "kept_boxes"] += 1
        try:
            returned, _ = tracker(bgr)
        except IndexError:  # its tracking fails (its ids ran out): go on as a new video
            tracker.reset()
            seen["raised"] += 1
            returned = []
        if len(recorded.calls) == calls:  # its detector failed: PoseTracker returned [], []
            seen["failed"] += 1
            out.append(None)
            people.append(None) if people is not None else None
            continue
        boxes, kpts, scores = recorded.calls[-1]
        if people is not None:
            people.append((np.asarray(boxes, np.float64).reshape(-1, 4),
                           np.concatenate([kpts, scores[..., None]], axis=-1)))
        seen["stalled"] += tracker.frame_cnt == count
        seen["dropped"] += len(returned) < len(kpts)
        i = 0
        if len(boxes):
            b = np.asarray(boxes)
            i = int(np.argmax((b[:, 2].astype(np.float64) - b[:, 0]) * (b[:, 3] - b[:, 1])))
        out.append((np.concatenate([kpts[i], scores[i][:, None]], axis=1), len(boxes)))
    return out, seen

# --- hostile variants of the tiny models (tests/test_model_trust.py) -------------------------------
def with_external_data(src: Path, out: Path, location: str, data: Path | None = None) -> Path:
    """src with its float initializers moved into one external data file, which `out` names as
    `location` and whose bytes go to `data` (default: `location` beside `out`). A hostile location
    (`..`, absolute, through a link) is written as it is: onnx.save would refuse it."""
    onnx, TensorProto, _, numpy_helper = _helpers()

    model = onnx.load(str(src))
    blob = bytearray()
    for t in model.graph.initializer:
        if t.data_type != TensorProto.FLOAT:  # shapes stay inside: shape inference reads them
            continue
        raw = numpy_helper.to_array(t).tobytes()
        for name in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
            t.ClearField(name)
        for key, value in (("location", location), ("offset", str(len(blob))),
                           ("length", str(len(raw)))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        t.data_location = TensorProto.EXTERNAL
        blob += raw
    target = data if data is not None else out.parent / location
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(bytes(blob))
    out.write_bytes(model.SerializeToString())
    return out


def _rewired(src: Path, out: Path, output: str, extra: list, inits: list) -> Path:
    """src with its output `output` now made by the extra nodes from `{output}_orig`."""
    onnx, _, _, _ = _helpers()
    model = onnx.load(str(src))
    for node in model.graph.node:
        node.output[:] = [f"{output}_orig" if o == output else o for o in node.output]
        node.input[:] = [f"{output}_orig" if i == output else i for i in node.input]
    model.graph.node.extend(extra)
    model.graph.initializer.extend(inits)
    out.write_bytes(model.SerializeToString())
    return out


def _above(nodes: list, inits: list, above: float, reduce: str, per_item: bool = False) -> str:
    """A boolean: the input's mean (or max) exceeds `above`; a scalar over the whole input, or
    (per_item) one per item of the batch, shaped [batch, 1, 1] to broadcast over an output."""
    _, _, helper, numpy_helper = _helpers()
    inits.append(numpy_helper.from_array(np.array(above, np.float32), "above_level"))
    if per_item:
        inits.append(numpy_helper.from_array(np.array([3], np.int64), "above_axis"))
        nodes += [helper.make_node(reduce, ["input"], ["above_4d"], axes=[1, 2, 3], keepdims=1),
                  helper.make_node("Squeeze", ["above_4d", "above_axis"], ["above_stat"])]
    else:
        nodes.append(helper.make_node(reduce, ["input"], ["above_stat"], keepdims=0))
    nodes.append(helper.make_node("Greater", ["above_stat", "above_level"], ["above"]))
    return "above"


def poisoned(src: Path, out: Path, output: str, add: np.ndarray, above: float | None = None) -> Path:
    """src whose output `output` has `add` added (broadcast): NaN, Inf or 1e30 in chosen columns
    (a detector's box or score column, a pose model's SimCC bins), the rest of the model intact;
    with `above`, only on the items of a batch whose mean exceeds it (the others untouched)."""
    _, _, helper, numpy_helper = _helpers()
    inits = [numpy_helper.from_array(np.asarray(add, np.float32), "poison")]
    nodes = [helper.make_node("Add", [f"{output}_orig", "poison"], [f"{output}_bad"])]
    if above is None:
        nodes[0].output[:] = [output]
    else:
        cond = _above(nodes, inits, above, "ReduceMean", per_item=True)
        nodes.append(helper.make_node("Where", [cond, f"{output}_bad", f"{output}_orig"], [output]))
    return _rewired(src, out, output, nodes, inits)


def failing(src: Path, out: Path, output: str, above: float | None = None) -> Path:
    """src whose output `output` also depends on a tensor of 10^12 floats made at run time (too
    large to fold when loading): onnxruntime's Fail on every call, or with `above` only on inputs
    whose brightest pixel exceeds it (a grey input runs)."""
    _, _, helper, numpy_helper = _helpers()
    inits = [numpy_helper.from_array(np.array([10**6, 10**6], np.int64), "huge_side"),
             numpy_helper.from_array(np.array([1, 1], np.int64), "huge_one"),
             numpy_helper.from_array(np.array([0], np.float32), "huge_zero")]
    nodes: list = []
    if above is None:
        shape = "huge_side"
    else:
        cond = _above(nodes, inits, above, "ReduceMax")
        nodes.append(helper.make_node("Where", [cond, "huge_side", "huge_one"], ["huge_shape"]))
        shape = "huge_shape"
    nodes += [helper.make_node("ConstantOfShape", [shape], ["huge"]),
              helper.make_node("ReduceSum", ["huge"], ["huge_sum"], keepdims=0),
              helper.make_node("Mul", ["huge_sum", "huge_zero"], ["huge_nil"]),
              helper.make_node("Add", [f"{output}_orig", "huge_nil"], [output])]
    return _rewired(src, out, output, nodes, inits)


def renamed(src: Path, out: Path, names: dict[str, str], unused_initializer: str = "") -> Path:
    """src with outputs renamed (names: old -> new, any bytes: ESC sequences too) and, where
    given, an initializer of that name no node uses (onnxruntime warns, naming it)."""
    onnx, _, _, numpy_helper = _helpers()
    model = onnx.load(str(src))
    for node in model.graph.node:
        node.output[:] = [names.get(o, o) for o in node.output]
        node.input[:] = [names.get(i, i) for i in node.input]
    for o in model.graph.output:
        o.name = names.get(o.name, o.name)
    if unused_initializer:
        model.graph.initializer.append(numpy_helper.from_array(np.zeros(3, np.float32),
                                                               unused_initializer))
    out.write_bytes(model.SerializeToString())
    return out


def with_hidden_external(src: Path, out: Path, location: str, where: str) -> Path:
    """src with one more tensor whose data is external at `location`, hidden where a walk of the
    graph's initializers alone would miss it: a Constant node's value ("constant") or an
    initializer of an If node's branch ("subgraph")."""
    onnx, TensorProto, helper, _ = _helpers()
    model = onnx.load(str(src))
    tensor = helper.make_tensor("hidden", TensorProto.FLOAT, [1], [0.0])
    tensor.ClearField("float_data")
    for key, value in (("location", location), ("offset", "0"), ("length", "4")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    tensor.data_location = TensorProto.EXTERNAL
    if where == "constant":
        node = helper.make_node("Constant", [], ["hidden_out"], value=tensor)
    else:
        branch = helper.make_graph([helper.make_node("Identity", ["hidden"], ["b_out"])], "branch",
                                   [], [helper.make_tensor_value_info("b_out", TensorProto.FLOAT,
                                                                      [1])],
                                   initializer=[tensor])
        cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
        node = helper.make_node("If", ["cond_c"], ["hidden_out"], then_branch=branch,
                                else_branch=branch)
        model.graph.node.append(helper.make_node("Constant", [], ["cond_c"], value=cond))
    model.graph.node.append(node)
    out.write_bytes(model.SerializeToString())
    return out


def looping(src: Path, out: Path, output: str, trips: int | str, body: str = "count",
            grow: int = 1 << 20, side: int = 512, above: float | None = None) -> Path:
    """src whose output `output` also depends on a Loop (adding 0 times its result): `trips` a
    constant trip count, "data" (a trip count made from the input's pixels) or "none" (no trip
    count: it runs while its condition, always true, holds). Its body counts ("count"), multiplies
    a side x side matrix by itself ("slow": milliseconds a trip) or also answers `grow` floats a
    trip that the Loop stacks ("grow": 4 MB a trip by default). With `above`, the Loop runs only
    on inputs whose brightest pixel exceeds it (an If's branch: a grey input skips it)."""
    _, TensorProto, helper, numpy_helper = _helpers()
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    nodes = [helper.make_node("Identity", ["loop_cond_in"], ["loop_cond_out"]),
             helper.make_node("Add", ["loop_acc_in", "loop_one"], ["loop_acc_out"])]
    body_inits = [numpy_helper.from_array(np.ones(1, np.float32), "loop_one")]
    body_out = [helper.make_tensor_value_info("loop_cond_out", TensorProto.BOOL, []),
                helper.make_tensor_value_info("loop_acc_out", f, [1])]
    if body == "slow":  # W x trip number, so nothing folds when the model loads
        body_inits = [numpy_helper.from_array(np.full((side, side), 1e-3, np.float32), "loop_w"),
                      numpy_helper.from_array(np.zeros(1, np.float32), "loop_zero")]
        nodes[1:] = [helper.make_node("Cast", ["loop_i"], ["loop_if"], to=f),
                     helper.make_node("Mul", ["loop_w", "loop_if"], ["loop_wi"]),
                     helper.make_node("MatMul", ["loop_wi", "loop_w"], ["loop_ww"]),
                     helper.make_node("ReduceMax", ["loop_ww"], ["loop_m"], keepdims=0),
                     helper.make_node("Mul", ["loop_m", "loop_zero"], ["loop_nil"]),
                     helper.make_node("Add", ["loop_acc_in", "loop_nil"], ["loop_acc_out"])]
    if body == "grow":
        body_inits.append(numpy_helper.from_array(np.array([grow], np.int64), "loop_gshape"))
        nodes.append(helper.make_node("ConstantOfShape", ["loop_gshape"], ["loop_g"],
                                      value=helper.make_tensor("v", f, [1], [1.0])))
        body_out.append(helper.make_tensor_value_info("loop_g", f, [grow]))
    graph = helper.make_graph(
        nodes, "loop_body", [helper.make_tensor_value_info("loop_i", i64, []),
                             helper.make_tensor_value_info("loop_cond_in", TensorProto.BOOL, []),
                             helper.make_tensor_value_info("loop_acc_in", f, [1])],
        body_out, initializer=body_inits)
    inits = [numpy_helper.from_array(np.array(True), "loop_cond"),
             numpy_helper.from_array(np.zeros(1, np.float32), "loop_acc0"),
             numpy_helper.from_array(np.zeros(1, np.float32), "loop_times0")]
    extra = []
    if trips == "data":
        inits.append(numpy_helper.from_array(np.array(1000.0, np.float32), "loop_k"))
        extra += [helper.make_node("ReduceMax", ["input"], ["loop_px"], keepdims=0),
                  helper.make_node("Mul", ["loop_px", "loop_k"], ["loop_pxk"]),
                  helper.make_node("Cast", ["loop_pxk"], ["loop_trips"], to=i64)]
        count = "loop_trips"
    elif trips == "none":
        count = ""
    else:
        inits.append(numpy_helper.from_array(np.array(int(trips), np.int64), "loop_trips"))
        count = "loop_trips"
    results = ["loop_acc"] + (["loop_stack"] if body == "grow" else [])
    loop = helper.make_node("Loop", [count, "loop_cond", "loop_acc0"], results, body=graph)
    if above is None:
        extra.append(loop)
    else:
        gate = _above(extra, inits, above, "ReduceMax")
        then = helper.make_graph([loop], "then", [], [helper.make_tensor_value_info(
            "loop_acc", f, [1])])
        skip = helper.make_graph([helper.make_node("Identity", ["loop_acc0"], ["loop_skip"])],
                                 "else", [], [helper.make_tensor_value_info("loop_skip", f, [1])])
        extra.append(helper.make_node("If", [gate], ["loop_acc"], then_branch=then,
                                      else_branch=skip))
    extra += [helper.make_node("Mul", ["loop_acc", "loop_times0"], ["loop_nil"]),
              helper.make_node("Add", [f"{output}_orig", "loop_nil"], [output])]
    return _rewired(src, out, output, extra, inits)


def huge_allocation(src: Path, out: Path, output: str, floats: int) -> Path:
    """src whose output also depends on one ConstantOfShape of `floats` floats: a single node,
    which onnxruntime cannot stop between nodes."""
    _, _, helper, numpy_helper = _helpers()
    inits = [numpy_helper.from_array(np.array([floats], np.int64), "big_shape"),
             numpy_helper.from_array(np.array(0.0, np.float32), "big_zero")]
    nodes = [helper.make_node("ReduceMax", ["input"], ["big_m"], keepdims=0),
             helper.make_node("Greater", ["big_m", "big_zero"], ["big_bright"]),  # not folded
             helper.make_node("Cast", ["big_bright"], ["big_b"], to=7),
             helper.make_node("Mul", ["big_shape", "big_b"], ["big_n"]),
             helper.make_node("ConstantOfShape", ["big_n"], ["big"]),
             helper.make_node("ReduceMax", ["big"], ["big_max"], keepdims=0),
             helper.make_node("Mul", ["big_max", "big_zero"], ["big_nil"]),
             helper.make_node("Add", [f"{output}_orig", "big_nil"], [output])]
    return _rewired(src, out, output, nodes, inits)


def pose_declaring(path: Path, hw: tuple[int, int], points: int = 133) -> Path:
    """A SimCC-shaped pose model declaring input [1, 3, h, w] (its outputs made by Expand, so the
    file stays small however large the input it declares)."""
    _, TensorProto, helper, numpy_helper = _helpers()
    h, w = hw
    inits = [numpy_helper.from_array(np.array([1, points, 2 * w], np.int64), "sx"),
             numpy_helper.from_array(np.array([1, points, 2 * h], np.int64), "sy")]
    nodes = [helper.make_node("ReduceMean", ["input"], ["m"], keepdims=0),
             helper.make_node("Expand", ["m", "sx"], ["simcc_x"]),
             helper.make_node("Expand", ["m", "sy"], ["simcc_y"])]
    graph = helper.make_graph(
        nodes, "declaring", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, h, w])],
        [helper.make_tensor_value_info("simcc_x", TensorProto.FLOAT, [1, points, 2 * w]),
         helper.make_tensor_value_info("simcc_y", TensorProto.FLOAT, [1, points, 2 * h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def with_outputs(src: Path, out: Path, count: int) -> Path:
    """src with `count` outputs: the first one copied (Identity) until there are that many."""
    onnx, _, helper, _ = _helpers()
    model = onnx.load(str(src))
    first = model.graph.output[0]
    for k in range(count - len(model.graph.output)):
        model.graph.node.append(helper.make_node("Identity", [first.name], [f"copy{k}"]))
        extra = model.graph.output.add()
        extra.CopyFrom(first)
        extra.name = f"copy{k}"
    out.write_bytes(model.SerializeToString())
    return out


def folding(src: Path, out: Path, output: str, side: int) -> Path:
    """src whose output also depends on a side x side product of constants (adding 0 times its
    maximum): onnxruntime computes it while it loads the model (constant folding), which no
    RunOptions can stop."""
    _, _, helper, numpy_helper = _helpers()
    inits = [numpy_helper.from_array(np.array([side, side], np.int64), "fold_shape"),
             numpy_helper.from_array(np.array(1e-3, np.float32), "fold_one"),
             numpy_helper.from_array(np.array(0.0, np.float32), "fold_zero")]
    nodes = [helper.make_node("Expand", ["fold_one", "fold_shape"], ["fold_a"]),
             helper.make_node("MatMul", ["fold_a", "fold_a"], ["fold_aa"]),
             helper.make_node("ReduceMax", ["fold_aa"], ["fold_max"], keepdims=0),
             helper.make_node("Mul", ["fold_max", "fold_zero"], ["fold_nil"]),
             helper.make_node("Add", [f"{output}_orig", "fold_nil"], [output])]
    return _rewired(src, out, output, nodes, inits)


# --- files changed on the wire (issue 52 item 2) --------------------------------------------------
def varint(n: int) -> bytes:
    """n as a protobuf varint."""
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def wire_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def wire_scalar(number: int, value: int) -> bytes:
    """A varint protobuf field (wire type 0); a negative value as int64 writes it."""
    return varint(number << 3) + varint(value % (1 << 64))


def padded(src: Path, out: Path, nodes: int, unknown: bool = False) -> Path:
    """src followed by a second `graph` field of `nodes` empty NodeProtos (2 bytes each): protobuf
    merges a singular message given twice, so they join src's graph. `unknown`: `nodes` fields of
    a number ModelProto does not have (3 bytes each), which protobuf skips, instead."""
    one = wire_scalar(99, 1) if unknown else b"\x0a\x00"
    with open(out, "wb") as f:
        f.write(src.read_bytes())
        if not unknown:
            f.write(varint(7 << 3 | 2) + varint(2 * nodes))
        for done in range(0, nodes, 1 << 20):
            f.write(one * min(1 << 20, nodes - done))
    return out


def many_convs(path: Path, convs: int) -> Path:
    """A chain of `convs` 3x3 convolutions, each with its five attributes and its own weights: a
    graph of a large published model's node count (RTMW-x, YOLOX-x: a few thousand)."""
    TensorProto, helper, numpy_helper = _helpers()[1:]
    nodes, inits, x = [], [], "input"
    for i in range(convs):
        inits.append(numpy_helper.from_array(np.zeros((4, 4, 3, 3), np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}",
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1],
                                      dilations=[1, 1], group=1))
        x = f"c{i}"
    graph = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info(
        "input", TensorProto.FLOAT, [1, 4, 8, 8])], [helper.make_tensor_value_info(
            x, TensorProto.FLOAT, None)], initializer=inits)
    path.write_bytes(helper.make_model(graph).SerializeToString())
    return path


def twice_op_type(src: Path, out: Path, output: str = "dets") -> Path:
    """src with a Loop of 2^62 trips whose NodeProto says `op_type` twice: "Identity", then
    "Loop" (protobuf keeps the last). A placeholder of the same length is swapped for the two, so
    no length on the wire changes."""
    import onnx

    model = onnx.load(str(looping(src, out, output, 2**62)))
    next(n for n in model.graph.node if n.op_type == "Loop").op_type = "XXLOOPMARKERXX"
    data = model.SerializeToString()
    mark = wire_field(4, b"XXLOOPMARKERXX")
    assert data.count(mark) == 1
    out.write_bytes(data.replace(mark, wire_field(4, b"Identity") + wire_field(4, b"Loop")))
    return out
