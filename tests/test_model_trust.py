"""A model file is untrusted input (issue 37, item 3): what it may make onnxruntime read, what it
may answer, how it may fail, on real runs with crafted ONNX files (tests/tiny_onnx.py).

Each case is a file a careful user could be handed: external data outside the model's folder, a
pose model passed as the detector, outputs of NaN / Inf / 1e30, a model that fails when run, a FIFO
or /dev/zero as the model, names holding ESC sequences.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import assert_no_traceback, interleaved_frames, run_cli
from tiny_onnx import (
    failing,
    poisoned,
    renamed,
    tiny_models,
    with_external_data,
    with_hidden_external,
)

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def one_video(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of frames (`--dataset FOLDER`): hopper-1's and astronaut-1's frames in turn, so
    frames a poisoned model answers nonsense on alternate with frames it answers well."""
    return interleaved_frames(sample_root, tmp_path_factory.mktemp("one") / "frames")


def wb(det: Path, pose: Path) -> list:
    return ["--estimator", "wholebody", "--detector", det, "--pose-model", pose, "--workers", "1"]


def refused(proc, *words: str) -> str:
    assert_no_traceback(proc)
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)
    return proc.stderr


# --- external data --------------------------------------------------------------------------------
def _external_case(case: str, models: dict[str, Path], tmp: Path) -> tuple[Path, str]:
    """A detector whose external data is the case's; (its path, the words the refusal says)."""
    folder = tmp / "model" / "inner"
    folder.mkdir(parents=True)
    det = folder / "det.onnx"
    outside = tmp / "outside.bin"
    if case == "dotdot":
        with_external_data(models["detector"], det, "../../outside.bin", outside)
        return det, "climbs out of the model's folder"
    if case == "absolute":
        with_external_data(models["detector"], det, str(outside), outside)
        return det, "is an absolute path"
    if case in ("link-out", "link-in"):
        target = outside if case == "link-out" else folder / "real.bin"
        with_external_data(models["detector"], det, "w.bin", target)
        os.symlink(target, folder / "w.bin")
        return det, "goes through a link"
    if case in ("in-a-constant-node", "in-a-subgraph"):
        outside.write_bytes(b"\0" * 4)
        where = {"in-a-constant-node": "constant", "in-a-subgraph": "subgraph"}[case]
        with_hidden_external(models["detector"], det, "../../outside.bin", where)
        return det, "climbs out of the model's folder"
    with_external_data(models["detector"], det, "w.bin", folder / "x.bin")
    os.mkfifo(folder / "w.bin")
    return det, "is a FIFO"


@pytest.mark.parametrize("case", ["dotdot", "absolute", "link-out", "link-in", "fifo",
                                  "in-a-constant-node", "in-a-subgraph"])
def test_external_data_leaving_the_model_folder_is_refused_by_the_tool_itself(
        models, one_video, case, tmp_path):
    det, words = _external_case(case, models, tmp_path)
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", one_video, "--out", out, *wb(det, models["pose"])],
                   timeout=120)
    refused(proc, str(det), "external data location", words)
    assert not (out / "run.json").exists()


