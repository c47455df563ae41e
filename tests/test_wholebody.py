"""--estimator wholebody against rtmlib, on tiny ONNX models the tests build (tests/tiny_onnx.py).

The reference is rtmlib 0.0.16 (installed --no-deps by scripts/setup.sh) fed each frame as its
users feed it: BGR pixels (cv2.imread for frame files; PyAV's RGB turned to BGR for video, the
decoder the tool uses), the signer taken as the largest box rtmlib's YOLOX returns. Equality:
x, y within 0.01 px and scores within 1e-4, for every row of a real run on a frame folder, an
archive, a folder of videos and a manifest, with both detector layouts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import (
    PHX_FRAMES,
    REPO,
    SHARED_SAMPLE,
    VIDEOS,
    assert_no_traceback,
    assert_same_output,
    killed_and_resumed,
    run_cli,
)
from kinds import KINDS
from tiny_onnx import rtmlib_signer, rtmlib_wholebody, tiny_models

PX, SCORE = 0.01, 1e-4  # the bounds: pixels, scores
KIND = {k.id: k for k in KINDS}


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not PHX_FRAMES.is_dir() or not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory.mktemp("models"))


def wholebody(models: dict[str, Path], detector: str = "detector") -> list[str]:
    return ["--estimator", "wholebody", "--detector", models[detector], "--pose-model",
            models["pose"]]


def ok(proc: subprocess.CompletedProcess, what: str) -> None:
    assert_no_traceback(proc)
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def refused(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, no traceback, and the message names every word."""
    assert_no_traceback(proc)
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)
    return proc.stderr


# --- the pipeline on frames ----------------------------------------------------------------------
@pytest.mark.parametrize("detector", ["detector", "detector_raw"])
def test_models_equal_rtmlib_on_every_frame_of_the_shared_sample(models, detector):
    """YOLOX with NMS inside [1, N, 5] and the raw grid layout: the same boxes, persons, and
    keypoints as rtmlib on 143 real frames; the frames give different keypoints and counts."""
    from phoenix_keypoints.extract.families.wholebody.runner import WholebodyModels

    det, pose = rtmlib_wholebody(models, detector)
    ours = WholebodyModels(models[detector], models["pose"])
    files = sorted(PHX_FRAMES.glob("*/*/*.png"))
    dxy = dscore = 0.0
    persons, xs = [], []
    for f in files:
        bgr = cv2.imread(str(f))
        ref, n = rtmlib_signer(det, pose, bgr)
        posed = ours(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
        got, k = posed.row.reshape(133, 3), posed.persons
        assert got.dtype == np.float32 and k == n, (f, k, n)
        dxy = max(dxy, float(np.abs(got[:, :2] - ref[:, :2]).max()))
        dscore = max(dscore, float(np.abs(got[:, 2] - ref[:, 2]).max()))
        persons.append(n)
        xs.append(got[:, 0])
    print(f"{detector}: {len(files)} frames, max |dx,dy| {dxy:.2e} px, max |dscore| {dscore:.2e}")
    assert dxy <= PX and dscore <= SCORE
    assert len(set(persons)) > 1, "the person count should vary between frames"
    assert len({tuple(np.round(x, 1)) for x in xs}) > len(files) // 2, "keypoints hardly vary"
    if detector == "detector_raw":
        assert 0 in persons, "a frame without a box (the whole frame's path) should be covered"


# --- real runs against rtmlib --------------------------------------------------------------------
def reference_bgr(root: Path, image: str) -> np.ndarray:
    """The frame a row names, read without the tool: a file, an archive member, a video frame."""
    path, _, where = image.partition("#")
    if where.startswith("archive="):
        with tarfile.open(root) as tf:
            member = next(m for m in tf.getmembers() if m.name.endswith("/" + path) or m.name == path)
            data = tf.extractfile(member).read()
        return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if where.startswith("frame="):
        import av

        n = int(where.removeprefix("frame="))
        with av.open(str(root / path)) as c:
            rgb = next(f for i, f in enumerate(c.decode(video=0)) if i == n).to_ndarray(format="rgb24")
        return cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    return cv2.imread(str(root / path))


def compare_with_rtmlib(out: Path, root: Path, models: dict[str, Path], detector: str) -> tuple:
    """Every row of a run against rtmlib on the frame it names: (max px, max score diff, rows)."""
    det, pose = rtmlib_wholebody(models, detector)
    t = pq.read_table(out / "keypoints.parquet")
    dxy = dscore = 0.0
    for row in t.select(["image", "status", "wholebody", "persons"]).to_pylist():
        assert row["status"] == "ok", row
        ref, n = rtmlib_signer(det, pose, reference_bgr(root, row["image"]))
        got = np.asarray(row["wholebody"], np.float32).reshape(133, 3)
        assert row["persons"] == n, (row["image"], row["persons"], n)
        dxy = max(dxy, float(np.abs(got[:, :2] - ref[:, :2]).max()))
        dscore = max(dscore, float(np.abs(got[:, 2] - ref[:, 2]).max()))
    return dxy, dscore, t.num_rows


@pytest.mark.parametrize("kind,detector", [("phoenix-T", "detector"), ("phoenix-T", "detector_raw"),
                                           ("archive-top.tar.gz", "detector"),
                                           ("videos", "detector"), ("manifest", "detector_raw")])
def test_run_equals_rtmlib(models, kind, detector, tmp_path):
    """`run --estimator wholebody` on each input kind: every row equals rtmlib's on its frame."""
    built = KIND[kind].build(tmp_path / "in")
    out = tmp_path / "out"
    ok(run_cli(["run", KIND[kind].flag, built, "--out", out, *wholebody(models, detector)]), "run")
    root = built.parent if KIND[kind].flag == "--manifest" else built
    dxy, dscore, rows = compare_with_rtmlib(out, root, models, detector)
    print(f"{kind} ({detector}): {rows} rows, max |dx,dy| {dxy:.2e} px, max |dscore| {dscore:.2e}")
    assert rows and dxy <= PX and dscore <= SCORE


# --- the run's records and outputs ---------------------------------------------------------------
@pytest.fixture(scope="module")
def wb_run(models, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wb") / "run"
    ok(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, *wholebody(models)]), "run")
    return out


