"""Heads and point sets of the whole-body family (issue 39 items 1 and 3): a pose model's head is
read from its outputs (a SimCC pair, one heatmap tensor; a SimCC triple refused as 3D), its
points from its K (COCO-WholeBody 133, COCO 17, Halpe 26, hand 21, or --point-set), and a run
equals rtmlib 0.0.16 (RTMPose for SimCC, ViTPose for heatmaps) on tiny models built here, through
a frame folder, videos and an archive, after a SIGKILL, and in extract_keypoints.

mmpose's own DARK decoding (--decoder mmpose-dark) is checked against a transcription of mmpose's
numpy functions below, and the two heatmap decoders' distance on the same maps is measured
(docs/wholebody.md quotes it: `pytest tests/test_heads.py -k decoders -s`).
"""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import SHARED_SAMPLE, VIDEOS, killed_and_resumed, run_cli
from kinds import KINDS
from test_hand import HAND_COLUMNS, check_hands, rtmlib_every_hand
from test_wholebody import ok, reference_bgr, refused
from tiny_onnx import (
    pose_heatmap,
    pose_model,
    rtmdet_models,
    rtmlib_hand,
    rtmlib_hand_row,
    rtmlib_pose,
    rtmlib_signer,
    rtmlib_tracked,
    rtmlib_wholebody,
    tiny_models,
)

# At collection, before any test imports rtmlib: the runner turns onnxruntime's telemetry off when it
# loads, which must come before onnxruntime's first import.
from phoenix_keypoints.extract.families.wholebody.runner import Detector, PoseModel, largest