def test_external_data_is_part_of_the_model_record_verify_and_resume(models, one_video, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    det = with_external_data(models["detector"], folder / "det.onnx", "w.bin")
    out = tmp_path / "run"
    args = ["run", "--dataset", one_video, "--out", out, *wb(det, models["pose"])]
    proc = run_cli(args)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads((out / "run.json").read_text())["options"]["wholebody"]["detector"]
    data = folder / "w.bin"
    assert rec["external_data"] == [{"location": "w.bin", "size": data.stat().st_size,
                                     "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}]
    part = next((out / "parts").glob("chunk-*.parquet"))
    assert b'"external_data"' in pq.read_metadata(part).metadata[b"phoenix_keypoints"]
    assert b'"external_data"' in pq.read_metadata(out / "keypoints.parquet").metadata[
        b"phoenix_keypoints.file"]
    assert run_cli(["verify", "--out", out]).returncode == 0
    weights = np.frombuffer(data.read_bytes(), np.float32).copy()
    data.write_bytes((weights * 1.5).tobytes())  # other weights, same size, same model file
    proc = run_cli(["verify", "--out", out])
    assert_no_traceback(proc)
    assert proc.returncode == 1 and "w.bin" in proc.stderr, proc.stderr
    refused(run_cli(args), "--detector", "other external data")
    for part in [out / "keypoints.parquet", *(out / "parts").glob("chunk-*.parquet")]:
        part.unlink()  # work left: the resume needs the model as recorded
    refused(run_cli(["run", "--out", out]), "w.bin", "not the file this run was made with")


@pytest.mark.slow
def test_a_model_given_as_a_link_is_recorded_as_given_and_checked_where_onnxruntime_reads(
        models, one_video, tmp_path):
    """Issue 46 item 6: `here/det.onnx` is a link to `real/det.onnx`; onnxruntime reads the
    external data beside the link (`here/w.bin`), the target's folder holds other weights. The
    record's path is the one given (the target beside it, as `resolved`), its external data is
    `here/w.bin`'s, and verify, a resume and a resume naming another link check those files."""
    root = tmp_path.resolve()
    real, here, there = root / "real", root / "here", root / "there"
    for folder in (real, here, there):
        folder.mkdir()
    det = with_external_data(models["detector"], real / "det.onnx", "w.bin")
    weights = np.frombuffer((real / "w.bin").read_bytes(), np.float32).copy()
    for folder in (here, there):
        (folder / "w.bin").write_bytes(weights.tobytes())
        os.symlink(det, folder / "det.onnx")
    (real / "w.bin").write_bytes((weights * 1.5).tobytes())  # the target's own: other weights
    out = root / "run"
    proc = run_cli(["run", "--dataset", one_video, "--out", out, *wb(here / "det.onnx", models["pose"])])
    assert proc.returncode == 0, proc.stderr
    verified = run_cli(["verify", "--out", out])
    assert verified.returncode == 0, verified.stdout + verified.stderr  # it said: the model changed
    rec = json.loads((out / "run.json").read_text())["options"]["wholebody"]["detector"]
    assert (rec["path"], rec.get("resolved")) == (str(here / "det.onnx"), str(det)), rec
    assert rec["external_data"][0]["sha256"] == hashlib.sha256((here / "w.bin").read_bytes()).hexdigest()
    for part in [out / "keypoints.parquet", *(out / "parts").glob("chunk-*.parquet")]:
        part.unlink()  # work left: a resume checks the models first
    resumed = run_cli(["run", "--out", out, *wb(there / "det.onnx", models["pose"])])
    assert resumed.returncode == 0, resumed.stderr
    assert f"{here / 'det.onnx'} -> {there / 'det.onnx'}" in resumed.stderr + resumed.stdout
    rec = json.loads((out / "run.json").read_text())["options"]["wholebody"]["detector"]
    assert (rec["path"], rec["resolved"]) == (str(there / "det.onnx"), str(det)), rec
    assert run_cli(["verify", "--out", out]).returncode == 0
    refused(run_cli(["run", "--out", out, *wb(det, models["pose"])]), "--detector",
            "other external data")
    (there / "w.bin").write_bytes((weights * 2).tobytes())
    changed = run_cli(["verify", "--out", out])
    assert changed.returncode == 1 and str(there / "det.onnx") in changed.stderr, changed.stderr


# --- layout ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("swap", ["pose-as-detector", "detector-as-pose"])
def test_a_model_passed_as_the_other_is_refused_naming_what_it_is(models, one_video, swap,
                                                                  tmp_path):
    from phoenix_keypoints import RunRefused, extract_keypoints, run_job

    if swap == "pose-as-detector":
        det, pose, flag, what = models["pose"], models["pose"], "--detector", "a SimCC pose model"
    else:
        det, pose, flag, what = (models["detector"], models["detector"], "--pose-model",
                                 "a YOLOX person detector")
    out = tmp_path / "run"
    refused(run_cli(["run", "--dataset", one_video, "--out", out, *wb(det, pose)]),
            f"{flag} {det if flag == '--detector' else pose}", what)
    assert not (out / "run.json").exists()
    with pytest.raises(RunRefused, match=what):
        run_job(one_video, tmp_path / "api", workers=1, estimator="wholebody", detector=det,
                pose_model=pose)
    with pytest.raises(ModelFileError, match=what):
        extract_keypoints(np.zeros((2, 64, 48, 3), np.uint8), estimator="wholebody",
                          detector=det, pose_model=pose)


# --- outputs per frame ----------------------------------------------------------------------------
POISONS = {  # (model, output, added, above: frames whose model input's mean exceeds it, status)
    "nan-box": ("detector", "dets", [np.nan] * 4 + [0], 105, "bad_detector_output"),
    "inf-box": ("detector", "dets", [np.inf] * 4 + [0], 105, "bad_detector_output"),
    "1e30-box": ("detector", "dets", [1e30] * 4 + [0], 105, "bad_detector_output"),
    "-1e30-box": ("detector", "dets", [-1e30] * 4 + [0], 105, "bad_detector_output"),
    "nan-score": ("detector", "dets", [0] * 4 + [np.nan], 105, "bad_detector_output"),
    "inf-score": ("detector", "dets", [0] * 4 + [np.inf], 105, "bad_detector_output"),
    "nan-raw": ("detector_raw", "output", [np.nan], 105, "bad_detector_output"),
    "nan-simcc": ("pose", "simcc_x", [np.nan], -1.3, "bad_pose_output"),
    "inf-simcc": ("pose", "simcc_y", [-np.inf], -1.3, "bad_pose_output"),
}


@pytest.fixture(scope="module")
def clean_runs(models, one_video, tmp_path_factory) -> dict[str, Path]:
    """The frames through the unpoisoned models, per detector layout: what valid frames must equal."""
    runs = {}
    for det in ("detector", "detector_raw"):
        out = tmp_path_factory.mktemp("clean") / "run"
        proc = run_cli(["run", "--dataset", one_video, "--out", out, *wb(models[det], models["pose"])])
        assert proc.returncode == 0, proc.stderr
        runs[det] = out
    return runs


@pytest.mark.parametrize("case", list(POISONS))
def test_nonsense_outputs_get_a_named_status_no_points_and_no_mask(models, one_video, clean_runs,
                                                                    case, tmp_path):
    which, output, add, above, status = POISONS[case]
    bad = poisoned(models[which], tmp_path / "bad.onnx", output, np.array(add, np.float32), above)
    det_key = which if which != "pose" else "detector"
    det, pose = (bad, models["pose"]) if which != "pose" else (models["detector"], bad)
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", one_video, "--out", out, *wb(det, pose)])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    got = pq.read_table(out / "keypoints.parquet").to_pydict()
    ref = pq.read_table(clean_runs[det_key] / "keypoints.parquet").to_pydict()
    assert set(got["status"]) == {"ok", status}, got["status"]  # astronaut-1's frames, not hopper-1's
    for i, s in enumerate(got["status"]):
        if s == "ok":  # valid frames: byte for byte what the clean model gives
            assert got["wholebody"][i] == ref["wholebody"][i] and got["persons"][i] == ref["persons"][i]
        else:
            assert got["wholebody"][i] is None and got["note"][i], (i, got["note"][i])
    mask = np.load(out / "tensors" / "all.mask.npy") if (out / "tensors" / "all.mask.npy").exists() \
        else np.concatenate([np.load(p) for p in sorted((out / "tensors").glob("*.mask.npy"))])
    bad_rows = np.array([s != "ok" for s in got["status"]])
    assert not mask[bad_rows].any() and mask[~bad_rows].any()


@pytest.mark.parametrize("which", ["detector", "pose"])
def test_a_batch_keeps_its_valid_frames_byte_identical_beside_nonsense_ones(one_video, which,
                                                                             tmp_path):
    """Models taking any number of frames per call, 8 frames a call: the frames of a batch the
    model answers nonsense on are refused, the others are what the clean models give."""
    dyn = tiny_models(tmp_path / "dyn", dynamic=True)
    output, add, above = {"detector": ("dets", [np.nan] * 4 + [0], 105),
                          "pose": ("simcc_x", [np.inf], -1.3)}[which]
    bad = poisoned(dyn[which], tmp_path / "bad.onnx", output, np.array(add, np.float32), above)
    runs = {}
    for name, (det, pose) in {"clean": (dyn["detector"], dyn["pose"]),
                              "bad": (bad, dyn["pose"]) if which == "detector"
                              else (dyn["detector"], bad)}.items():
        out = tmp_path / name
        proc = run_cli(["run", "--dataset", one_video, "--out", out, *wb(det, pose),
                        "--batch-size", "8"])
        assert proc.returncode == 0, proc.stderr
        runs[name] = pq.read_table(out / "keypoints.parquet").to_pydict()
    got, ref = runs["bad"], runs["clean"]
    assert got["status"] == [("ok", f"bad_{which}_output")[i % 2] for i in range(16)]
    for i in range(0, 16, 2):
        assert got["wholebody"][i] == ref["wholebody"][i] and got["persons"][i] == ref["persons"][i]


def test_a_model_answering_nonsense_on_every_frame_stops_the_run(models, one_video, tmp_path):
    bad = poisoned(models["pose"], tmp_path / "nan-pose.onnx", "simcc_x", np.array([np.nan], np.float32))
    out = tmp_path / "run"
    refused(run_cli(["run", "--dataset", one_video, "--out", out, *wb(models["detector"], bad)]),
            f"--pose-model {bad}", "bad_pose_output", "first 16 frames")
    assert not (out / "keypoints.parquet").exists()


@pytest.fixture(scope="module")
def white_and_dark(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two folders of two 20-frame videos each (frames the poisoned pose model below fails on:
    white; frames it answers well: dark): the failing one first in the chunk, or second."""
    import cv2

    base = tmp_path_factory.mktemp("streak")
    rng = np.random.default_rng(6)
    out = {}
    for order, names in {"fails-first": ("a_white", "b_dark"),
                         "fails-second": ("a_dark", "b_white")}.items():
        for name in names:
            (base / order / name).mkdir(parents=True)
            level = 235 if "white" in name else 10
            for i in range(20):
                frame = np.clip(level + rng.integers(-8, 8, (96, 72, 3)), 0, 255).astype(np.uint8)
                cv2.imwrite(str(base / order / name / f"{i:04d}.png"), frame)
        out[order] = base / order
    return out


@pytest.mark.slow
@pytest.mark.parametrize("order", ["fails-first", "fails-second"])
def test_the_stop_rule_gives_one_verdict_whatever_the_batch_size(white_and_dark, order, tmp_path):
    """--det-every 2 (lockstep: --batch-size lanes of videos at once): the first 16 frames counted
    in the chunk's video order, as a batch of 1 runs them, not interleaved with the other lanes'
    (was: a model failing on the first video stopped --batch-size 1 and not --batch-size 3)."""
    dyn = tiny_models(tmp_path / "dyn", dynamic=True)
    bad = poisoned(dyn["pose"], tmp_path / "bad.onnx", "simcc_x", np.array([np.nan], np.float32),
                   0.0)
    verdicts = {}
    for batch in ("1", "3"):
        proc = run_cli(["run", "--dataset", white_and_dark[order], "--out", tmp_path / batch,
                        *wb(dyn["detector"], bad), "--det-every", "2", "--batch-size", batch,
                        "--chunk-frames", "40"])
        assert_no_traceback(proc)
        verdicts[batch] = (proc.returncode, "first 16 frames" in proc.stderr)
        if order == "fails-second":  # its first frame ran well: the dark video's frames are kept
            got = pq.read_table(tmp_path / batch / "keypoints.parquet").to_pydict()
            assert {s for s, v in zip(got["status"], got["video"], strict=True)
                    if v == "a_dark"} == {"ok"}, got["status"]
            assert set(got["status"]) == {"ok", "bad_pose_output"}
    want = (2, True) if order == "fails-first" else (0, False)
    assert verdicts == {"1": want, "3": want}, verdicts


# --- failures when run ----------------------------------------------------------------------------
def test_a_model_failing_when_run_exits_2_naming_the_file_not_the_frames(models, one_video,
                                                                         tmp_path):
    from phoenix_keypoints import extract_keypoints

    everywhere = failing(models["detector"], tmp_path / "fails.onnx", "dets")
    out = tmp_path / "run"
    err = refused(run_cli(["run", "--dataset", one_video, "--out", out,
                           *wb(everywhere, models["pose"])]),
                  f"--detector {everywhere}", "onnxruntime failed running this model")
    assert not (out / "run.json").exists() and "MediaPipe" not in err  # refused before any worker
    on_frames = failing(models["detector"], tmp_path / "fails-on-frames.onnx", "dets", above=200)
    err = refused(run_cli(["run", "--dataset", one_video, "--out", out,
                           *wb(on_frames, models["pose"])]),
                  f"--detector {on_frames}", "onnxruntime failed running this model")
    assert "MediaPipe" not in err and "died" not in err, err
    assert not (out / "keypoints.parquet").exists()
    frames = np.full((2, 64, 48, 3), 255, np.uint8)
    from phoenix_keypoints.extract.families.wholebody.onnx_outputs import ModelRunError

    with pytest.raises(ModelRunError, match="fails-on-frames.onnx"):
        extract_keypoints(frames, estimator="wholebody", detector=on_frames,
                          pose_model=models["pose"])


# --- the model path itself ------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["fifo", "dev-zero"])
def test_a_fifo_or_a_device_as_the_model_is_named_and_never_opened(models, one_video, case,
                                                                   tmp_path):
    path = tmp_path / "det.onnx"
    if case == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)
    words = "a FIFO" if case == "fifo" else "a link to a device (/dev/zero)"
    refused(run_cli(["run", "--dataset", one_video, "--out", tmp_path / "run",
                     *wb(path, models["pose"])], timeout=60), str(path), words)


def test_escape_sequences_in_model_names_never_reach_the_terminal(models, one_video, tmp_path):
    esc = "\x1b]0;pwned\x07\x1b[2J"
    det = renamed(models["detector"], tmp_path / "esc.onnx", {"dets": f"dets{esc}"},
                  unused_initializer=f"left{esc}")
    proc = run_cli(["run", "--dataset", one_video, "--out", tmp_path / "run",
                    *wb(det, models["pose"])])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr + proc.stdout
    assert "left\\x1b]0;pwned\\x07" in proc.stderr  # onnxruntime's warning, escaped