def test_records_estimator_models_and_point_order(wb_run, models):
    import onnxruntime

    from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata

    info = json.loads((wb_run / "run.json").read_text())["options"]
    assert info["estimator"] == "wholebody"
    meta = read_file_metadata(wb_run / "keypoints.parquet")
    for record in (info["wholebody"], meta["wholebody"]):
        assert record["onnxruntime"] == onnxruntime.__version__
        det = record["detector"]
        assert det["size"] == models["detector"].stat().st_size
        assert det["input_size"] == {"height": 96, "width": 128}
        assert record["pose_model"]["input_size"] == {"height": 64, "width": 48}
        assert len(det["sha256"]) == 64
    assert meta["estimator"] == "wholebody"
    layout = meta["layout"]["wholebody"]
    assert layout["values"] == ["x", "y", "score"] and layout["points"] == 133
    assert layout["parts"] == {"body": [0, 17], "feet": [17, 23], "face": [23, 91],
                               "left_hand": [91, 112], "right_hand": [112, 133]}
    assert "pixels" in layout["coordinates"]
    schema = pq.read_schema(wb_run / "keypoints.parquet")
    assert "wholebody" in schema.names and "persons" in schema.names and "pose" not in schema.names


def test_tensors_are_frames_by_133_by_3_with_a_score_mask(wb_run):
    t = pq.read_table(wb_run / "keypoints.parquet")
    meta = json.loads((wb_run / "tensors" / "points.json").read_text())
    assert meta["channels"] == ["x", "y", "score"] and meta["num_points"] == 133
    for split in ("train", "dev", "test"):
        arr = np.load(wb_run / "tensors" / f"{split}.npy")
        mask = np.load(wb_run / "tensors" / f"{split}.mask.npy")
        rows = t.filter(t["split"].to_numpy(zero_copy_only=False) == split)
        want = np.asarray(rows["wholebody"].to_pylist(), np.float32).reshape(-1, 133, 3)
        assert arr.shape == (rows.num_rows, 133, 3) and arr.dtype == np.float32
        np.testing.assert_array_equal(arr, want)
        np.testing.assert_array_equal(mask, want[:, :, 2] >= meta["score_threshold"])


def test_report_show_diff_verify_and_status_work(wb_run, shared_run, tmp_path):
    for cmd in (["status", "--out", wb_run], ["verify", "--out", wb_run],
                ["report", "--out", wb_run], ["diff", wb_run, wb_run]):
        ok(run_cli(cmd), cmd[0])
    other = run_cli(["diff", shared_run, wb_run])  # two estimators: they differ (1), not bad input
    assert other.returncode == 1 and "made by different estimators" in other.stdout, other.stderr
    assert "Traceback" not in other.stderr
    videos = pq.read_table(wb_run / "report" / "videos.parquet")
    assert {"left_hand", "right_hand", "face"} <= {c.removesuffix("_found") for c in videos.column_names}
    video = pq.read_table(wb_run / "keypoints.parquet", columns=["video"])["video"][0].as_py()
    ok(run_cli(["show", "--out", wb_run, "--video", video, "--to", tmp_path / "sheet.png"]), "show")
    assert (tmp_path / "sheet.png").stat().st_size > 0


