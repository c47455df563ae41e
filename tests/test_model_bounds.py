"""Every model call bounded in time and memory, a model's declared input bounded, its layout named
for what it is (issue 46, items 1-3): real `run`s on crafted ONNX files (tests/tiny_onnx.py).

A model that hangs or grows would hang or swap the test itself on code without the bounds: every
such run here is a subprocess under a timeout (its process group killed at the end of it) and a
cap on its address space (RLIMIT_AS, inherited by its workers), so a failure is a failure, never a
stuck CI.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, assert_no_traceback, cli_env
from tiny_onnx import (
    detector_end2end,
    folding,
    huge_allocation,
    looping,
    pose_declaring,
    tiny_models,
    with_outputs,
)

ADDRESS_SPACE = 4 << 30  # a clean run of the tiny models needs under 3 GB of address space


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def frames(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three frames in one folder (`--dataset FOLDER`); their brightest pixels pass 200."""
    import shutil

    folder = tmp_path_factory.mktemp("one") / "frames"
    folder.mkdir()
    for png in sorted(sample_root.rglob("hopper-1/*.png"))[:3]:
        shutil.copyfile(png, folder / png.name)
    return folder


def bounded_run(args: list, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    """`phoenix-keypoints run ARGS` under `timeout` seconds and ADDRESS_SPACE bytes; (the process,
    its wall seconds). Past the timeout its whole process group is killed and the test fails."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "phoenix_keypoints", "run", *map(str, args)],
                            env=cli_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=cap, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"still running after {timeout} s: the model was not bounded")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - t0


def wb(frames: Path, out: Path, det: Path, pose: Path, *more: str) -> list:
    return ["--dataset", frames, "--out", out, "--estimator", "wholebody", "--detector", det,
            "--pose-model", pose, "--workers", "1", *more]


def refused(proc: subprocess.CompletedProcess, *words: str) -> str:
    assert_no_traceback(proc)
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)
    assert "check the frames" not in proc.stderr and "died" not in proc.stderr, proc.stderr
    return proc.stderr


# --- loops no published model needs: refused at load ---------------------------------------------
@pytest.mark.parametrize("case, role, said", [
    ("2^62 trips", "detector", "a Loop of 4,611,686,018,427,387,904 trips, more than the 10,000"),
    ("10^6 trips growing 4 MB each", "pose", "a Loop of 1,000,000 trips"),
    ("trip count from the pixels", "detector", "a Loop whose trip count ('loop_trips') comes "
                                               "from the data"),
    ("no trip count", "pose", "a Loop without a trip count"),
], ids=["2^62-trips", "10^6-trips-growing", "trips-from-data", "no-trip-count"])
def test_a_loop_no_published_model_needs_is_refused_before_it_runs(
        case: str, role: str, said: str, models: dict[str, Path], frames: Path, tmp_path: Path):
    """On 67bac1c the first hung in the start-up check (nothing printed, no --out), the second
    grew until a memory cap stopped onnxruntime, the third ran, the fourth hung."""
    trips, body = {"2^62 trips": (2**62, "count"), "10^6 trips growing 4 MB each": (10**6, "grow"),
                   "trip count from the pixels": ("data", "count"),
                   "no trip count": ("none", "count")}[case]
    src, output = (models["detector"], "dets") if role == "detector" else (models["pose"], "simcc_x")
    bad = looping(src, tmp_path / "loop.onnx", output, trips, body)
    det, pose = (bad, models["pose"]) if role == "detector" else (models["detector"], bad)
    proc, took = bounded_run(wb(frames, tmp_path / "R", det, pose), timeout=90)
    refused(proc, f"--{'detector' if role == 'detector' else 'pose-model'} {bad}: its graph holds",
            said, "refused before it runs")
    assert not (tmp_path / "R").exists()


# --- past the deadline, past the memory limit: stopped, refused ------------------------------------
def test_a_model_call_past_its_deadline_is_stopped_and_the_model_refused(
        models: dict[str, Path], frames: Path, tmp_path: Path):
    """A Loop of 10,000 trips (allowed) of a 512 x 512 matrix product each: minutes. The start-up
    check on one grey input stops it at --model-deadline; on 67bac1c it ran on for minutes."""
    slow = looping(models["detector"], tmp_path / "slow.onnx", "dets", 10_000, "slow")
    proc, took = bounded_run(wb(frames, tmp_path / "R", slow, models["pose"],
                                "--model-deadline", "1"), timeout=120)
    refused(proc, f"--detector {slow}: a call of this model on one input ran past 1 s "
                  "(--model-deadline: 1 s an input), and was stopped", "not the frames")
    assert not (tmp_path / "R").exists()


def test_a_model_call_past_its_memory_limit_is_stopped_and_the_model_refused(
        models: dict[str, Path], frames: Path, tmp_path: Path):
    """A Loop of 10,000 trips (allowed) stacking 4 MB a trip: 40 GB. Stopped at --model-memory
    in the start-up check; on 67bac1c it grew until the address-space cap made onnxruntime fail
    ("bad allocation"), or without one until the OOM killer."""
    grow = looping(models["pose"], tmp_path / "grow.onnx", "simcc_x", 10_000, "grow")
    proc, took = bounded_run(wb(frames, tmp_path / "R", models["detector"], grow,
                                "--model-memory", "256"), timeout=120)
    refused(proc, f"--pose-model {grow}: a call of this model on one input grew this process's "
                  "memory by more than 256 MiB (--model-memory: 256 MiB a frame)", "not the frames")


@pytest.mark.slow
def test_a_model_slow_only_on_frames_is_stopped_in_the_worker(
        models: dict[str, Path], frames: Path, tmp_path: Path):
    """The Loop only where a pixel passes 200 (an If: the grey start-up check skips it): the
    worker's batch call is the one stopped, the run refused with the file named (exit 2)."""
    slow = looping(models["detector"], tmp_path / "slow.onnx", "dets", 10_000, "slow", above=200)
    proc, took = bounded_run(wb(frames, tmp_path / "R", slow, models["pose"],
                                "--model-deadline", "1", "--batch-size", "2"), timeout=150)
    refused(proc, f"--detector {slow}: a call of this model on 2 inputs ran past 2 s "
                  "(--model-deadline: 1 s an input)")


def test_a_single_node_past_twice_the_memory_limit_ends_the_process_with_the_refusal(
        models: dict[str, Path], frames: Path, tmp_path: Path):
    """One ConstantOfShape of 2 GiB: onnxruntime checks terminate between nodes only, so at twice
    --model-memory the watchdog says the refusal and ends the process (exit 2). On 67bac1c the
    node ran and the run went on (exit 0)."""
    big = huge_allocation(models["detector"], tmp_path / "big.onnx", "dets", 1 << 29)
    proc, took = bounded_run(wb(frames, tmp_path / "R", big, models["pose"], "--model-memory",
                                "128"), timeout=120)
    refused(proc, f"--detector {big}: a call of this model on one input grew this process's "
                  "memory by more than 128 MiB (--model-memory: 128 MiB a frame), and the process "
                  "was ended, as it did not stop when told to.")


def test_a_model_whose_load_runs_past_the_deadline_ends_the_process_with_the_refusal(
        models: dict[str, Path], frames: Path, tmp_path: Path):
    """A 6000 x 6000 product of constants: onnxruntime computes it while it loads the model (about
    a minute a load here; 67bac1c loaded it three times in the coordinator, then in each worker).
    Nothing can stop a load: at --model-deadline the refusal is said and the process ends."""
    slow = folding(models["detector"], tmp_path / "fold.onnx", "dets", 6000)
    proc, took = bounded_run(wb(frames, tmp_path / "R", slow, models["pose"], "--model-deadline",
                                "1"), timeout=120)
    refused(proc, f"--detector {slow}: loading this model (onnxruntime computes the constant "
                  "parts of its graph then) ran past 1 s (--model-deadline: 1 s an input), and the "
                  "process was ended.")
    assert not (tmp_path / "R").exists()


# --- a model's declared input ------------------------------------------------------------------------
@pytest.mark.parametrize("role", ["detector", "pose"])
def test_a_model_declaring_a_huge_input_is_refused_before_any_frame(
        role: str, models: dict[str, Path], frames: Path, tmp_path: Path):
    """20000 x 20000: on 67bac1c the detector held 4.8 GB in the start-up check and no frame came
    in 200 s; the pose model killed its worker three times (MemoryError) and the message blamed
    the frames."""
    if role == "detector":
        det, pose = detector_end2end(tmp_path / "big.onnx", hw=(20000, 20000)), models["pose"]
        flag, bad = "--detector", det
    else:
        det, pose = models["detector"], pose_declaring(tmp_path / "big.onnx", (20000, 20000))
        flag, bad = "--pose-model", pose
    proc, took = bounded_run(wb(frames, tmp_path / "R", det, pose), timeout=90)
    refused(proc, f"{flag} {bad}: its input is declared 20,000x20,000 pixels; a model's input may "
                  "be at most 4,096 pixels a side")
    assert not (tmp_path / "R").exists()


def test_a_batch_of_a_large_models_inputs_is_held_to_the_batch_size_rule(
        models: dict[str, Path], frames: Path, tmp_path: Path):
    """A 2048 x 2048 detector (48 MiB of input a frame): --batch-size 64 passes the rule the
    declaration's 640 x 640 sets (123), not the loaded models' (2 GiB / (11.9 + 48 + 0.04 MiB) =
    34): refused before any frame, naming the model and the bound. On 67bac1c it ran."""
    det = detector_end2end(tmp_path / "d2048.onnx", hw=(2048, 2048))
    proc, took = bounded_run(wb(frames, tmp_path / "R", det, models["pose"], "--batch-size", "64"),
                             timeout=90)
    refused(proc, "--batch-size 64: must be at most 34, not 64: a batch holds each of its frames "
                  f"about three times (RGB read ahead, RGB in the batch, --detector {det}'s "
                  "2048x2048 input and --pose-model", "Pass a smaller --batch-size")


# --- a model named for what it is ---------------------------------------------------------------
@pytest.mark.parametrize("role", ["pose", "detector"])
def test_a_model_of_300_outputs_is_named_for_what_it_is(role: str, models: dict[str, Path],
                                                        tmp_path: Path):
    """On 67bac1c, as --pose-model: "a YOLOX person detector without NMS (raw grid)"."""
    from phoenix_keypoints.extract.families.wholebody.runner import record
    from phoenix_keypoints.extract.keypoints.estimator import ModelFileError

    many = with_outputs(models["pose"], tmp_path / "many.onnx", 300)
    det, pose = (models["detector"], many) if role == "pose" else (many, models["pose"])
    with pytest.raises(ModelFileError) as e:
        record(det, pose)
    said = str(e.value)
    assert f"{'--pose-model' if role == 'pose' else '--detector'} {many}: a model with 300 " \
           "outputs ([1, 133, 96], [1, 133, 128], [1, 133, 96], ...)." in said, said
    assert "YOLOX person detector with" not in said and "YOLOX person detector without" not in said


# --- the watcher: one thread a process, every call under way watched ------------------------------
def test_one_watcher_thread_stops_a_slow_call_while_it_watches_every_call(
        models: dict[str, Path], tmp_path: Path):
    """In this process, on the real onnxruntime: two threads' calls watched at once, a Loop of
    10,000 matrix products stopped at its deadline (0.3 s) while the other thread's quick calls go
    on, and all of them watched by one long-lived thread, not one started per call (~0.6 ms a call,
    issue 53 item 12; on 14e2a40 each call had a thread of its own)."""
    import threading

    import numpy as np
    import onnxruntime as ort

    from phoenix_keypoints.extract.keypoints import model_calls as mc

    slow = looping(models["detector"], tmp_path / "slow.onnx", "dets", 10_000, "slow")
    session = ort.InferenceSession(str(slow), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    grey = np.full([d if isinstance(d, int) else 1 for d in inp.shape], 0.5, np.float32)
    seen: list[threading.Thread] = []

    def quick() -> int:
        seen.extend(t for t in threading.enumerate() if t.name == "model-call-watchdog")
        return 1

    quick_calls: list[int] = []

    def many() -> None:
        for _ in range(200):
            quick_calls.append(mc.bounded(quick, "--detector", Path("quick.onnx")))

    mc.set_limits(deadline_s=0.3)
    try:
        other = threading.Thread(target=many)
        t0 = time.monotonic()
        other.start()
        with pytest.raises(mc.ModelLimitError, match=r"--detector .*slow.onnx: a call of this model "
                                                     r"on one input ran past 0.3 s"):
            mc.bounded(lambda: session.run(None, {inp.name: grey}, mc.run_options()),
                       "--detector", slow)
        took = time.monotonic() - t0
        other.join()
    finally:
        mc.set_limits()
    assert took < 10, f"the slow call was stopped after {took:.1f} s, not at its 0.3 s deadline"
    assert quick_calls == [1] * 200
    assert len(seen) >= 200 and len({id(t) for t in seen}) == 1, \
        f"{len({id(t) for t in seen})} watchdog threads for {len(quick_calls) + 1} calls"
