"""The example plugins (examples/openpose25; examples/yolopose at the end), installed from their
wheels, keep the promises the built-in families keep (issue 48 item 3, issue 55 item 4).

The wheel of examples/openpose25 is built and installed beside the tool's wheel in a fresh venv
(conftest's `installed`, once a session), and every command runs from there, in a folder outside
the source tree, with nothing of the tree on the path: what a user who pip-installed both gets.
The model is a tiny BODY_25-shaped ONNX graph built here (25 points: the centres of a 5 x 5 grid
over the model's input, each scored by its cell's mean brightness), so every value is known from
the pixels. One story: run, SIGKILL and resume (the same bytes), diff, merge, the run's tensors,
report (the plain one, from the declaration), show, the .pose export read back, status,
extract_keypoints and to_pose (equal to the run and the export), verify, a changed video redone
alone, and a changed model named by verify and refused by a resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import REPO, assert_same_output, copy_dataset, outside_env, sh, wait_for

pytestmark = pytest.mark.slow

NAME = "openpose25"
INPUT = (40, 40)  # the tiny model's input (height, width): a 5 x 5 grid of 8 x 8 cells
THRESHOLD = 0.05  # the family's declared presence rule


def body25_model(path: Path, hw: tuple[int, int] = INPUT) -> Path:
    """[N, 3, H, W] -> [N, 25, 3]: each grid cell's centre (x, y in input pixels) and its mean
    brightness over the three channels (0..1)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    h, w = hw
    ch, cw = h // 5, w // 5
    ys, xs = np.mgrid[0:5, 0:5]
    xy = np.stack([(xs.reshape(-1) + 0.5) * cw, (ys.reshape(-1) + 0.5) * ch], axis=1)
    inits = [numpy_helper.from_array(xy.astype(np.float32)[None], "xy"),
             numpy_helper.from_array(np.array([-1, 25, 1], np.int64), "shape"),
             numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    nodes = [helper.make_node("AveragePool", ["image"], ["pooled"], kernel_shape=[ch, cw],
                              strides=[ch, cw]),
             helper.make_node("ReduceMean", ["pooled"], ["grey"], axes=[1], keepdims=1),
             helper.make_node("Reshape", ["grey", "shape"], ["score"]),
             helper.make_node("Mul", ["score", "zero"], ["zeros"]),  # xy repeated per frame
             helper.make_node("Add", ["xy", "zeros"], ["xyn"]),
             helper.make_node("Concat", ["xyn", "score"], ["points"], axis=2)]
    graph = helper.make_graph(
        nodes, "body25", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                        ["batch", 3, h, w])],
        [helper.make_tensor_value_info("points", TensorProto.FLOAT, ["batch", 25, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def expected_points(rgb: np.ndarray) -> np.ndarray:
    """The 25 points the family must give for a frame, from its pixels: the grid's centres in
    frame pixels, each scored by its cell's brightness after the family's resize."""
    import cv2

    h, w = INPUT
    small = cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA).astype(np.float64) / 255.0
    cells = small.reshape(5, h // 5, 5, w // 5, 3).mean(axis=(1, 3, 4)).reshape(-1)
    ys, xs = np.mgrid[0:5, 0:5]
    x = (xs.reshape(-1) + 0.5) * (w // 5) * rgb.shape[1] / w
    y = (ys.reshape(-1) + 0.5) * (h // 5) * rgb.shape[0] / h
    return np.stack([x, y, cells], axis=1)


def values_of(table, video: str) -> np.ndarray:
    rows = table.filter(pc.equal(table["video"], video))
    return np.array(rows[NAME].to_pylist(), np.float32).reshape(-1, 25, 3)


class Tool:
    """The installed tool, run from a folder outside the source tree with a user's environment."""

    def __init__(self, venv: Path, work: Path) -> None:
        self.exe, self.python, self.work, self.env = venv / "bin" / "phoenix-keypoints", \
            venv / "bin" / "python", work, outside_env()

    def __call__(self, *args: object, code: int = 0) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.exe), *map(str, args)], cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=600)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode == code, f"{args}: exit {proc.returncode}\n{proc.stderr}"
        return proc

    def kill_once_a_chunk_is_in(self, *args: object) -> None:
        env = {**self.env, "PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.05"}
        proc = subprocess.Popen([str(self.exe), *map(str, args)], cwd=self.work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        out = Path(self.work, args[args.index("--out") + 1])
        wait_for(lambda: any((out / "parts").glob("chunk-*.parquet")), 120, "a chunk committed",
                 proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert not (out / "keypoints.parquet").exists(), "killed after the end"


def test_the_example_plugin_keeps_every_promise_from_its_installed_wheel(
        installed: Path, sample_root: Path, tmp_path: Path) -> None:
    from pose_format import Pose

    from phoenix_keypoints.extract.keypoints.frames import read_frame

    work = tmp_path / "work"
    work.mkdir()
    tool = Tool(installed, work)
    where = sh([tool.python, "-c", "import phoenix_openpose25 as p, phoenix_keypoints as k; "
                "print(p.__file__, k.__file__)"], work, tool.env)
    assert str(REPO) not in where and where.count(str(installed)) == 2, where
    model = body25_model(work / "body25.onnx")
    data = copy_dataset(sample_root, work / "PHOENIX-2014-T", writable=True)
    args = ["--dataset", data, "--estimator", NAME, "--op25-model", model, "--workers", "2",
            "--chunk-frames", "30"]

    # run: the points are the pixels' own; run tells its user the report, which is there
    ran = tool("run", "--out", "A", *args)
    assert "phoenix-keypoints report --out A" in ran.stdout, ran.stdout
    assert "model body25.onnx (40x40 input" in ran.stderr, ran.stderr
    table = pq.read_table(work / "A" / "keypoints.parquet")
    videos = sorted(set(table["video"].to_pylist()))
    assert len(videos) == 5 and set(table["status"].to_pylist()) == {"ok"}
    for video in videos:
        image = table.filter(pc.equal(table["video"], video))["image"][0].as_py()
        rgb = read_frame(data / image)[0]
        np.testing.assert_allclose(values_of(table, video)[0], expected_points(rgb), atol=1e-4)
    points = np.array(table[NAME].to_pylist(), np.float32).reshape(-1, 25, 3)
    np.testing.assert_array_equal(table["points_found"].to_numpy(),
                                  (points[:, :, 2] >= THRESHOLD).sum(axis=1))
    assert (points[:, :, 2] < THRESHOLD).any(), "some points absent: the mask is exercised"

    # SIGKILL mid-run, then the same command without the family's flags: the same bytes
    tool.kill_once_a_chunk_is_in("run", "--out", "B", *args)
    resumed = tool("run", "--out", "B", "--dataset", data)
    assert "resuming:" in resumed.stderr, resumed.stderr
    assert_same_output(work / "B", work / "A")
    assert "agree" in tool("diff", "A", "B").stdout
    before = (work / "B" / "keypoints.parquet").read_bytes()
    (work / "B" / "keypoints.parquet").unlink()
    tool("merge", "--out", "B")
    assert (work / "B" / "keypoints.parquet").read_bytes() == before

    # the run's tensors: every point, masked by the declared presence rule
    split = table["split"][0].as_py()
    rows = table.filter(pc.equal(table["split"], split))
    arr = np.load(work / "A" / "tensors" / f"{split}.npy")
    mask = np.load(work / "A" / "tensors" / f"{split}.mask.npy")
    values = np.array(rows[NAME].to_pylist(), np.float32).reshape(-1, 25, 3)
    assert arr.shape == (rows.num_rows, 25, 3) and mask.shape == (rows.num_rows, 25)
    np.testing.assert_array_equal(mask, values[:, :, 2] >= THRESHOLD)
    # more sets of every declared point (issue 55 item 3): gaps filled, the mask and every found
    # value as they were; --normalize, which needs a point table, refused saying so
    said = tool("tensors", "--out", "A", "--fill", "interpolate").stdout
    assert "openpose25-25-interp3/ (25 points;" in said, said
    filled = work / "A" / "tensors" / "openpose25-25-interp3"
    np.testing.assert_array_equal(np.load(filled / f"{split}.mask.npy"), mask)
    np.testing.assert_array_equal(np.load(filled / f"{split}.npy")[mask], arr[mask])
    refused = tool("tensors", "--out", "A", "--normalize", "shoulders", code=2).stderr
    assert "needs a point table's `anchor`" in refused and "openpose25 family" in refused, refused

    # report (the plain one its declaration makes), show, status
    assert "5 videos, 82 frames" in tool("report", "--out", "A").stdout
    figures = pq.read_table(work / "A" / "report" / "videos.parquet").to_pandas()
    assert {"body_found", "head_found", "feet_found"} <= set(figures.columns)
    tool("show", "--out", "A", "--video", videos[0], "--to", "sheet.png")
    assert (work / "sheet.png").stat().st_size > 0
    status = tool("status", "--out", "A").stdout
    assert f"estimator: {NAME} (--op25-model body25.onnx)" in status, status
    assert "report:   " in status and "not written yet" not in status

    # the .pose export, read back; extract_keypoints and to_pose in the installed Python agree
    tool("export", "--out", "A", "--format", "pose", "--to", "poses")
    video = videos[0]
    written = next((work / "poses").rglob(f"{video}.pose")).read_bytes()
    pose = Pose.read(written)
    assert [c.name for c in pose.header.components] == ["body", "head", "feet"]
    # the declared skeleton and colours (issue 55 item 4): BODY_25's limbs, numbered in each
    # component; the six joining two components (nose-eye, ankle-toe) have no place in
    # pose-format's header, whose limbs are a component's own
    assert [c.limbs for c in pose.header.components] == [
        [(1, 8), (1, 2), (1, 5), (2, 3), (3, 4), (5, 6), (6, 7), (8, 9), (9, 10), (10, 11),
         (8, 12), (12, 13), (13, 14), (1, 0)], [(0, 2), (1, 3)], [(0, 1), (3, 4)]]
    assert [np.asarray(c.colors).tolist() for c in pose.header.components] == [
        [[255, 170, 0]], [[255, 60, 120]], [[40, 160, 255]]]
    present = values_of(table, video)[:, :, 2] >= THRESHOLD
    np.testing.assert_array_equal(pose.body.data[:, 0].filled(0)[present],
                                  values_of(table, video)[:, :, :2][present])
    folder = next(p.parent for p in sorted(data.rglob("*.png")) if p.parent.name == video)
    sh([tool.python, "-c", "import io, sys, numpy as np\n"
        "from phoenix_keypoints import extract_keypoints\n"
        f"kp = extract_keypoints(sys.argv[1], estimator={NAME!r}, model=sys.argv[2])\n"
        f"np.save('clip.npy', kp[{NAME!r}]); np.save('feet.npy', kp['feet'])\n"
        "buf = io.BytesIO(); kp.to_pose().write(buf); open('clip.pose', 'wb').write(buf.getvalue())",
        folder, model], work, tool.env)
    clip = np.load(work / "clip.npy")
    np.testing.assert_array_equal(clip, values_of(table, video))  # every frame's list exists
    np.testing.assert_array_equal(np.load(work / "feet.npy"), clip[:, 19:25])
    assert (work / "clip.pose").read_bytes() == written

    # verify: nothing changed; then a changed video is redone alone
    tool("verify", "--out", "A")
    frames = data / "features" / "fullFrame-210x260px" / "test" / "coffee-1"
    (frames / "images0013.png").write_bytes((frames / "images0001.png").read_bytes())
    parts = set((work / "A" / "parts").glob("chunk-*.parquet"))
    again = tool("run", "--out", "A", "--dataset", data)
    assert "re-planned: 1 video(s) (13 frame(s)) to extract in 1 new chunk(s)" in again.stderr
    new = set((work / "A" / "parts").glob("chunk-*.parquet")) - parts
    assert len(new) == 1 and pq.read_metadata(new.pop()).num_rows == 13
    changed = pq.read_table(work / "A" / "keypoints.parquet")
    for other in videos:
        if other != "coffee-1":
            np.testing.assert_array_equal(values_of(changed, other), values_of(table, other))
    assert tool("diff", "A", "B", code=1).returncode == 1

    # another model at the recorded path: verify names it; a run with frames to extract (one
    # more frame) refuses it before any worker starts
    body25_model(model, hw=(50, 50))
    checked = tool("verify", "--out", "A", code=1)
    assert f"--op25-model {model}: not the file this run was made with" in checked.stderr
    (frames / "images0014.png").write_bytes((frames / "images0002.png").read_bytes())
    refused = tool("run", "--out", "A", "--dataset", data, code=2)
    assert "--op25-model" in refused.stderr and "not the file this run was made with" in \
        refused.stderr, refused.stderr


# --- the second example: examples/yolopose, every person (issue 55 item 4) -----------------------
def test_the_multi_person_example_from_its_installed_wheel(installed: Path, sample_root: Path,
                                                           tmp_path: Path) -> None:
    """examples/yolopose from its wheel in the same venv: run (its points those of the decoder
    tests/test_example_yolopose.py checks frame by frame), SIGKILL and resume (the same bytes),
    diff, merge, `.pose` of every person read back by pose-format, tensors and report naming the
    person, show, status, verify, extract_keypoints and to_pose equal to the export, and the model
    moved: verify after it, the finished run recording the move (issue 55's must-show)."""
    from pose_format import Pose
    from test_example_yolopose import yolo_model

    work = tmp_path / "work"
    work.mkdir()
    tool = Tool(installed, work)
    where = sh([tool.python, "-c", "import phoenix_yolopose as p; print(p.__file__)"], work,
               tool.env)
    assert str(REPO) not in where and str(installed) in where, where
    model = yolo_model(work / "yolo.onnx")
    data = copy_dataset(sample_root, work / "PHOENIX-2014-T", writable=True)
    args = ["--dataset", data, "--estimator", "yolopose", "--yolo-model", model, "--workers", "2",
            "--chunk-frames", "30"]
    ran = tool("run", "--out", "A", *args)
    assert "person:    the signer (the family's parts: yolopose)" in ran.stdout, ran.stdout
    assert "model yolo.onnx (640x640 input" in ran.stderr, ran.stderr
    tool.kill_once_a_chunk_is_in("run", "--out", "B", *args)
    tool("run", "--out", "B", "--dataset", data)
    assert_same_output(work / "B", work / "A")
    assert "agree" in tool("diff", "A", "B").stdout
    before = (work / "B" / "keypoints.parquet").read_bytes()
    (work / "B" / "keypoints.parquet").unlink()
    tool("merge", "--out", "B")
    assert (work / "B" / "keypoints.parquet").read_bytes() == before

    table = pq.read_table(work / "A" / "keypoints.parquet")
    tool("export", "--out", "A", "--format", "pose", "--to", "poses")
    persons = table["persons"].to_numpy()
    video = table["video"][int(np.argmax(persons))].as_py()  # the video of the most persons
    rows = table.filter(pc.equal(table["video"], video))
    written = next((work / "poses").rglob(f"{video}.pose")).read_bytes()
    body = Pose.read(written).body
    assert body.data.shape == (rows.num_rows, int(persons.max()), 17, 2) and persons.max() >= 2
    for t, row in enumerate(rows["people"].to_pylist()):
        people = np.asarray(row or [], np.float32).reshape(-1, 17, 3)
        for p, person in enumerate(people):
            here = person[:, 2] >= 0.5
            np.testing.assert_array_equal(np.asarray(body.data[t, p])[here], person[here, :2])
        assert (np.asarray(body.confidence)[t, len(people):] == 0).all()

    assert "person:    the signer" in tool("tensors", "--out", "A", "--fill", "interpolate").stdout
    assert "person:    the signer" in tool("report", "--out", "A").stdout
    tool("show", "--out", "A", "--video", video, "--to", "sheet.png")  # the signer, drawn
    assert (work / "sheet.png").stat().st_size > 0
    assert "estimator: yolopose (--yolo-model yolo.onnx)" in tool("status", "--out", "A").stdout
    tool("verify", "--out", "A")
    folder = next(p.parent for p in sorted(data.rglob("*.png")) if p.parent.name == video)
    sh([tool.python, "-c", "import io, sys\n"
        "from phoenix_keypoints import extract_keypoints\n"
        "kp = extract_keypoints(sys.argv[1], estimator='yolopose', model=sys.argv[2])\n"
        "buf = io.BytesIO(); kp.to_pose().write(buf); open('clip.pose', 'wb').write(buf.getvalue())",
        folder, model], work, tool.env)
    assert (work / "clip.pose").read_bytes() == written

    # the model moved (Family's default moved_files, the plugin gives none): verify says the
    # recorded file is gone; the finished run asked again with the new path records the move in
    # run.json and keypoints.parquet, and verify passes again
    moved = work / "models" / "yolo.onnx"
    moved.parent.mkdir()
    model.rename(moved)
    assert "run this run's" in tool("verify", "--out", "A", code=1).stderr
    again = tool("run", "--out", "A", *[moved if x == model else x for x in args])
    assert "moved" in again.stderr, again.stderr
    assert str(moved) in json.loads((work / "A" / "run.json").read_text())["options"][
        "yolopose"]["model"]["path"]
    tool("verify", "--out", "A")