def test_diff_names_the_persons_column_not_the_status(wb_run, tmp_path):
    """Two whole-body files that differ only in one frame's `persons` (was: "status differs")."""
    import pyarrow as pa

    t = pq.read_table(wb_run / "keypoints.parquet")
    persons = t["persons"].to_pylist()
    persons[0] = (persons[0] or 0) + 1
    other = t.set_column(t.schema.get_field_index("persons"), t.schema.field("persons"),
                         pa.array(persons, pa.int32()))
    pq.write_table(other, tmp_path / "other.parquet")
    proc = run_cli(["diff", wb_run / "keypoints.parquet", tmp_path / "other.parquet"])
    assert proc.returncode == 1, proc.stderr
    assert "persons differs in 1 frame(s)" in proc.stdout and "status" not in proc.stdout, proc.stdout


def test_the_pose_install_hint_names_the_pins_of_this_python(monkeypatch):
    """On 3.13 constraints.txt does not resolve (mediapipe, numpy < 2): the hint names
    constraints-py313.txt there, constraints.txt below."""
    from phoenix_keypoints.extract.outputs.export import pose_install_hint

    assert "-c constraints.txt " in pose_install_hint()
    monkeypatch.setattr(sys, "version_info", (3, 13, 1, "final", 0))
    assert "-c constraints-py313.txt " in pose_install_hint()


def test_holistic_only_exports_refuse_a_wholebody_run(wb_run, tmp_path):
    for fmt in ("legacy-pkl", "legacy-npz", "islr"):
        refused(run_cli(["export", "--out", wb_run, "--format", fmt, "--to", tmp_path / fmt]),
                "wholebody", "Holistic")
    refused(run_cli(["tensors", "--out", wb_run, "--preset", "compact-187"]), "wholebody")


def test_twostream_and_unisign_pkls_read_as_their_loaders_read_them(wb_run, shared_run, tmp_path):
    """--format twostream-pkl: TwoStream-SLR's keypoint_file, {split/video: {"keypoints": [T,133,3]}}
    (its Dataset.load_keypoints takes all_keypoints["keypoints"][:, indices]); --format unisign-pkl:
    Uni-Sign's <split>/<video>.pkl, {"keypoints": [[1,133,2]] / (W, H), "scores": [[1,133]]} (its
    load_pose reads person 0 of each frame). Both equal to the run's values where a point is found
    (score >= 0.3), zeros with score 0 where not (tests/test_absent_points.py)."""
    import pickle

    ok(run_cli(["export", "--out", wb_run, "--format", "twostream-pkl", "--to", tmp_path / "ts.pkl"]),
       "twostream-pkl")
    ok(run_cli(["export", "--out", wb_run, "--format", "unisign-pkl", "--to", tmp_path / "uni"]),
       "unisign-pkl")
    t = pq.read_table(wb_run / "keypoints.parquet", columns=["split", "video", "frame", "width",
                                                             "height", "wholebody"])
    two = pickle.loads((tmp_path / "ts.pkl").read_bytes())
    videos = sorted(set(zip(t["split"].to_pylist(), t["video"].to_pylist(), strict=True)))
    assert sorted(two) == [f"{s}/{v}" for s, v in videos]
    for split, video in videos:
        rows = t.filter((t["split"].to_numpy(zero_copy_only=False) == split)
                        & (t["video"].to_numpy(zero_copy_only=False) == video))
        ref = np.array(rows["wholebody"].to_pylist(), np.float32).reshape(-1, 133, 3)
        ref = np.where(ref[..., 2:] >= 0.3, ref, 0)  # a point not found: zeros, as a frame not read
        got = two[f"{split}/{video}"]["keypoints"]
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_array_equal(got[:, list(range(91, 133))], ref[:, 91:133])  # its 'hand'
        uni = pickle.loads((tmp_path / "uni" / split / f"{video}.pkl").read_bytes())
        assert len(uni["scores"]) == len(uni["keypoints"]) == len(ref)
        assert uni["keypoints"][0].shape == (1, 133, 2) and uni["scores"][0].shape == (1, 133)
        size = np.stack([rows["width"].to_numpy(), rows["height"].to_numpy()], 1)[:, None, :]
        xy = np.concatenate(uni["keypoints"])[:, :, :2] * size
        np.testing.assert_allclose(xy, ref[:, :, :2], atol=1e-3)  # pixels: float32 x / W x W
        np.testing.assert_array_equal(np.concatenate(uni["scores"]), ref[:, :, 2])
    refused(run_cli(["export", "--out", shared_run, "--format", "unisign-pkl", "--to",
                     tmp_path / "h"]), "holistic run", "--estimator wholebody")
    refused(run_cli(["export", "--out", wb_run, "--format", "twostream-pkl", "--to", tmp_path]),
            "is a folder")


