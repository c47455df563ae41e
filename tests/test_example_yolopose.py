"""The second example plugin (examples/yolopose, issue 55 item 4): a one-stage multi-person family
of a YOLO-pose style model (input [1, 3, 640, 640] letterboxed, output [1, 56, 8400]: box, score,
17 x (x, y, visibility); a score threshold, NMS, COCO-17), declaring every person (`people`).

Its model is built here: a tiny ONNX graph whose answer is linear in each anchor's cell
brightness (out = A + B x brightness, A and B constants): five anchors answer a person (one of
them overlapping another almost wholly, for NMS to drop), each scored by its cell's brightness
times its own gain, so how many persons a frame holds follows the frame. The family's points are
checked against a decoder written here in numpy from the layout alone (letterbox, threshold,
NMS, the largest box as the signer), on every frame of the sample; then one run, installed as
pip installs a plugin (a dist-info naming its entry point), through `export --format pose`,
read back by pose-format with every person.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import REPO, assert_no_traceback, family_env, run_cli

SRC = REPO / "examples" / "yolopose" / "src"
HW = (640, 640)
STRIDES = (8, 16, 32)
# the anchors that answer a person: (stride, grid x, grid y), the box centre and size (input
# pixels, before it grows with the score), its score's gain (chosen so that the sample's frames
# hold 0 to 3 persons: hopper-1 all four counts); the second's box lies 2 px from the first's
# (IoU about 0.9: NMS drops the worse); the third's is the largest (the signer, where found)
PERSONS = [(32, 10, 8, (336, 272, 64, 96), 0.5), (16, 20, 16, (338, 274, 64, 96), 0.5),
           (32, 5, 5, (176, 176, 120, 160), 0.7), (32, 14, 12, (464, 400, 80, 100), 0.5),
           (32, 8, 15, (272, 496, 100, 140), 0.9)]
OFFSETS = np.stack([np.cos(np.arange(17)), np.sin(np.arange(17))], axis=1) * 30  # points' spread
BIAS = np.linspace(0.0, 0.5, 17)  # each point's visibility: the person's score plus this


def anchor_index(stride: int, gx: int, gy: int, hw: tuple[int, int] = HW) -> int:
    """Where an anchor sits in the answer: the strides' grids one after another, row-major."""
    before = sum((hw[0] // s) * (hw[1] // s) for s in STRIDES if s < stride)
    return before + gy * (hw[1] // stride) + gx


def yolo_model(path: Path, hw: tuple[int, int] = HW, rows: int = 56) -> Path:
    """[1, 3, H, W] -> [1, 56, anchors]: A + B x each anchor's cell brightness (the mean of its
    stride's grid cell over the three channels). `rows`: another answer's (a wrong model)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    h, w = hw
    count = sum((h // s) * (w // s) for s in STRIDES)
    a = np.zeros((1, rows, count), np.float32)
    b = np.zeros((1, rows, count), np.float32)
    for stride, gx, gy, (cx, cy, bw, bh), gain in PERSONS:
        i = anchor_index(stride, gx, gy, hw)
        a[0, 0:4, i] = cx, cy, bw, bh  # box centre, width, height: bw + 64 s, bh + 64 s
        b[0, 2:4, i] = 64 * gain, 64 * gain
        b[0, 4, i] = gain  # the person's score s = gain x brightness
        a[0, 5:56:3, i], b[0, 5:56:3, i] = cx, 2 * OFFSETS[:, 0] * gain  # x = cx + 2 offset s
        a[0, 6:56:3, i], b[0, 6:56:3, i] = cy, 2 * OFFSETS[:, 1] * gain
        a[0, 7:56:3, i], b[0, 7:56:3, i] = BIAS, gain  # visibility = s + bias
    nodes, grids = [], []
    for s in STRIDES:
        nodes += [helper.make_node("AveragePool", ["image"], [f"pool{s}"], kernel_shape=[s, s],
                                   strides=[s, s]),
                  helper.make_node("ReduceMean", [f"pool{s}"], [f"grey{s}"], axes=[1], keepdims=1),
                  helper.make_node("Reshape", [f"grey{s}", "flat"], [f"cells{s}"])]
        grids.append(f"cells{s}")
    nodes += [helper.make_node("Concat", grids, ["bright"], axis=2),
              helper.make_node("Mul", ["bright", "B"], ["scaled"]),
              helper.make_node("Add", ["scaled", "A"], ["answer"])]
    inits = [numpy_helper.from_array(a, "A"), numpy_helper.from_array(b, "B"),
             numpy_helper.from_array(np.array([1, 1, -1], np.int64), "flat")]
    graph = helper.make_graph(
        nodes, "yolopose", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, h, w])],
        [helper.make_tensor_value_info("answer", TensorProto.FLOAT, [1, rows, count])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


# --- the reference: a decoder written from the layout alone -----------------------------------
def reference_input(rgb: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """The letterboxed input (scaled to fit, centred, grey 114), its scale and left, top pad."""
    import cv2

    h, w = HW
    r = min(h / rgb.shape[0], w / rgb.shape[1])
    size = (int(round(rgb.shape[1] * r)), int(round(rgb.shape[0] * r)))
    left, top = int(round((w - size[0]) / 2 - 0.1)), int(round((h - size[1]) / 2 - 0.1))
    image = np.full((h, w, 3), 114, np.uint8)
    image[top:top + size[1], left:left + size[0]] = cv2.resize(rgb, size,
                                                               interpolation=cv2.INTER_LINEAR)
    return image.transpose(2, 0, 1)[None].astype(np.float32) / 255.0, r, left, top


def reference_decode(answer: np.ndarray, r: float, left: float, top: float,
                     score: float = 0.25, iou: float = 0.7) -> tuple[np.ndarray, int | None]:
    """Every person [n, 17, 3] in frame pixels, best score first, and which is the signer."""
    a = answer[0].T.astype(np.float64)  # [anchors, 56]
    a = a[a[:, 4] >= score]
    a = a[np.argsort(-a[:, 4], kind="stable")]
    xyxy = np.concatenate([a[:, :2] - a[:, 2:4] / 2, a[:, :2] + a[:, 2:4] / 2], axis=1)
    keep: list[int] = []
    for i in range(len(a)):
        def overlap(j: int, i: int = i) -> float:
            lo, hi = np.maximum(xyxy[i, :2], xyxy[j, :2]), np.minimum(xyxy[i, 2:], xyxy[j, 2:])
            inter = np.prod(np.clip(hi - lo, 0, None))
            union = np.prod(xyxy[i, 2:] - xyxy[i, :2]) + np.prod(xyxy[j, 2:] - xyxy[j, :2]) - inter
            return inter / union
        if all(overlap(j) <= iou for j in keep):
            keep.append(i)
    people = a[keep, 5:].reshape(-1, 17, 3)
    people[..., 0] = (people[..., 0] - left) / r
    people[..., 1] = (people[..., 1] - top) / r
    areas = np.prod(xyxy[keep, 2:] - xyxy[keep, :2], axis=1)
    return people, (int(np.argmax(areas)) if keep else None)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return yolo_model(tmp_path_factory.mktemp("yolo") / "yolopose.onnx")


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch):
    """The family as the registry makes it: its class's instance, the package imported after
    turning onnxruntime's telemetry off, which must come before onnxruntime loads."""
    from phoenix_keypoints.extract.keypoints.environ import telemetry_off

    telemetry_off()
    monkeypatch.syspath_prepend(str(SRC))
    from phoenix_yolopose import YoloPose

    return YoloPose()


def sample_frames(root: Path) -> list[Path]:
    return sorted(root.rglob("*.png"))


def test_the_family_keeps_its_contract(plugin) -> None:
    from phoenix_keypoints.extract.keypoints.contract import problems

    assert problems(plugin) == []
    decl = plugin.declaration(None)
    assert decl.people == {"people": "yolopose"} and decl.lists == {"people": 51, "boxes": 5}


def test_every_frame_equals_the_reference_decoder(plugin, model: Path, sample_root: Path) -> None:
    """On every frame of the sample: the same persons as the numpy decoder (after threshold and
    NMS), their points within 1e-3 px, the signer the largest box and first in the list, the
    others in score order; frames of 0, 1 and 3 or more persons among them, and frames whose
    signer is not the best scored."""
    import onnxruntime as ort

    from phoenix_keypoints.extract.keypoints.frames import read_frame

    est = plugin.open_estimator(plugin.clip_settings({"model": model}))
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    counts, signers = set(), set()
    for path in sample_frames(sample_root):
        rgb = read_frame(path)[0]
        x, r, left, top = reference_input(rgb)
        people, who = reference_decode(sess.run(None, {"image": x})[0], r, left, top)
        got = est.process(rgb)
        counts.add(len(people))
        assert got["persons"] == len(people), path
        if who is None:
            assert got["yolopose"] is None and got["people"] is None and got["boxes"] is None
            continue
        signers.add(who)
        order = [who, *(i for i in range(len(people)) if i != who)]  # the signer first
        np.testing.assert_allclose(got["people"].reshape(-1, 17, 3), people[order], atol=1e-3)
        np.testing.assert_allclose(got["yolopose"].reshape(17, 3), people[who], atol=1e-3)
        np.testing.assert_array_equal(got["yolopose"], got["people"][:51])
        assert got["boxes"].reshape(-1, 5).shape == (len(people), 5)
    est.close()
    assert {0, 1} <= counts and max(counts) >= 3, counts  # the case: 0, 1 and several
    assert max(counts) < len(PERSONS), counts  # NMS dropped the overlapping one
    assert signers - {0}, signers  # a signer that is not the best scored: reordered


def test_a_wrong_model_is_refused_before_any_frame(plugin, tmp_path: Path) -> None:
    """A model of another output shape is refused at load, in the family's words, before any
    frame."""
    from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

    wrong = yolo_model(tmp_path / "wrong.onnx", rows=57)  # one value too many a person
    with pytest.raises(ModelFileError, match="YOLO-pose style model") as e:
        plugin.clip_settings({"model": wrong})
    assert "[N, 56, 8400]" in str(e.value) and "57" in str(e.value), str(e.value)


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """examples/yolopose installed as pip installs a plugin: its package on the path and a
    dist-info naming its entry point (what its wheel holds)."""
    return family_env(tmp_path_factory.mktemp("yolo-site"), "phoenix_keypoints_yolopose",
                      "yolopose = phoenix_yolopose:YoloPose", SRC)


def test_a_run_exports_every_person(model: Path, sample_root: Path, plugin_env: dict[str, str],
                                    tmp_path: Path) -> None:
    """`run --estimator yolopose` then `export --format pose`: each video's body [frames, the
    most persons a frame holds, 17, 2], every person's points as keypoints.parquet's list
    column holds them (float32 exact), absent ones masked, person 0 the signer; `tensors` says
    whose points."""
    pytest.importorskip("pose_format")
    from pose_format import Pose

    def ok(*args: object) -> str:
        proc = run_cli(list(args), env=plugin_env)
        assert_no_traceback(proc)
        assert proc.returncode == 0, f"{args[0]}: exit {proc.returncode}\n{proc.stderr}"
        return proc.stdout

    out = tmp_path / "run"
    ran = ok("run", "--dataset", sample_root, "--out", out, "--estimator", "yolopose",
             "--yolo-model", model, "--limit-videos", "1")
    assert "person:    the signer (the family's parts: yolopose); every person" in ran, ran
    ok("export", "--out", out, "--format", "pose", "--to", tmp_path / "poses")
    table = pq.read_table(out / "keypoints.parquet")
    mosts = []
    for split, video in {(s, v) for s, v in zip(table["split"].to_pylist(),
                                                 table["video"].to_pylist(), strict=True)}:
        rows = table.filter(pc.and_(pc.equal(table["split"], split), pc.equal(table["video"], video)))
        everyone = [np.asarray(p if p is not None else [], np.float32).reshape(-1, 17, 3)
                    for p in rows["people"].to_pylist()]
        most = max(1, max(len(p) for p in everyone))
        mosts.append(most)
        body = Pose.read((tmp_path / "poses" / split / f"{video}.pose").read_bytes()).body
        assert body.data.shape == (rows.num_rows, most, 17, 2), (video, body.data.shape)
        conf = np.asarray(body.confidence)
        signers = rows["yolopose"].to_pylist()
        for t, people in enumerate(everyone):
            assert (conf[t, len(people):] == 0).all()
            if len(people):  # person 0 is the signer (the part), as a one-person reader takes it
                assert np.asarray(signers[t], np.float32).tolist() == people[0].ravel().tolist()
            for p, person in enumerate(people):
                here = person[:, 2] >= 0.5
                np.testing.assert_array_equal(np.asarray(body.data[t, p])[here], person[here, :2])
                np.testing.assert_array_equal(np.ma.getmaskarray(body.data[t, p]).all(axis=1),
                                              ~here)
    assert max(mosts) >= 2, mosts  # a video of several persons among them
    assert "person:    the signer" in ok("tensors", "--out", out, "--name", "again")
