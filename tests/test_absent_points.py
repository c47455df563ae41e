"""Exports say what is there (issue 48 item 2): a point the family's declaration calls absent (its
presence rule: the part's list missing, or the point's score under the declared threshold) is
written absent in every export, read back the way each consumer reads it: pose-format's Pose.read
(confidence 0 and masked), TwoStream-SLR's and Uni-Sign's pkls (zeros with score 0: the score is
how their loaders drop a point), the pkl dict (its mask), Kaggle's islr parquets (NaN), the older
pipeline's pkl (the part None) and npz (zeros).

The cases are built, not found: a heatmap model whose maxima go below 0 (tests/tiny_onnx.py; such a
point came out at (-50, -68) with score -0.03 and read as present), the SimCC and 3D tiny models,
and a Holistic keypoints file whose parts are null on chosen rows (never what MediaPipe detects).
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import assert_no_traceback, run_cli
from kinds import KINDS
from tiny_onnx import pose_model, tiny_models

from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata

PHOENIX_T = next(k for k in KINDS if k.id == "phoenix-T")


def ok(args: list) -> None:
    proc = run_cli(args)
    assert_no_traceback(proc)
    assert proc.returncode == 0, f"{args[0]}: exit {proc.returncode}\n{proc.stderr}"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("absent")


@pytest.fixture(scope="module")
def dataset(folder: Path) -> list:
    return [PHOENIX_T.flag, PHOENIX_T.build(folder / "in")]


# family flags, its landmark column, the exports of it checked, which channels a .pose holds
CASES = {
    "heatmap-133": ("wholebody", "heatmap", 133, ("pose", "twostream-pkl", "unisign-pkl"), [0, 1]),
    "heatmap-17": ("wholebody", "heatmap", 17, ("pose",), [0, 1]),
    "simcc-133": ("wholebody", "simcc", 133, ("pose", "twostream-pkl", "unisign-pkl"), [0, 1]),
    "3d": ("wholebody3d", "simcc3d", 133, ("pose",), [0, 1, 4]),
}
COLUMN = {("wholebody", 17): "coco17", ("wholebody", 133): "wholebody",
          ("wholebody3d", 133): "wholebody3d"}
POINTS = {"coco17": (17, 3), "wholebody": (133, 3), "wholebody3d": (133, 6)}


def family_run(folder: Path, dataset: list, case: str) -> Path:
    name, head, k, _, _ = CASES[case]
    models = tiny_models(folder / "models")
    pose = models["pose3d"] if head == "simcc3d" else pose_model(folder / "models", head, k)
    out = folder / case
    ok(["run", *dataset, "--out", out, "--estimator", name, "--detector", models["detector"],
        "--pose-model", pose])
    return out


def absent_points(out: Path, column: str) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """keypoints.parquet's rows, values [T, K, C] (0 in null rows) and where the run's recorded
    presence rule calls each point absent: its row's list null, or its score under the threshold."""
    t = pq.read_table(out / "keypoints.parquet")
    cut = read_file_metadata(out / "keypoints.parquet")["score_threshold"]
    k = POINTS[column]
    present = ~np.asarray(t[column].is_null(), bool)
    vals = np.zeros((t.num_rows, k[0] * k[1]), np.float32)
    vals[present] = np.asarray([v for v in t[column].to_pylist() if v is not None], np.float32)
    vals = vals.reshape(t.num_rows, *k)
    return t, vals, ~present[:, None] | (vals[..., -1] < cut)




def rows_of(t: pa.Table, split: str, video: str) -> np.ndarray:
    return np.flatnonzero((t["split"].to_numpy(zero_copy_only=False) == split)
                          & (t["video"].to_numpy(zero_copy_only=False) == video))