def test_unisign_flat_folder_is_the_one_its_csl_daily_config_reads(wb_run, tmp_path):
    """Uni-Sign's S2T_Dataset reads CSL_Daily from pose_dirs[dataset] for every phase (no phase
    joined): --flat writes <to>/<video>.pkl for every split, the same bytes as the per-split files
    (a run's names are unique across splits); --flat is for unisign-pkl only."""
    ok(run_cli(["export", "--out", wb_run, "--format", "unisign-pkl", "--to", tmp_path / "split"]),
       "unisign-pkl")
    ok(run_cli(["export", "--out", wb_run, "--format", "unisign-pkl", "--to", tmp_path / "flat",
                "--flat"]), "unisign-pkl --flat")
    per_split = sorted((tmp_path / "split").glob("*/*.pkl"))
    flat = sorted((tmp_path / "flat").iterdir())
    assert len({p.parent.name for p in per_split}) > 1 and all(p.is_file() for p in flat)
    assert sorted(p.name for p in flat) == sorted(p.name for p in per_split)
    for p in per_split:
        assert (tmp_path / "flat" / p.name).read_bytes() == p.read_bytes(), p
    refused(run_cli(["export", "--out", wb_run, "--format", "twostream-pkl", "--to",
                     tmp_path / "t.pkl", "--flat"]), "--flat applies to --format unisign-pkl")


def test_pose_export_has_a_cocowholebody_header_pose_format_reads(wb_run, tmp_path):
    pytest.importorskip("pose_format")
    from pose_format import Pose

    ok(run_cli(["export", "--out", wb_run, "--format", "pose", "--to", tmp_path / "poses"]), "export")
    files = sorted((tmp_path / "poses").rglob("*.pose"))
    assert files
    pose = Pose.read(files[0].read_bytes())
    names = [c.name for c in pose.header.components]
    assert sum(len(c.points) for c in pose.header.components) == 133, names
    assert pose.body.data.shape[1:] == (1, 133, 2)


# --- resume, refusals ----------------------------------------------------------------------------
@pytest.mark.slow
def test_resume_after_sigkill_equals_the_uninterrupted_run(models, tmp_path):
    killed_and_resumed(["--dataset", SHARED_SAMPLE, *wholebody(models), "--workers-per-gpu", "1",
                        "--chunk-frames", "30"], tmp_path)


def test_slurm_shards_run_the_wholebody_estimator(models, wb_run, tmp_path):
    """A planned array's shards build the whole-body models from run.json: the same keypoints."""
    out = tmp_path / "array"
    ok(run_cli(["slurm", "--dataset", SHARED_SAMPLE, "--out", out, "--num-shards", "2",
                *wholebody(models)]), "slurm")
    for shard in ("0", "1"):
        ok(run_cli(["run", "--out", out, "--num-shards", "2", "--shard-index", shard]), shard)
    assert pq.read_table(out / "keypoints.parquet").select(["wholebody", "persons"]).equals(
        pq.read_table(wb_run / "keypoints.parquet").select(["wholebody", "persons"]))


def test_another_estimator_is_refused_naming_both(models, wb_run, tmp_path):
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", wb_run, "--estimator", "holistic"]),
            "estimator (wholebody when planned, holistic asked)")
    holistic = tmp_path / "h"
    ok(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", holistic, "--videos", "signer_demo-1"]),
       "holistic run")
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", holistic, "--videos",
                     "signer_demo-1", *wholebody(models)]),
            "estimator (holistic when planned, wholebody asked)")


