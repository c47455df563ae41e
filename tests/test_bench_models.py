"""The benchmarks' realistic-cost models (scripts/bench/realistic_models.py) and the GPU benchmark's
dry run (scripts/bench/gpu.py): what they write runs through the tool, and their MAC counts are
right. Speed itself is measured by the scripts, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import REPO, assert_no_traceback, run_cli

BENCH = REPO / "scripts" / "bench"
sys.path.insert(0, str(BENCH))


def test_mac_counter_on_known_layers():
    """count_macs on a graph whose MACs are worked out by hand: a strided convolution, a grouped
    one and a MatMul, with a named batch axis (MACs are per frame)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from realistic_models import count_macs

    inits = [numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "w1"),
             numpy_helper.from_array(np.ones((8, 2, 1, 1), np.float32), "w2"),
             numpy_helper.from_array(np.ones((240, 7), np.float32), "w3")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),  # [B, 8, 5, 6]: 240 values x 27 = 6480
             helper.make_node("Conv", ["c1", "w2"], ["c2"], kernel_shape=[1, 1], group=4),  # 240 x 2
             helper.make_node("Flatten", ["c2"], ["f"], axis=1),
             helper.make_node("MatMul", ["f", "w3"], ["y"])]  # 7 values x 240 = 1680
    graph = helper.make_graph(
        nodes, "known", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 10, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 7])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    assert count_macs(model) == 6480 + 480 + 1680


def test_trunk_plans_land_on_the_published_costs():
    """At scale 1 each model's trunk is planned within 1% of the published MACs (the heads add
    a few million on top; the written files' counts are in models.json, see the next test)."""
    from realistic_models import SPECS, plan_trunk, trunk_macs

    for name, spec in SPECS.items():
        target = spec.gmacs * 1e9
        assert abs(trunk_macs(spec.hw, plan_trunk(spec.hw, target)) / target - 1) < 0.01, name


@pytest.fixture(scope="module")
def small_models(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """YOLOX-tiny-like and RTMW-m-like models at 1% of their cost (fast), as the script writes."""
    out = tmp_path_factory.mktemp("realistic")
    proc = subprocess.run([sys.executable, BENCH / "realistic_models.py", "--out", out, "--scale",
                           "0.01", "--only", "yolox-tiny,rtmw-m"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "models.json").read_text())


def test_models_have_rtmlib_inputs_outputs_and_their_cost(small_models: dict):
    """The written models take rtmlib's input sizes and give the tiny models' outputs exactly (the
    trunk adds cost, not values), and count the MACs asked for."""
    import onnxruntime as ort
    from realistic_models import count_macs
    from tiny_onnx import detector_end2end, detector_raw, pose_simcc

    tiny = {"detector": detector_end2end, "detector_raw": detector_raw, "pose": pose_simcc}
    rng = np.random.default_rng(0)
    for name, info in small_models.items():
        for key, f in info["files"].items():
            path = Path(f["path"])
            assert abs(f["gmacs"] / (info["published_gmacs"] * 0.01) - 1) < 0.15, (name, key, f)
            plain = tiny[key](path.with_name(f"plain-{path.name}"), hw=tuple(info["input_hw"]),
                              batch="batch")
            assert count_macs(path) > 5 * count_macs(plain), (name, key)  # the trunk's cost
            x = (rng.random((2, 3, *info["input_hw"])) * 255).astype(np.float32)
            got, want = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
                         .run(None, {"input": x}) for p in (path, plain))
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w)


def test_models_run_through_the_wholebody_estimator(small_models: dict, sample_root: Path,
                                                    tmp_path: Path):
    """`run --estimator wholebody` on them, batched: every frame of the embedded sample gets its
    133 points, with the sizes read from the models."""
    files = {k: f["path"] for info in small_models.values() for k, f in info["files"].items()}
    proc = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "run", "--estimator",
                    "wholebody", "--detector", files["detector"], "--pose-model", files["pose"],
                    "--batch-size", "8", "--workers-per-gpu", "2"])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    t = pq.read_table(tmp_path / "run" / "keypoints.parquet", columns=["wholebody"])
    assert t.num_rows == 82
    assert {len(v) for v in t["wholebody"].to_pylist() if v is not None} == {133 * 3}


@pytest.mark.slow
def test_gpu_benchmark_dry_run_on_the_cpu(tmp_path: Path):
    """scripts/bench/gpu.py's whole path with --device cpu, tiny: the default command (marked),
    then W x B runs, each beside W rtmlib loops measured once per W by wall on the same frames,
    each recorded with the providers its sessions ran on (the check that refuses a figure from
    the wrong device) and its keypoints compared with the loops' (0 px on the CPU); the pieces of
    a frame's time; the JSON written where asked."""
    result = tmp_path / "gpu.json"
    proc = subprocess.run([sys.executable, BENCH / "gpu.py", "--device", "cpu", "--dry-run",
                           "--runs", "default,1x1,2x8", "--json", result],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(result.read_text())
    assert res["device"] == "cpu" and res["dry_run"] and set(res["pairs"]) == {"light"}
    light = res["pairs"]["light"]
    rows, frames = light["measurements"], light["workload"]["frames"]
    assert [(r["default"], r["workers_per_gpu"], r["batch_size"]) for r in rows] == [
        (True, 2, 8), (False, 1, 1), (False, 2, 8)]  # the default: a worker a core, batch 8
    assert all(r["fps"] > 0 and r["frames"] == frames and r["by_wall"] > 0 for r in rows)
    assert all(r["vs_rtmlib"] == {"frames_compared": frames, "max_px": 0.0,
                                  "frames_over_0.01px": 0, "frames_over_1px": 0} for r in rows)
    assert [r["providers"] for r in rows] == [["CPUExecutionProvider"]] * 3
    assert [r["workers_per_gpu"] for r in light["rtmlib_loops"]] == [2, 1]
    assert all(r["frames"] == frames and p[0] == "CPUExecutionProvider"
               for r in light["rtmlib_loops"] for loop in r["loops"] for p in loop["providers"].values())
    assert set(light["pieces"]["ms_a_frame"]) >= {"decode (imread)", "detector call (IO bound)",
                                                 "pose pre (crops)", "pose call (numpy in/out)"}


def test_gpu_benchmark_refuses_a_figure_from_the_wrong_device(clean_wholebody_run: Path,
                                                             tmp_path: Path):
    """onnxruntime falls back to the CPU with a warning only: a run.json whose workers ran on the
    CPU is refused for --device cuda (and one that records no runtime for any device), and
    without a GPU `gpu.py` stops before measuring anything, writing no JSON."""
    from gpu import check_runtime, gpus

    info = json.loads((clean_wholebody_run / "run.json").read_text())
    assert check_runtime(info, "cpu")
    with pytest.raises(SystemExit, match="CUDAExecutionProvider is not what ran"):
        check_runtime(info, "cuda")
    with pytest.raises(SystemExit, match="cannot tell where the frames ran"):
        check_runtime({**info, "extraction": {**info["extraction"], "runtime": {}}}, "cpu")
    if gpus():
        pytest.skip("a GPU is here: the refusal without one cannot be shown")
    proc = subprocess.run([sys.executable, BENCH / "gpu.py", "--dry-run", "--json",
                           tmp_path / "gpu.json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "--device cuda:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "gpu.json").exists()