def check_pose(path: Path, vals: np.ndarray, absent: np.ndarray, xyz: list[int]) -> None:
    from pose_format import Pose

    body = Pose.read(path.read_bytes()).body
    conf, data = np.asarray(body.confidence)[:, 0], body.data[:, 0]
    np.testing.assert_array_equal(conf == 0, absent)
    np.testing.assert_array_equal(np.ma.getmaskarray(data).all(axis=-1), absent)
    np.testing.assert_array_equal(np.ma.getmaskarray(data).any(axis=-1), absent)
    np.testing.assert_array_equal(conf[~absent], vals[..., -1][~absent])
    np.testing.assert_array_equal(np.asarray(data)[~absent], vals[..., xyz][~absent])


def check_twostream(got: np.ndarray, vals: np.ndarray, absent: np.ndarray) -> None:
    assert got.dtype == np.float32 and got.shape == vals.shape
    assert not got[absent].any()  # x, y and the score: 0, as a frame that was not read
    np.testing.assert_array_equal(got[~absent], vals[~absent])


def check_unisign(path: Path, vals: np.ndarray, absent: np.ndarray) -> None:
    data = pickle.loads(path.read_bytes())  # as its load_pose reads it: person 0 of each frame
    scores, xy = np.concatenate(data["scores"]), np.concatenate(data["keypoints"])
    assert not scores[absent].any() and not xy[absent].any()
    np.testing.assert_array_equal(scores[~absent], vals[..., 2][~absent])


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_point_the_family_calls_absent_is_absent_in_each_export(folder, dataset, case, tmp_path):
    name, head, k, exports, xyz = CASES[case]
    out = family_run(folder, dataset, case)
    t, vals, absent = absent_points(out, COLUMN[(name, k)])
    assert absent.any() and (~absent).any(), "the case needs points of both kinds"
    if head == "heatmap":  # the points: a heatmap maximum <= 0 on a frame that was posed
        assert (vals[..., -1][~np.asarray(t[COLUMN[(name, k)]].is_null(), bool)] <= 0).any()
    to = {"pose": "pose", "twostream-pkl": "twostream.pkl", "unisign-pkl": "unisign"}
    for fmt in exports:
        ok(["export", "--out", out, "--format", fmt, "--to", tmp_path / to[fmt]])
    two = pickle.loads((tmp_path / "twostream.pkl").read_bytes()) if "twostream-pkl" in exports \
        else {}
    videos = sorted(set(zip(t["split"].to_pylist(), t["video"].to_pylist(), strict=True)))
    for split, video in videos:
        rows = rows_of(t, split, video)
        check_pose(tmp_path / "pose" / split / f"{video}.pose", vals[rows], absent[rows], xyz)
        if two:
            check_twostream(two[f"{split}/{video}"]["keypoints"], vals[rows], absent[rows])
        if "unisign-pkl" in exports:
            check_unisign(tmp_path / "unisign" / split / f"{video}.pkl", vals[rows],
                          absent[rows])


# --- Holistic: its rule is the part's list, made null on chosen rows ------------------------------
PARTS = {"pose": (33, 4), "face": (468, 3), "left_hand": (21, 3), "right_hand": (21, 3),
         "pose_world": (33, 4)}


def holistic_case(run: Path, dest: Path) -> tuple[str, str, dict[str, np.ndarray]]:
    """A copy of the run whose first video's parts are made, row by row: each part null on the
    rows of a fixed pattern (every part on its third row: a frame with nothing), else values
    of our own (visibility 0.9); its default tensor set written again. (split, video, part ->
    [T] absent)."""
    out = dest / "run"
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("parts", "logs", "report"))
    t = pq.read_table(out / "keypoints.parquet")
    split, video = t["split"][0].as_py(), t["video"][0].as_py()
    rows = rows_of(t, split, video)
    assert len(rows) >= 4, "the case needs four frames of one video"
    rng = np.random.default_rng(48)
    absent: dict[str, np.ndarray] = {}
    for j, (part, (n, c)) in enumerate(PARTS.items()):
        lists = t[part].to_pylist()
        gone = np.array([(i + j) % 3 == 0 or i == 2 for i in range(len(rows))])
        for i, row in enumerate(rows):
            made = rng.uniform(0.2, 0.8, (n, c)).astype(np.float32)
            if c == 4:
                made[:, 3] = 0.9
            lists[row] = None if gone[i] else made.reshape(-1).tolist()
        t = t.set_column(t.schema.get_field_index(part), t.schema.field(part),
                         pa.array(lists, t.schema.field(part).type))
        absent[part] = gone
    pq.write_table(t, out / "keypoints.parquet")
    shutil.rmtree(out / "tensors")
    ok(["tensors", "--out", out])
    return split, video, absent