def test_other_model_files_are_refused_and_verify_names_a_changed_one(models, tmp_path):
    out = tmp_path / "run"
    args = ["run", "--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1"]
    ok(run_cli([*args, *wholebody(models)]), "run")
    ok(run_cli(args), "resume with the recorded models")
    other = tiny_models(tmp_path / "other")  # the same bytes: accepted under another path
    ok(run_cli([*args, *wholebody(other)]), "the same models elsewhere")
    from tiny_onnx import pose_simcc

    changed = pose_simcc(tmp_path / "changed.onnx", seed=9)
    refused(run_cli([*args, "--estimator", "wholebody", "--detector", models["detector"],
                     "--pose-model", changed]), "--pose-model", "when planned")
    copy = tmp_path / "copy"
    copy.mkdir()
    det = copy / "det.onnx"
    det.write_bytes(models["detector"].read_bytes())
    run2 = tmp_path / "run2"
    ok(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", run2, "--videos", "signer_demo-1",
                "--estimator", "wholebody", "--detector", det, "--pose-model", models["pose"]]),
       "run2")
    det.write_bytes(models["detector_raw"].read_bytes())  # replaced in place
    proc = run_cli(["verify", "--out", run2])
    assert_no_traceback(proc)
    assert proc.returncode == 1 and str(det) in proc.stdout + proc.stderr, proc.stderr
    for part in [run2 / "keypoints.parquet", *(run2 / "parts").glob("chunk-*.parquet")]:
        part.unlink()  # work left: the resume needs the model
    refused(run_cli(["run", "--out", run2]), str(det), "not the model this run was made with")


def test_the_model_flags_alone_choose_the_wholebody_estimator(models, tmp_path):
    out = tmp_path / "run"
    ok(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1",
                "--detector", models["detector"], "--pose-model", models["pose"]]), "run")
    assert json.loads((out / "run.json").read_text())["options"]["estimator"] == "wholebody"
    assert "wholebody" in pq.read_schema(out / "keypoints.parquet").names


def test_a_resume_follows_model_files_that_moved(tmp_path):
    """The model files moved (their old folder gone) and the resume names them where they are
    now: it goes on, and run.json, keypoints.parquet's metadata and `verify` use the new paths;
    run.json keeps each move (`model_moves`), as it keeps a moved corpus's."""
    old = tiny_models(tmp_path / "old")
    out = tmp_path / "run"
    args = ["run", "--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1"]
    ok(run_cli([*args, *wholebody(old)]), "run")
    (tmp_path / "old").rename(tmp_path / "new")
    new = {k: tmp_path / "new" / p.name for k, p in old.items()}
    for part in [out / "keypoints.parquet", *(out / "parts").glob("chunk-*.parquet")]:
        part.unlink()  # work left: the resume needs the models
    proc = run_cli([*args, *wholebody(new)])
    ok(proc, "resume from the moved models")
    assert "the model file(s) moved" in proc.stderr, proc.stderr
    record = json.loads((out / "run.json").read_text())
    meta = json.loads(pq.read_schema(out / "keypoints.parquet").metadata[b"phoenix_keypoints.file"])
    for key, flag in (("detector", "detector"), ("pose_model", "pose")):
        assert record["options"]["wholebody"][key]["path"] == str(new[flag].resolve())
        assert meta["wholebody"][key]["path"] == str(new[flag].resolve())
    assert record["model_moves"] == [
        f"--detector {old['detector'].resolve()} -> {new['detector'].resolve()}",
        f"--pose-model {old['pose'].resolve()} -> {new['pose'].resolve()}"]
    ok(run_cli(["verify", "--out", out]), "verify")


@pytest.mark.parametrize("case", ["missing", "not-onnx", "swapped", "one-only", "none", "holistic"])
def test_bad_model_files_exit_2_naming_the_file(models, case, tmp_path):
    out = tmp_path / "run"
    base = ["run", "--dataset", SHARED_SAMPLE, "--out", out]
    junk = tmp_path / "junk.onnx"
    junk.write_text("not a model")
    args, words = {
        "missing": (["--detector", tmp_path / "nope.onnx", "--pose-model", models["pose"]],
                    [str(tmp_path / "nope.onnx"), "no such file"]),
        "not-onnx": (["--detector", models["detector"], "--pose-model", junk],
                     [str(junk), "not an ONNX model"]),
        "swapped": (["--detector", models["pose"], "--pose-model", models["detector"]],
                    ["--detector", str(models["pose"]), "a SimCC pose model"]),
        "one-only": (["--detector", models["detector"]], ["--pose-model"]),
        "none": ([], ["--detector", "--pose-model"]),
        "holistic": (["--estimator", "holistic", "--detector", models["detector"], "--pose-model",
                      models["pose"]], ["--estimator wholebody"]),
    }[case]
    estimator = [] if case == "holistic" else ["--estimator", "wholebody"]
    refused(run_cli([*base, *estimator, *args]), *words)
    assert not (out / "run.json").exists()