PX, SCORE = 0.01, 1e-4  # the bounds: pixels, scores
KIND = {k.id: k for k in KINDS}
COLUMN = {17: "coco17", 26: "halpe26", 21: "left_hand21", 133: "wholebody"}  # 21: with a detector
LAYOUT = {17: "coco", 26: "halpe26", 21: "hand21", 133: "coco-wholebody"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("heads")


def detector(folder: Path, k: int) -> Path:
    """The detector of rtmlib's solution for K points: RTMDet for a hand (Hand), else YOLOX."""
    return rtmdet_models(folder)["rtmdet"] if k == 21 else tiny_models(folder)["detector"]


def args(folder: Path, head: str, k: int, *more: str) -> list:
    return ["--estimator", "wholebody", "--detector", detector(folder, k),
            "--pose-model", pose_model(folder, head, k), *more]


def rtmlib_rows(folder: Path, head: str, k: int, root: Path, images: list[str]) -> list:
    """rtmlib's (YOLOX, then RTMPose or ViTPose on the largest box; a hand: its Hand, RTMDet and
    every box posed, the largest box's person kept) ([K, 3], persons) per frame."""
    if k == 21:
        hand = rtmlib_hand(detector(folder, k), pose_model(folder, head, k), head)
        return [rtmlib_hand_row(hand, reference_bgr(root, image))[:2] for image in images]
    det, _ = rtmlib_wholebody(tiny_models(folder))
    pose = rtmlib_pose(pose_model(folder, head, k), head)
    return [rtmlib_signer(det, pose, reference_bgr(root, image)) for image in images]


def assert_equals_rtmlib(out: Path, folder: Path, head: str, k: int, root: Path) -> None:
    t = pq.read_table(out / "keypoints.parquet")
    assert COLUMN[k] in t.column_names and t.num_rows
    if k == 21:  # every hand of rtmlib's Hand, and the signer's two (tests/test_hand.py)
        hand = rtmlib_hand(detector(folder, k), pose_model(folder, head, k), head)
        for row in t.select([*HAND_COLUMNS, "height"]).to_pylist():
            bgr = reference_bgr(root, row["image"])
            dxy, dscore = check_hands(row, *rtmlib_every_hand(hand, bgr), bgr.shape[1])
            assert dxy <= PX and dscore <= SCORE, (row["image"], dxy, dscore)
        return
    rows = t.select(["image", "status", COLUMN[k], "persons"]).to_pylist()
    refs = rtmlib_rows(folder, head, k, root, [r["image"] for r in rows])
    dxy = dscore = 0.0
    for row, (ref, n) in zip(rows, refs, strict=True):
        assert row["status"] == "ok" and row["persons"] == n, (row["image"], row["persons"], n)
        got = np.asarray(row[COLUMN[k]], np.float32).reshape(k, 3)
        dxy = max(dxy, float(np.abs(got[:, :2] - ref[:, :2]).max()))
        dscore = max(dscore, float(np.abs(got[:, 2] - ref[:, 2]).max()))
    print(f"{head} K={k}: {len(rows)} rows, max |dx,dy| {dxy:.2e} px, max |dscore| {dscore:.2e}")
    assert dxy <= PX and dscore <= SCORE


# each head and point set once, the input kinds spread over them
CASES = [("heatmap", 17, "phoenix-T"), ("heatmap", 26, "videos"), ("heatmap", 21, "archive-top.tar.gz"),
         ("heatmap", 133, "videos"), ("simcc", 17, "archive-top.tar.gz"), ("simcc", 26, "phoenix-T"),
         ("simcc", 21, "videos"), ("simcc", 133, "phoenix-T")]


@pytest.mark.parametrize("head,k,kind", CASES)
def test_each_head_and_point_set_equals_rtmlib_through_run(folder, head, k, kind, tmp_path):
    """`run` with a pose model of each head and K: every row equals rtmlib's on its frame; the
    head and layout are said at start and recorded; the column, names and parts are the layout's."""
    built = KIND[kind].build(tmp_path / "in")
    out = tmp_path / "out"
    proc = run_cli(["run", KIND[kind].flag, built, "--out", out, *args(folder, head, k)])
    ok(proc, "run")
    said = "heatmap head" if head == "heatmap" else "SimCC head"
    assert said in proc.stderr + proc.stdout and f"--point-set {LAYOUT[k]}" in proc.stderr + proc.stdout
    assert_equals_rtmlib(out, folder, head, k, built)
    from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata

    meta = read_file_metadata(out / "keypoints.parquet")
    settings = json.loads((out / "run.json").read_text())["options"]["wholebody"]
    if (head, k) == ("simcc", 133):  # rtmlib's own: recorded as before heads and point sets
        assert "point_set" not in settings and "head" not in settings
    else:
        assert settings["point_set"] == LAYOUT[k] and settings["head"]["kind"] == head
        assert settings["head"]["points"] == k
    layout = meta["layout"][COLUMN[k]]
    assert layout["points"] == k and len(layout["names"]) == k


@pytest.mark.parametrize("head,k", [("heatmap", 17), ("simcc", 21)])
def test_det_every_tracks_a_model_as_rtmlib_posetracker(folder, head, k, tmp_path):
    """--det-every 3 with a ViTPose-style 17-point model: each frame equals rtmlib's
    PoseTracker(det_frequency=3) around rtmlib's ViTPose (the head's decoder is the tracker's pose
    step, its K points make the next boxes); with a hand model, PoseTracker around rtmlib's Hand
    (its RTMDet every third frame, the hands' own boxes in between)."""
    import av
    from test_tracking import FRAMES, _write, decoded

    with av.open(str(VIDEOS / "signer_demo.mp4")) as src:
        frames = [fr.to_ndarray(format="rgb24")[::2, ::2] for fr in src.decode(video=0)][:FRAMES]
    video = tmp_path / "clips" / "signer.mp4"
    _write(video, frames)
    out = tmp_path / "out"
    ok(run_cli(["run", "--dataset", video.parent, "--out", out,
                *args(folder, head, k, "--det-every", "3")]), "run")
    rows = pq.read_table(out / "keypoints.parquet").sort_by("frame").to_pylist()
    models = {**tiny_models(folder), **rtmdet_models(folder), "pose": pose_model(folder, head, k)}
    det = "rtmdet" if k == 21 else "detector"
    people: list = []
    ref, seen = rtmlib_tracked(models, det, 3, decoded(video), head, people)
    assert len(rows) == len(ref) == FRAMES and seen["kept_boxes"] > 0, seen
    for row, (want, persons), (boxes, every) in zip(rows, ref, people, strict=True):
        if k == 21:  # every hand PoseTracker's Hand posed: tests/test_hand.py
            dxy, dscore = check_hands(row, boxes, every, frames[0].shape[1])
            assert dxy <= PX and dscore <= SCORE, row["frame"]
            continue
        got = np.asarray(row[COLUMN[k]], np.float64).reshape(k, 3)
        assert row["status"] == "ok" and row["persons"] == persons, (row["frame"], persons)
        assert np.abs(got[:, :2] - want[:, :2]).max() <= PX, row["frame"]
        assert np.abs(got[:, 2] - want[:, 2]).max() <= SCORE, row["frame"]


def test_a_hand_model_without_a_detector_takes_the_whole_frame(folder, tmp_path):
    """--pose-model alone (a hand model on hand crops): each frame whole, as rtmlib's RTMPose
    takes a frame without boxes; persons 0; said at start."""
    out = tmp_path / "out"
    proc = run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1",
                    "--estimator", "wholebody", "--pose-model", pose_model(folder, "simcc", 21)])
    ok(proc, "run")
    assert "no detector (the whole frame)" in proc.stderr + proc.stdout
    t = pq.read_table(out / "keypoints.parquet")
    pose = rtmlib_pose(pose_model(folder, "simcc", 21), "simcc")
    for row in t.select(["image", "hand21", "persons"]).to_pylist():
        kpts, scores = pose(reference_bgr(Path(SHARED_SAMPLE), row["image"]), bboxes=[])
        got = np.asarray(row["hand21"], np.float32).reshape(21, 3)
        assert row["persons"] == 0
        assert np.abs(got[:, :2] - kpts[0]).max() <= PX and np.abs(got[:, 2] - scores[0]).max() <= SCORE