@pytest.mark.slow
def test_a_holistic_part_not_found_is_absent_in_each_export(run_copy, tmp_path):
    pytest.importorskip("pose_format")
    from pose_format import Pose

    split, video, absent = holistic_case(run_copy, tmp_path)
    out = tmp_path / "run"
    to = {"pkl": tmp_path / "d.pkl", "pose": tmp_path / "pose", "islr": tmp_path / "islr",
          "legacy-pkl": tmp_path / "legacy.pkl", "legacy-npz": tmp_path / "npz"}
    for fmt, dest in to.items():
        ok(["export", "--out", out, "--format", fmt, "--to", dest])
    frames = len(absent["pose"])
    nothing = np.logical_and.reduce([absent[p] for p in ("pose", "face", "left_hand",
                                                          "right_hand")])
    assert nothing.sum() == 1 and not all(a.all() for a in absent.values())

    entry = pickle.loads(to["pkl"].read_bytes())[video]  # {video: keypoints, mask, ...}
    points = json.loads((out / "tensors" / "points.json").read_text())["points"]
    want = np.stack([absent[p["part"]] for p in points], axis=1)
    np.testing.assert_array_equal(entry["mask"], ~want)
    assert not entry["keypoints"][want].any()

    body = Pose.read((to["pose"] / split / f"{video}.pose").read_bytes()).body
    at = 0
    for part, (n, _) in PARTS.items():
        conf = np.asarray(body.confidence)[:, 0, at:at + n]
        mask = np.ma.getmaskarray(body.data)[:, 0, at:at + n]
        np.testing.assert_array_equal(conf == 0, np.repeat(absent[part][:, None], n, 1), part)
        np.testing.assert_array_equal(mask.all(-1), conf == 0, part)
        at += n

    islr = pq.read_table(to["islr"] / split / f"{video}.parquet").to_pandas()
    assert len(islr) == frames * 543
    for part in ("pose", "face", "left_hand", "right_hand"):
        rows = islr[islr["type"] == part]
        gone = np.repeat(absent[part], {"face": 468}.get(part, PARTS[part][0]))
        np.testing.assert_array_equal(rows["x"].isna().to_numpy(), gone, part)

    legacy = pickle.loads(to["legacy-pkl"].read_bytes())[split]
    mine = [i for i, v in enumerate(legacy["video_ids"]) if v == video]
    assert len(mine) == frames - 1  # the frame with nothing is left out, as the older script did
    kept = np.flatnonzero(~nothing)
    for i, frame in zip(mine, kept, strict=True):
        for part in ("pose", "face", "left_hand", "right_hand"):
            assert (legacy["keypoints"][i][part] is None) == bool(absent[part][frame]), (frame, part)

    npz = np.load(to["legacy-npz"] / f"{split}_keypoints.npz")
    arr = npz["keypoints"][np.asarray(npz["video_ids"]) == video]
    for part, (lo, n) in {"face": (0, 68), "left_hand": (68, 21), "right_hand": (89, 21),
                          "pose": (110, 33)}.items():
        region = arr[:, lo:lo + n]
        np.testing.assert_array_equal(~region.any(axis=(1, 2)), absent[part][kept], part)