def test_each_library_is_imported_only_where_its_estimator_runs(models):
    """A whole-body worker never imports mediapipe; a Holistic one never imports onnxruntime
    (a later issue makes mediapipe optional where it cannot be installed)."""
    code = """
import sys, numpy as np
from phoenix_keypoints.extract.keypoints.estimator import open_estimator
from phoenix_keypoints.extract.families.wholebody.runner import record
est = open_estimator({"estimator": "wholebody", **record(sys.argv[1], sys.argv[2])})
est.process(np.zeros((64, 48, 3), np.uint8))
import phoenix_keypoints.jobs.schedule.worker, phoenix_keypoints.jobs.cli
assert "mediapipe" not in sys.modules, "mediapipe imported by a whole-body worker"
"""
    subprocess.run([sys.executable, "-c", code, models["detector"], models["pose"]], check=True,
                   cwd=REPO)
    code = """
import sys, numpy as np
from phoenix_keypoints.extract.keypoints.estimator import open_estimator
est = open_estimator({})
est.process(np.zeros((64, 48, 3), np.uint8))
import phoenix_keypoints.jobs.schedule.worker, phoenix_keypoints.jobs.run.merge
import phoenix_keypoints.jobs.cli
assert "onnxruntime" not in sys.modules, "onnxruntime imported by a Holistic worker"
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_a_worker_writes_its_rows_without_importing_pandas(models, tmp_path):
    """pyarrow imports pandas (~0.3 s of CPU) at a process's first pa.array() unless told there is
    none: a worker says so once (skip_pandas_probe), then reads real frames, runs the models and
    writes a part without it, and pandas still imports for whoever asks for it afterwards."""
    code = """
import sys
from pathlib import Path
import pyarrow.parquet as pq
from phoenix_keypoints.extract import sources
from phoenix_keypoints.extract.families.wholebody.runner import record
from phoenix_keypoints.extract.keypoints.estimator import open_estimator
from phoenix_keypoints.extract.keypoints.video_rows import Block, extract_video
from phoenix_keypoints.extract.sources.base import Ref
from phoenix_keypoints.jobs.schedule.worker import skip_pandas_probe

det, pose, root, folder, dest = sys.argv[1:]
skip_pandas_probe()
est = open_estimator({"estimator": "wholebody", **record(det, pose)}, num_threads=1)
names = tuple(sorted(p.name for p in (Path(root) / folder).glob("*.png"))[:4])
out = Block(declaration=est.declaration)
frames = sources.get("folder").frames(Path(root), Ref("folder", folder, names))
extract_video(est, "train", "v", frames, len(names), out)
pq.write_table(out.to_table(), dest)
assert "pandas" not in sys.modules, "pyarrow imported pandas in a worker"
back = pq.read_table(dest).to_pandas()
assert "pandas" in sys.modules and list(back["status"]) == ["ok"] * 4, back["status"]
"""
    subprocess.run([sys.executable, "-c", code, models["detector"], models["pose"], PHX_FRAMES,
                    "train/signer_demo-1", tmp_path / "part.parquet"], check=True, cwd=REPO)



# --- batches and devices (issue 33) ----------------------------------------------------------------
# how a CPU worker computes (extract/keypoints/execution.py): its calls of any size
CPU_RECORD = {"device": "cpu", "gpu": "", "provider": "CPUExecutionProvider", "provider_options": {},
              "batch_shape": None}

@pytest.fixture(scope="module")
def batch_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny models with a dynamic batch axis: a batch is one session call."""
    return tiny_models(tmp_path_factory.mktemp("models-batch"), dynamic=True)


def _wholebody_column(out: Path) -> tuple[list, list, list]:
    t = pq.read_table(out / "keypoints.parquet", columns=["video", "wholebody", "persons"])
    return t["video"].to_pylist(), t["wholebody"].to_pylist(), t["persons"].to_pylist()


@pytest.mark.parametrize("kind", ["one-frame-folder", "one-clip", "archive-top.tar.gz"])
def test_batch_16_equals_batch_1_on_a_frame_folder_a_video_and_an_archive(batch_models, kind,
                                                                          tmp_path):
    """Frames through the models 16 per call give every frame exactly what it gets alone; the
    batch size is how the run ran (run.json), not what it wrote, so a resume may change it."""
    built = KIND[kind].build(tmp_path / "in")
    runs = {}
    for size in (16, 1):
        out = runs[size] = tmp_path / f"b{size}"
        proc = run_cli(["run", KIND[kind].flag, built, "--out", out, *wholebody(batch_models),
                        "--batch-size", size, "--workers", 1])
        ok(proc, f"batch {size}")
        assert f"batches of {size} frames: detector in one call, pose model in one call" in proc.stderr
    assert_same_output(runs[16], runs[1])
    runtime = json.loads((runs[16] / "run.json").read_text())["extraction"]["runtime"]
    assert runtime == {"0": {"batch_size": 16, "device": "auto",
                             "providers": ["CPUExecutionProvider"], "execution": CPU_RECORD}}
    for part in [*(runs[16] / "parts").glob("*.parquet"), runs[16] / "keypoints.parquet"]:
        part.unlink()  # so the resume with another batch extracts again
    ok(run_cli(["run", "--out", runs[16], "--batch-size", 3]), "the same run with another batch")
    assert_same_output(runs[16], runs[1])
    resumed = json.loads((runs[16] / "run.json").read_text())["extraction"]["runtime"]
    assert resumed and {w["batch_size"] for w in resumed.values()} == {3}  # each worker that began