def test_a_resume_after_sigkill_equals_the_uninterrupted_run(folder, tmp_path):
    """A heatmap model of 17 points decoded with mmpose's DARK: killed mid-run, resumed, the
    same bytes as a run never killed."""
    common = ["--dataset", SHARED_SAMPLE, *args(folder, "heatmap", 17, "--decoder", "mmpose-dark"),
              "--workers-per-gpu", "1", "--chunk-frames", "30"]
    b = killed_and_resumed(common, tmp_path)
    refused(run_cli(["run", "--out", b, *common[:-4], "--decoder", "rtmlib"]), "--decoder")


def test_outputs_of_a_17_point_run_follow_its_layout(folder, tmp_path):
    """report, show, tensors [T, 17, 3], the .pose export and status read the layout; the
    133-point exports are refused naming the families that make them."""
    out = tmp_path / "run"
    ok(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1",
                *args(folder, "heatmap", 17)]), "run")
    ok(run_cli(["report", "--out", out]), "report")
    videos = pq.read_table(out / "report" / "videos.parquet")
    assert "body_found" in videos.column_names and "face_found" not in videos.column_names
    ok(run_cli(["show", "--out", out, "--video", "signer_demo-1", "--to", tmp_path / "s.png"]), "show")
    assert cv2.imread(str(tmp_path / "s.png")) is not None
    points = json.loads(next((out / "tensors").rglob("points.json")).read_text())
    arrays = [np.load(p) for p in (out / "tensors").rglob("*.npy") if "mask" not in p.name]
    assert arrays and all(a.shape[1:] == (17, 3) for a in arrays), [a.shape for a in arrays]
    assert "left_wrist" in json.dumps(points)
    ok(run_cli(["export", "--out", out, "--format", "pose", "--to", tmp_path / "pose"]), "pose")
    from pose_format import Pose

    pose = Pose.read((next((tmp_path / "pose").rglob("*.pose"))).read_bytes())
    assert pose.body.data.shape[2] == 17
    refused(run_cli(["export", "--out", out, "--format", "twostream-pkl", "--to", tmp_path / "t.pkl"]),
            "COCO body 17 points")
    status = run_cli(["status", "--out", out])
    assert "--point-set coco" in status.stdout + status.stderr
    ok(run_cli(["verify", "--out", out]), "verify")
    ok(run_cli(["diff", out, out]), "diff")
    other = tmp_path / "mmpose"
    ok(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", other, "--videos", "signer_demo-1",
                *args(folder, "heatmap", 17, "--decoder", "mmpose-dark")]), "run")
    differs = run_cli(["diff", out, other])
    assert differs.returncode == 1 and "coco17" in differs.stdout + differs.stderr, differs.stdout