def test_a_fixed_batch_model_runs_one_frame_per_call_with_the_same_output(models, batch_models,
                                                                          tmp_path):
    """A model exported with a batch axis of 1 is run once per frame of a batch, said at start;
    its rows equal those of the same functions with a dynamic axis."""
    built = KIND["one-clip"].build(tmp_path / "in")
    fixed, dynamic = tmp_path / "fixed", tmp_path / "dynamic"
    proc = run_cli(["run", "--dataset", built, "--out", fixed, *wholebody(models, "detector_raw"),
                    "--batch-size", 16, "--workers", 1])
    ok(proc, "fixed batch")
    assert "detector one by one (its batch axis is fixed at 1)" in proc.stderr
    ok(run_cli(["run", "--dataset", built, "--out", dynamic,
                *wholebody(batch_models, "detector_raw"), "--workers", 1]), "dynamic batch")
    assert _wholebody_column(fixed) == _wholebody_column(dynamic)


def test_models_batch_equals_one_frame_at_a_time_for_both_detector_layouts(models, batch_models):
    """In process, on varied frames and odd batch sizes: the batch path is the single path."""
    from phoenix_keypoints.extract.families.wholebody.runner import WholebodyModels

    rng = np.random.default_rng(5)
    frames = [rng.integers(0, 255, (210, 260, 3), np.uint8) for _ in range(23)]
    for det in ("detector", "detector_raw"):
        alone = [WholebodyModels(models[det], models["pose"])(f) for f in frames]
        for m in (WholebodyModels(batch_models[det], batch_models["pose"]),
                  WholebodyModels(models[det], models["pose"])):
            got = [r for i in range(0, len(frames), 7) for r in m.batch(frames[i:i + 7])]
            for a, b in zip(alone, got, strict=True):
                np.testing.assert_array_equal(a.row, b.row)
                assert a.persons == b.persons


def test_device_cuda_is_refused_without_the_cuda_provider(models, tmp_path):
    """This machine's onnxruntime is the CPU build: --device cuda says what to install."""
    out = tmp_path / "run"
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, *wholebody(models),
                     "--device", "cuda"]), "--device cuda", "onnxruntime-gpu", "phoenix-keypoints[gpu]")
    assert not (out / "run.json").exists()
    refused(run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, "--estimator", "holistic",
                     "--batch-size", 4]), "--batch-size", "--estimator wholebody")


def test_device_cuda_without_a_gpu_names_the_visible_ones(monkeypatch):
    """With the CUDA provider but no GPU to pin workers to, the refusal says which are visible."""
    import phoenix_keypoints.extract.families.wholebody.runner as wb
    from phoenix_keypoints.jobs.run.options import RunRequest
    from phoenix_keypoints.jobs.rundir.folder import RunError
    from phoenix_keypoints.jobs.runner import _refuse_device

    monkeypatch.setattr(wb, "cuda_provider", lambda: True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RunError, match="no GPU to pin workers to .visible: none"):
        _refuse_device(RunRequest(Path("x"), device="cuda"), "wholebody")
    _refuse_device(RunRequest(Path("x"), device="cuda", num_gpus=1), "wholebody")  # accepted