def test_extract_keypoints_takes_a_heatmap_model_and_its_point_set(folder, tmp_path):
    """extract_keypoints(..., pose_model=heatmap model) equals rtmlib's ViTPose (a hand: on every
    box of rtmlib's Hand's RTMDet); kp[part] slices the layout's parts; to_pose() has 21 points."""
    from phoenix_keypoints import extract_keypoints

    frames = sorted(Path(SHARED_SAMPLE).rglob("*.png"))[:4]
    kp = extract_keypoints([str(f) for f in frames], estimator="wholebody",
                           detector=detector(folder, 21),
                           pose_model=pose_model(folder, "heatmap", 21), point_set="hand21")
    assert kp["left_hand"].shape == kp["right_hand"].shape == (4, 21, 3)
    hand = rtmlib_hand(detector(folder, 21), pose_model(folder, "heatmap", 21), "heatmap")
    for t, f in enumerate(frames):
        _, every = rtmlib_every_hand(hand, cv2.imread(str(f)))
        got = kp["hands"][t, :len(every)]
        assert np.isnan(kp["hands"][t, len(every):]).all()
        assert np.abs(got[..., :2] - every[..., :2]).max() <= PX
        assert np.abs(got[..., 2] - every[..., 2]).max() <= SCORE
    assert kp.to_pose().body.data.shape[2] == 42


def test_models_the_family_cannot_read_are_refused_with_the_choices(folder, tmp_path):
    """A point set of another size, a K no layout has alone, mmpose-dark on a SimCC head, a
    SimCC triple (3D: the registry's 3D family named), --point-set with the 3D family,
    --decoder without a pose model and --det-every without a detector: exit 2, naming what to
    pass instead."""
    import onnx
    from onnx import helper

    base = ["run", "--dataset", SHARED_SAMPLE, "--out", tmp_path / "o"]
    refused(run_cli([*base, *args(folder, "simcc", 133, "--point-set", "coco")]),
            "133 points", "coco-wholebody (133)", "hand21 (21)")
    refused(run_cli([*base, *args(folder, "heatmap", 50)]), "50 points", "--point-set",
            "halpe26 (26)")
    refused(run_cli([*base, *args(folder, "simcc", 17, "--decoder", "mmpose-dark")]),
            "--decoder mmpose-dark", "SimCC head")
    model = onnx.load(str(pose_model(folder, "simcc", 17)))
    model.graph.node.append(helper.make_node("Identity", ["simcc_x"], ["simcc_z"]))
    model.graph.output.append(helper.make_tensor_value_info("simcc_z", onnx.TensorProto.FLOAT,
                                                            [1, 17, 96]))
    triple = tmp_path / "rtmw3d.onnx"
    triple.write_bytes(model.SerializeToString())
    det = tiny_models(folder)["detector"]
    refused(run_cli([*base, "--detector", det, "--pose-model", triple]),
            "three SimCC outputs", "3D", "--estimator wholebody3d")
    # the flags are the whole-body family's: refused with a family that does not read them
    refused(run_cli([*base, "--estimator", "wholebody3d", "--detector", det, "--pose-model",
                     tiny_models(folder)["pose3d"], "--point-set", "coco-wholebody"]),
            "--point-set, --decoder and --detector-kind", "--estimator wholebody")
    refused(run_cli([*base, "--decoder", "mmpose-dark"]), "--decoder and --detector-kind",
            "--pose-model")
    # rtmlib's tracking follows the detector's boxes: --det-every needs one
    refused(run_cli([*base, "--estimator", "wholebody", "--pose-model", pose_model(folder, "simcc", 21),
                     "--det-every", "5"]), "--det-every", "--detector")


# --- mmpose's DARK, as mmpose writes it --------------------------------------------------------
# A transcription of mmpose 1.x's numpy post-processing, the reference of --decoder mmpose-dark:
# github.com/open-mmlab/mmpose at 759b39c13fea6ba094afc1fa932f51dc1b11cbf9,
# mmpose/codecs/utils/post_processing.py (get_heatmap_maximum, gaussian_blur),
# mmpose/codecs/utils/refinement.py (refine_keypoints_dark), mmpose/codecs/msra_heatmap.py
# (MSRAHeatmap.decode) and mmpose/models/pose_estimators/topdown.py (input space to image space),
# with the codec of configs/wholebody_2d_keypoint/topdown_heatmap/coco-wholebody/
# td-hm_hrnet-w48_dark-8xb32-210e_coco-wholebody-384x288.py (MSRAHeatmap, unbiased=True,
# blur_kernel_size 11 by default).
def mm_get_heatmap_maximum(heatmaps):
    K, H, W = heatmaps.shape
    heatmaps_flatten = heatmaps.reshape(K, -1)
    y_locs, x_locs = np.unravel_index(np.argmax(heatmaps_flatten, axis=1), shape=(H, W))
    locs = np.stack((x_locs, y_locs), axis=-1).astype(np.float32)
    vals = np.amax(heatmaps_flatten, axis=1)
    locs[vals <= 0.] = -1
    return locs, vals


def mm_gaussian_blur(heatmaps, kernel=11):
    border = (kernel - 1) // 2
    K, H, W = heatmaps.shape
    for k in range(K):
        origin_max = np.max(heatmaps[k])
        dr = np.zeros((H + 2 * border, W + 2 * border), dtype=np.float32)
        dr[border:-border, border:-border] = heatmaps[k].copy()
        dr = cv2.GaussianBlur(dr, (kernel, kernel), 0)
        heatmaps[k] = dr[border:-border, border:-border].copy()
        heatmaps[k] *= origin_max / np.max(heatmaps[k])
    return heatmaps


def mm_refine_keypoints_dark(keypoints, heatmaps, blur_kernel_size):
    N, K = keypoints.shape[:2]
    H, W = heatmaps.shape[1:]
    heatmaps = mm_gaussian_blur(heatmaps, blur_kernel_size)
    np.maximum(heatmaps, 1e-10, heatmaps)
    np.log(heatmaps, heatmaps)
    for n, k in product(range(N), range(K)):
        x, y = keypoints[n, k, :2].astype(int)
        if 1 < x < W - 2 and 1 < y < H - 2:
            dx = 0.5 * (heatmaps[k, y, x + 1] - heatmaps[k, y, x - 1])
            dy = 0.5 * (heatmaps[k, y + 1, x] - heatmaps[k, y - 1, x])
            dxx = 0.25 * (heatmaps[k, y, x + 2] - 2 * heatmaps[k, y, x] + heatmaps[k, y, x - 2])
            dxy = 0.25 * (heatmaps[k, y + 1, x + 1] - heatmaps[k, y - 1, x + 1]
                          - heatmaps[k, y + 1, x - 1] + heatmaps[k, y - 1, x - 1])
            dyy = 0.25 * (heatmaps[k, y + 2, x] - 2 * heatmaps[k, y, x] + heatmaps[k, y - 2, x])
            derivative = np.array([[dx], [dy]])
            hessian = np.array([[dxx, dxy], [dxy, dyy]])
            if dxx * dyy - dxy**2 != 0:
                hessianinv = np.linalg.inv(hessian)
                offset = -hessianinv @ derivative
                offset = np.squeeze(np.array(offset.T), axis=0)
                keypoints[n, k, :2] += offset
    return keypoints


def mm_decode(encoded, input_size, center, scale):
    heatmaps = encoded.copy()
    K, H, W = heatmaps.shape
    keypoints, scores = mm_get_heatmap_maximum(heatmaps)
    keypoints, scores = keypoints[None], scores[None]
    keypoints = mm_refine_keypoints_dark(keypoints, heatmaps, blur_kernel_size=11)
    keypoints = keypoints * (np.array(input_size) / [W, H])  # MSRAHeatmap's scale_factor
    keypoints = keypoints / input_size * scale + center - 0.5 * scale  # TopdownPoseEstimator
    return keypoints[0], scores[0]