def test_auto_is_cpu_unless_the_cuda_provider_and_a_gpu_are_both_there(monkeypatch):
    """--device auto: CUDA on device 0 of the worker's own CUDA_VISIBLE_DEVICES where onnxruntime
    has it and the worker was given a GPU; the CPU otherwise (this machine: no CUDA provider)."""
    import phoenix_keypoints.extract.families.wholebody.runner as wb

    cuda = [("CUDAExecutionProvider", {"device_id": "0", **wb.CUDA_OPTIONS}), "CPUExecutionProvider"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert wb.providers("auto") == ["CPUExecutionProvider"]  # the CPU build, even with a GPU given
    with pytest.raises(wb.DeviceError, match="onnxruntime-gpu"):
        wb.providers("cuda")
    monkeypatch.setattr(wb, "cuda_provider", lambda: True)
    assert wb.providers("auto") == cuda == wb.providers("cuda")
    assert wb.providers("cpu") == ["CPUExecutionProvider"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert wb.providers("auto") == ["CPUExecutionProvider"]
    with pytest.raises(wb.DeviceError, match="given no GPU"):
        wb.providers("cuda")


def test_slurm_passes_batch_size_and_device_to_each_shard():
    """A shard's `run` gets the --batch-size and --device given to `slurm` (nothing when not)."""
    from phoenix_keypoints.jobs.cluster.slurm import SlurmOptions, worker_args

    assert worker_args(SlurmOptions()) == []
    assert worker_args(SlurmOptions(cpus_per_task=8, gpus_per_task=2, batch_size=16,
                                    device="cuda")) == [
        "--batch-size", "16", "--device", "cuda", "--num-gpus", "2", "--workers-per-gpu", "4"]


def test_auto_on_a_worker_given_a_gpu_runs_the_cpu_build_on_the_cpu(batch_models, tmp_path):
    """A real run whose worker is pinned to a GPU (--num-gpus 1) with the CPU build of onnxruntime:
    auto says the CPU at start, and run.json records the CPU provider for that worker."""
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", SHARED_SAMPLE, "--out", out, "--videos", "signer_demo-1",
                    *wholebody(batch_models), "--num-gpus", 1, "--workers-per-gpu", 1],
                   env={"CUDA_VISIBLE_DEVICES": "0"})
    ok(proc, "run")
    assert "GPU(s) 0" in proc.stderr and "on the CPU (--device auto)" in proc.stderr
    runtime = json.loads((out / "run.json").read_text())["extraction"]["runtime"]
    assert runtime == {"0": {"batch_size": 8, "device": "auto", "providers": ["CPUExecutionProvider"],
                             "execution": CPU_RECORD}}


def test_prefetch_keeps_order_bounds_reading_ahead_and_passes_errors_on():
    """The read-ahead thread: frames in order, at most `depth` read beyond what was taken, and a
    reader's exception raised where the frames are taken."""
    import itertools
    import time

    from phoenix_keypoints.extract.keypoints.video_rows import prefetched

    read = []

    def frames():
        for i in itertools.count():
            read.append(i)
            yield i

    it = prefetched(frames(), 3)
    assert [next(it) for _ in range(5)] == list(range(5))
    time.sleep(0.3)
    assert len(read) <= 5 + 3 + 1  # the queue's 3, and one in the reader's hand
    it.close()

    def broken():
        yield 1
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        list(prefetched(broken(), 2))


@pytest.mark.parametrize("extra", [["--batch-size", "4"], ["--batch-size", "1"],
                                   ["--det-every", "2", "--batch-size", "2"]])
def test_a_frame_too_thin_for_the_detector_fails_alone(batch_models, extra, tmp_path):
    """A 1x3000 and a 3000x1 frame letterbox to 0 px on one side of the detector's input (rtmlib's
    resize asserts there): each gets the family's error status and a note naming its size, and
    the frames after them, in the same batch, keep exactly what they get without them (before: the
    worker died three times and the whole video failed). First in the video, so that each is due
    to detect in the video mode too."""
    shot = sorted((PHX_FRAMES / "train" / "signer_demo-1").iterdir())[:2]
    clip, plain = tmp_path / "clip", tmp_path / "plain"
    clip.mkdir(), plain.mkdir()
    for name, frame in (("0002.png", shot[0]), ("0003.png", shot[1])):
        shutil.copy(frame, clip / name), shutil.copy(frame, plain / name)
    grey = cv2.imread(str(shot[0]))[:1, :1]
    cv2.imwrite(str(clip / "0000.png"), np.repeat(grey, 3000, axis=1))  # 1 high, 3000 wide
    cv2.imwrite(str(clip / "0001.png"), np.repeat(grey, 3000, axis=0))  # 3000 high, 1 wide
    for folder in (clip, plain):
        proc = run_cli(["run", "--dataset", folder, "--out", tmp_path / f"out-{folder.name}",
                        *wholebody(batch_models), "--workers", 1, *extra])
        assert_no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
    rows = pq.read_table(tmp_path / "out-clip" / "keypoints.parquet").to_pylist()
    alone = pq.read_table(tmp_path / "out-plain" / "keypoints.parquet").to_pylist()
    assert [r["status"] for r in rows] == ["wholebody_error", "wholebody_error", "ok", "ok"]
    assert "3000x1 px" in rows[0]["note"] and "1x3000 px" in rows[1]["note"], rows[:2]
    assert "too thin" in rows[0]["note"]
    for row, same in zip(rows[2:], alone, strict=True):
        assert (row["wholebody"], row["persons"]) == (same["wholebody"], same["persons"])