def heatmaps_of_tiny_models(folder: Path, k: int, model: Path | None = None
                            ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(maps [K, h, w], centre, scale) of a tiny heatmap model on the shared sample's crops."""
    det = Detector(tiny_models(folder)["detector"])
    pose = PoseModel(model or pose_model(folder, "heatmap", k))
    out = []
    for f in sorted(Path(SHARED_SAMPLE).rglob("*.png"))[:40]:
        bgr = cv2.imread(str(f))
        boxes = det(bgr)
        box = largest(boxes) if len(boxes) else np.array([0, 0, bgr.shape[1], bgr.shape[0]])
        outs, crops = pose.outputs([bgr], [box])
        out.append((outs[0][0], crops[0][1], crops[0][2]))
    return out


def test_mmpose_dark_equals_mmpose_numpy_functions(folder):
    """--decoder mmpose-dark against mmpose's own functions (transcribed above) on the tiny
    model's heatmaps and on maps whose peaks sit on every border case (edge, 1 and 2 pixels in)."""
    from phoenix_keypoints.extract.families.wholebody.heads import decode_heatmaps

    cases = heatmaps_of_tiny_models(folder, 133)
    rng = np.random.default_rng(0)
    gy, gx = np.mgrid[0:16, 0:12].astype(np.float32)
    peaks = [(x + rng.uniform(-0.4, 0.4), y + rng.uniform(-0.4, 0.4))
             for x in (0, 1, 2, 5, 9, 10, 11) for y in (0, 1, 2, 7, 13, 14, 15)]
    edge = np.stack([np.exp(-((gx - x) ** 2 + (gy - y) ** 2) / 8) for x, y in peaks]) - 0.01
    cases.append((edge.astype(np.float32), np.array([50.0, 60.0]), np.array([40.0, 53.3])))
    worst = 0.0
    for maps, centre, scale in cases:
        got, scores = decode_heatmaps(maps, centre, scale, (48, 64), "mmpose-dark")
        ref, ref_scores = mm_decode(maps.copy(), (48, 64), centre, scale)
        worst = max(worst, float(np.abs(got - ref).max()))
        np.testing.assert_array_equal(scores, ref_scores)
    print(f"mmpose-dark vs mmpose's functions: max |dx,dy| {worst:.2e} px")
    assert worst <= 1e-4


def test_the_two_heatmap_decoders_distance_on_the_same_maps(folder):
    """rtmlib's DARK-UDP and mmpose's DARK differ on the same heatmaps (UDP's (W - 1) rescaling,
    the blur's border, the step's differences): the distance docs/wholebody.md quotes, on a
    tiny model of a real input size (256x192, maps 64x48, sigma 2 as HRNet's targets)."""
    from phoenix_keypoints.extract.families.wholebody.heads import decode_heatmaps

    model = pose_heatmap(folder / "tiny-heatmap-256x192.onnx", hw=(256, 192), points=17)
    dist = []
    for maps, centre, scale in heatmaps_of_tiny_models(folder, 17, model):
        a, sa = decode_heatmaps(maps, centre, scale, (192, 256), "rtmlib")
        b, sb = decode_heatmaps(maps, centre, scale, (192, 256), "mmpose-dark")
        np.testing.assert_array_equal(sa, sb)  # both score a point by its map's maximum
        keep = sa > 0.3
        dist.append(np.linalg.norm((a - b)[keep], axis=1) / scale[1] * 256)
    d = np.concatenate(dist)
    print(f"rtmlib vs mmpose-dark, {d.size} points scoring >= 0.3: median {np.median(d):.3f}, "
          f"p95 {np.percentile(d, 95):.3f}, max {d.max():.3f} pixels of the 256x192 input")
    assert d.size and np.median(d) > 0.01, "the two decoders should differ"
