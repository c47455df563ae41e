"""The whole-body family on a GPU node, as far as a machine without one can check it (issue 47).

- Fixed shapes: on a GPU every session call takes the batch size (the last batch and the person
  crops padded with zeros, in one place, runner._run), and padding changes no byte of any frame's
  values (proved on the CPU, whose values do not depend on the size of a call).
- CUDA sessions made for batches: the provider options, and each session's memory limit from the
  worker's share of its card.
- How the values were computed (device, GPU, provider options, batch shape) is in every part, and
  a resume under another is refused, naming both and how to go on; on the CPU another
  --batch-size is allowed.
- The cards' memory: a fake `nvidia-smi` on PATH tells free memory; what does not fit is refused
  with what does, and the defaults of a GPU node (workers per GPU, batch size) are chosen from
  cores, GPUs and that memory, said and recorded; on Ray too (a real local cluster whose node's
  cards are read there); a GPU running out of memory is said as memory (issue 54 item 4).
- keypoints.parquet's metadata carries the parts' execution record (issue 54 item 5).
- The install's wheelhouse: a fake 3 MiB onnxruntime-gpu wheel through pip on a local folder,
  and every hostile value, manifest and part refused unread, exit 2 (issue 52 item 4).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import assert_no_traceback, run_cli
from tiny_onnx import tiny_models

H200 = {"device": "cuda", "gpu": "NVIDIA H200", "provider": "CUDAExecutionProvider",
        "provider_options": {"cudnn_conv_algo_search": "HEURISTIC"},
        "batch_shape": {"detector": 8, "pose_model": 8}}


@pytest.fixture(scope="module")
def batch_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory.mktemp("models-batch"), dynamic=True)


class Spy:
    """A real session whose calls are noted by their number of items (it still runs them)."""

    def __init__(self, session: object) -> None:
        self.session, self.sizes = session, []

    def run(self, names: object, feed: dict, options: object = None) -> list:
        self.sizes.append(next(iter(feed.values())).shape[0])
        return self.session.run(names, feed, options)

    def __getattr__(self, name: str) -> object:
        return getattr(self.session, name)


def _same(a: list, b: list) -> None:
    """Two lists of results (persons.py's Posed, or BadOutput), byte for byte: the row, the box
    count, every person's points and scores, every box."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert type(x) is type(y)
        if not hasattr(x, "row"):
            assert x == y
            continue
        assert x.row.tobytes() == y.row.tobytes() and x.persons == y.persons
        assert x.boxes.tobytes() == y.boxes.tobytes() and len(x.poses) == len(y.poses)
        for (xy, s), (xy2, s2) in zip(x.poses, y.poses, strict=True):
            assert xy.tobytes() == xy2.tobytes() and s.tobytes() == s2.tobytes()


@pytest.mark.parametrize("detector", ["detector", "detector_raw"])
def test_every_call_takes_the_batch_shape_and_padding_changes_no_byte(batch_models, detector):
    """Batches of 7, of 3 (the last of 1) and one of 19 frames (more than a call), and in lockstep
    15 crops of 5 frames: every detector and pose call takes 8 items, and each frame's values are
    the bytes unpadded calls give. Fails where calls take what they are given."""
    from phoenix_keypoints.extract.families.wholebody.runner import WholebodyModels

    rng = np.random.default_rng(47)
    frames = [rng.integers(0, 255, (120 + 7 * i, 160, 3), np.uint8) for i in range(19)]
    plain = WholebodyModels(batch_models[detector], batch_models["pose"])
    fixed = WholebodyModels(batch_models[detector], batch_models["pose"], batch=8, fixed=True)
    det, pose = Spy(fixed.detector.session), Spy(fixed.pose.session)
    fixed.detector.session, fixed.pose.session = det, pose
    for cut in (7, 3, 19):
        _same([r for i in range(0, 19, cut) for r in fixed.batch(frames[i:i + cut])],
              [r for i in range(0, 19, cut) for r in plain.batch(frames[i:i + cut])])
    bgrs = frames[:5]
    boxes = [[np.array([4.0 + k, 6.0, 90.0 + 3 * k, 100.0]) for k in range(3)] for _ in bgrs]
    _same(fixed.frames_on_boxes(bgrs, boxes), plain.frames_on_boxes(bgrs, boxes))
    assert set(det.sizes) == {8} and set(pose.sizes) == {8}, (det.sizes, pose.sizes)
    assert len(pose.sizes) > len(det.sizes)  # the 15 crops took two calls
    from phoenix_keypoints.extract.families.wholebody.runner import batch_shape

    assert batch_shape(fixed) == {"detector": 8, "pose_model": 8} and batch_shape(plain) is None


def test_cuda_sessions_are_made_for_batches_within_the_workers_share(monkeypatch, batch_models):
    """The CUDA provider gets the options for batches and each session its part of the worker's
    share of the card (the CPU build here: the providers list is what a GPU worker asks for)."""
    import phoenix_keypoints.extract.families.wholebody.runner as wb
    from phoenix_keypoints.extract.families.wholebody.gpu_memory import CONTEXT, session_limits

    monkeypatch.setattr(wb, "cuda_provider", lambda: True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    (name, options), cpu = wb.providers("cuda", 3 * 2**30)
    assert (name, cpu) == ("CUDAExecutionProvider", "CPUExecutionProvider")
    assert options == {"device_id": "0", "cudnn_conv_algo_search": "HEURISTIC",
                       "arena_extend_strategy": "kSameAsRequested",
                       "do_copy_in_default_stream": "1", "gpu_mem_limit": str(3 * 2**30)}
    (_, one), _ = wb.providers("cuda", None, 1)  # one frame a call: rtmlib's own search
    assert one == {"device_id": "0", "arena_extend_strategy": "kSameAsRequested",
                   "do_copy_in_default_stream": "1"}
    settings = wb.record(batch_models["detector"], batch_models["pose"])
    limits = session_limits(settings, {"batch_size": 8, "gpu_memory": 4 * 2**30})
    assert set(limits) == {"detector", "pose_model"}
    assert sum(limits.values()) <= 4 * 2**30 - CONTEXT and min(limits.values()) > 0
    assert session_limits(settings, {"batch_size": 8}) is None  # no share: no limit
    from phoenix_keypoints.extract.families.wholebody.gpu_memory import model_need

    need = {k: model_need(settings[k], 8) for k in ("detector", "pose_model")}
    tight = session_limits(settings, {"batch_size": 8, "gpu_memory": CONTEXT + sum(need.values())})
    arena = sum(need.values())  # a share that holds the estimates and nothing more
    assert all(min(need[k] * 3 // 2, arena) == tight[k] for k in need), (need, tight)


# --- recorded per part, and a resume under another computation refused ---------------------------
def _stamp(part: Path, execution: dict) -> None:
    """Rewrite a committed part with another execution record (as if made there), through the
    tool's own part writer: the same rows, page checksums and fingerprint."""
    from phoenix_keypoints.jobs.rundir.parts import read_part_info, write_part

    info, fingerprint = read_part_info(part)
    info.execution = execution
    write_part(part, pq.read_table(part).replace_schema_metadata(None), info, fingerprint)


def _refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert_no_traceback(proc)
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stderr}"
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)


def test_a_resume_under_another_device_or_batch_shape_is_refused(clean_wholebody_run, tmp_path):
    """Parts record how their values were computed; chunks whose parts were made on a GPU at
    calls of 8 are not resumed on the CPU: without --device the parts' cuda is taken (and this
    CPU build refuses it), with --device cpu the worker refuses before its first frame, naming
    both and how to go on. On the CPU another --batch-size resumes (the same bytes)."""
    run = tmp_path / "run"
    shutil.copytree(clean_wholebody_run, run)
    parts = sorted((run / "parts").glob("chunk-*.parquet"))
    made = json.loads(pq.read_schema(parts[0]).metadata[b"phoenix_keypoints"])["execution"]
    assert made == {"device": "cpu", "gpu": "", "provider": "CPUExecutionProvider",
                    "provider_options": {}, "batch_shape": {"detector": 1, "pose_model": 1}}
    _stamp(parts[0], H200)
    for part in parts[1:]:
        part.unlink()
    (run / "keypoints.parquet").unlink()
    _refused(run_cli(["run", "--out", run]), "its committed parts were computed on cuda (NVIDIA "
             "H200", "no CUDAExecutionProvider", "Go on where `--device cuda --batch-size 8` runs",
             "--fresh")
    _refused(run_cli(["run", "--out", run, "--device", "cpu"]),
             "cuda (NVIDIA H200; CUDAExecutionProvider, cudnn_conv_algo_search HEURISTIC), "
             "calls of 8 (detector), 8 (pose model)",
             "this worker runs on cpu (CPUExecutionProvider), calls of 1 (detector), 1 (pose model)",
             "Resume with `--device cuda --batch-size 8`", "--fresh")
    _stamp(parts[0], made)
    proc = run_cli(["run", "--out", run, "--batch-size", "3"])
    assert proc.returncode == 0, proc.stderr
    original = pq.read_table(clean_wholebody_run / "keypoints.parquet", columns=["wholebody"])
    assert pq.read_table(run / "keypoints.parquet", columns=["wholebody"]).equals(original)
    assert json.loads((run / "run.json").read_text())["merge"]["execution"] == [made]


def _file_execution(run: Path) -> list:
    """keypoints.parquet's execution record, read with pyarrow alone."""
    return json.loads(pq.read_schema(run / "keypoints.parquet").metadata[
        b"phoenix_keypoints.file"])["execution"]


def test_keypoints_parquet_carries_the_execution_record_of_its_parts(clean_wholebody_run,
                                                                    tmp_path):
    """A real run on the CPU (tiny whole-body models): keypoints.parquet's metadata holds how its
    values were computed, as run.json's merge record and every part hold it; a resume whose parts
    hold two records (a CPU part made at calls of 3, the rest at 1: the CPU's batch shape does not
    bind) gives the file both, in chunk order, as run.json (the merge beside the extraction took
    the first part's and starts over)."""
    parts = sorted((clean_wholebody_run / "parts").glob("chunk-*.parquet"))
    made = [json.loads(pq.read_schema(p).metadata[b"phoenix_keypoints"])["execution"]
            for p in parts]
    record = json.loads((clean_wholebody_run / "run.json").read_text())["merge"]["execution"]
    assert _file_execution(clean_wholebody_run) == record == [made[0]] == list(
        {json.dumps(m, sort_keys=True): m for m in made}.values())
    assert record[0]["device"] == "cpu" and record[0]["provider"] == "CPUExecutionProvider"
    run = tmp_path / "run"
    shutil.copytree(clean_wholebody_run, run)
    threes = {**made[0], "batch_shape": {"detector": 3, "pose_model": 3}}
    _stamp(run / "parts" / parts[0].name, threes)
    for part in parts[1:]:
        (run / "parts" / part.name).unlink()
    (run / "keypoints.parquet").unlink()
    proc = run_cli(["run", "--out", run])
    assert proc.returncode == 0, proc.stderr
    both = json.loads((run / "run.json").read_text())["merge"]["execution"]
    assert _file_execution(run) == both == [threes, made[0]]


def test_execution_records_differ_where_values_would():
    """What binds: device, provider, value options, GPU model (where both are known), and off
    the CPU the batch shape; what does not: memory options, an unknown GPU, an older part."""
    from phoenix_keypoints.extract.keypoints.execution import differences, value_options

    assert differences(H200, H200) == {}
    assert set(differences(H200, {**H200, "gpu": "NVIDIA A100-SXM4-80GB"})) == {"gpu"}
    assert differences(H200, {**H200, "gpu": ""}) == {}
    assert set(differences(H200, {**H200, "batch_shape": {"detector": 16, "pose_model": 16}})) \
        == {"batch_shape"}
    cpu = {"device": "cpu", "gpu": "", "provider": "CPUExecutionProvider", "provider_options": {},
           "batch_shape": None}
    assert differences(cpu, {**cpu, "batch_shape": {"detector": 1, "pose_model": 1}}) == {}
    assert set(differences(H200, cpu)) == {"device", "gpu", "provider", "provider_options",
                                           "batch_shape"} - {"gpu"}
    assert differences({}, H200) == {}
    assert value_options({"cudnn_conv_algo_search": "HEURISTIC", "gpu_mem_limit": "5",
                          "arena_extend_strategy": "kSameAsRequested", "use_tf32": "1"}) == {
        "cudnn_conv_algo_search": "HEURISTIC", "use_tf32": "1"}


# --- the cards' memory and the defaults of a GPU node (a fake nvidia-smi) -------------------------
FAKE_SMI = """#!/usr/bin/env python3
import sys
cards = [line.split(",") for line in {cards!r}]
args = sys.argv[1:]
if args == ["-L"]:
    for i, (name, total, free) in enumerate(cards):
        print(f"GPU {{i}}: {{name}} (UUID: GPU-{{i:08d}})")
elif "--query-gpu=index,name,memory.total,memory.free" in args:
    for i, (name, total, free) in enumerate(cards):
        print(f"{{i}}, {{name}}, {{total}}, {{free}}")
elif "--query-gpu=name" in args:
    print(cards[int(args[args.index("-i") + 1])][0])
else:
    sys.exit(9)
"""


def fake_cards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *cards: str) -> None:
    """An nvidia-smi on PATH listing these cards ("NAME,TOTAL_MIB,FREE_MIB" each), and
    onnxruntime taken to have CUDA: what the coordinator reads before any worker starts."""
    import phoenix_keypoints.extract.families.wholebody.runner as wb

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(cards=list(cards)))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(wb, "cuda_provider", lambda: True)


def _request(models: dict[str, Path], out: Path, **kw: object):
    from phoenix_keypoints.extract.families.wholebody.runner import record
    from phoenix_keypoints.jobs.run.options import RunOptions, RunRequest

    asked = {"wholebody": record(models["detector"], models["pose"])}
    return RunRequest(out, RunOptions(estimator="wholebody", asked=asked), **kw)


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_the_cards_memory_bounds_workers_and_batch(batch_models, tmp_path, monkeypatch, capsys,
                                                   backend):
    """A fake card of 8 GiB free beside one of 70: what is asked is checked against the
    tighter; 8 workers at batch 32 of these models do not fit it, and the refusal says what does.
    A worker's need is the family's estimate from its models (gpu_memory.py). A Ray run (its
    cluster started here: these cards) is fitted as a local one is."""
    import phoenix_keypoints.jobs.runner as runner
    from phoenix_keypoints.extract.families.wholebody import gpu_memory_need
    from phoenix_keypoints.jobs.rundir.folder import RunError
    from phoenix_keypoints.jobs.schedule.devices import gpu_cards

    fake_cards(tmp_path, monkeypatch, "NVIDIA H100 80GB HBM3,81559,70000",
               "NVIDIA A100-SXM4-40GB,40960,8192")
    assert gpu_cards()["1"].free_mib == 8192
    req = _request(batch_models, tmp_path / "run", device="cuda", workers_per_gpu=8, batch_size=32,
                   backend=backend)
    settings = req.worker_settings(None)
    need8 = gpu_memory_need(settings, 32) * 8
    assert need8 > 8192 * 2**20 * 0.9  # the case: it does not fit the tighter card
    with pytest.raises(RunError) as e:
        runner._fit_gpus(req)
    said = str(e.value)
    assert "8 worker(s) a GPU at --batch-size 32 need" in said and "GPU 1 (NVIDIA A100" in said
    fits = gpu_memory_need(settings, 32)
    most = int(8192 * 2**20 * 0.9) // fits
    assert f"What fits: --workers-per-gpu {most} at --batch-size 32" in said
    ok = runner._fit_gpus(_request(batch_models, tmp_path / "run", device="cuda",
                                   workers_per_gpu=most, batch_size=32, backend=backend))
    assert (ok.workers_per_gpu, ok.batch_size) == (most, 32)
    assert ok.gpu_memory == int(8192 * 2**20 * 0.9) // most
    runtime = ok.worker_settings(None)["runtime"]
    assert runtime["gpu_memory"] == ok.gpu_memory and "GPU 1 (NVIDIA A100" in runtime["chosen"]
    assert "GPU 1 (NVIDIA A100" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_the_defaults_of_a_gpu_node_come_from_cores_gpus_and_memory(batch_models, tmp_path,
                                                                    monkeypatch, capsys, backend):
    """32 cores and one card: a worker a core and the largest batch that fits them; with less
    memory free a smaller batch; with less still fewer workers (said); --batch-size and
    --workers-per-gpu given are kept where they fit. On Ray (a cluster started here) the same,
    and its actors are as many as the plan's workers, each 1/W of a GPU."""
    import phoenix_keypoints.jobs.runner as runner
    from phoenix_keypoints.extract.families.wholebody import gpu_memory_need

    monkeypatch.setattr(runner, "usable_cpus", lambda: list(range(32)))
    settings = _request(batch_models, tmp_path / "run").worker_settings(None)
    need = {b: gpu_memory_need(settings, b) for b in (1, 8, 16)}

    def plan(free_mib: int, **asked: int) -> tuple[int, int]:
        fake_cards(tmp_path, monkeypatch, f"NVIDIA H200,143771,{free_mib}")
        got = runner._fit_gpus(_request(batch_models, tmp_path / "run", device="cuda",
                                        backend=backend, **asked))
        return got.workers_per_gpu, got.batch_size

    def free_for(workers: int, batch: int) -> int:
        return int(workers * need[batch] / 2**20 / 0.9) + 1

    assert plan(140000) == (32, 16)
    assert plan(free_for(32, 8)) == (32, 8)
    assert "32 worker(s) a GPU x batch 8" in capsys.readouterr().err
    lowered = plan(free_for(20, 1))
    assert lowered == (20, 1)
    assert "20 workers, not one per core: more do not fit" in capsys.readouterr().err
    assert plan(140000, batch_size=4) == (32, 4)
    assert plan(140000, workers_per_gpu=3) == (3, 16)
    from phoenix_keypoints.jobs.schedule.ray_backend import actor_options

    class Cluster:  # what a local Ray started for this node reports (ray_backend.connect)
        def cluster_resources(self) -> dict[str, float]:
            return {"CPU": 32.0, "GPU": 1.0}

    assert actor_options(Cluster(), None, plan(free_for(20, 1))[0]) == \
        [{"num_cpus": 1, "num_gpus": 1 / 20}] * 20


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_ray_cluster_is_fitted_to_its_nodes_cards_read_there(batch_models, tmp_path, monkeypatch):
    """--backend ray --address: the cards are those the cluster's node reports (read by a task
    on it), not the driver's: a real local Ray whose node's nvidia-smi lists an 8 GiB-free card,
    the driver's one of 140 GiB free; what does not fit the node's card is refused, the rest
    fitted to it, with the node's cores per GPU."""
    import ray

    import phoenix_keypoints.jobs.runner as runner
    from phoenix_keypoints.jobs.rundir.folder import RunError

    for side in ("node", "driver"):
        (tmp_path / side).mkdir()
    fake_cards(tmp_path / "node", monkeypatch, "NVIDIA A100-SXM4-40GB,40960,8192")
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False,
             logging_level="WARNING")
    try:
        address = ray.get_runtime_context().gcs_address
        fake_cards(tmp_path / "driver", monkeypatch, "NVIDIA H200,143771,140000")
        with pytest.raises(RunError) as e:
            runner._fit_gpus(_request(batch_models, tmp_path / "run", device="cuda",
                                      workers_per_gpu=8, batch_size=32, backend="ray",
                                      address=address))
        assert "GPU 0 (NVIDIA A100-SXM4-40GB, 8.0 of 40.0 GiB free)" in str(e.value)
        ok = runner._fit_gpus(_request(batch_models, tmp_path / "run", device="cuda",
                                       backend="ray", address=address))
        assert (ok.workers_per_gpu, ok.batch_size) == (2, 16) and "NVIDIA A100" in ok.chosen
    finally:
        ray.shutdown()


def test_a_cpu_run_is_not_checked_against_the_cards(batch_models, tmp_path, monkeypatch):
    """--device cpu (or a family that runs on the CPU) takes no GPU memory: nothing is read."""
    import phoenix_keypoints.jobs.runner as runner

    fake_cards(tmp_path, monkeypatch, "NVIDIA H200,143771,10")
    req = _request(batch_models, tmp_path / "run", device="cpu", workers_per_gpu=64,
                   batch_size=64)
    assert runner._fit_gpus(req) is req


# --- a GPU running out of memory, said as memory ---------------------------------------------------
def _arena_limited(tmp_path: Path) -> tuple[object, Path]:
    """A real session whose arena may hold 32 MiB (onnxruntime's BFCArena, the allocator a CUDA
    session's gpu_mem_limit bounds, here on the CPU through an environment allocator), of a model
    that tiles a 3x64x64 input 16 x 16: a call of 8 inputs asks 96 MiB of it and fails as a GPU
    session past its limit does."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 64, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    rep = helper.make_tensor("rep", TensorProto.INT64, [4], [1, 1, 16, 16])
    graph = helper.make_graph([helper.make_node("Tile", ["x", "rep"], ["y"])], "tile", [x], [y],
                              [rep])
    path = tmp_path / "tile.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    cpu = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                            ort.OrtMemType.DEFAULT)
    with contextlib.suppress(Exception):  # registered once a process
        ort.create_and_register_allocator(cpu, ort.OrtArenaCfg(32 << 20, 1, -1, -1))
    so = ort.SessionOptions()
    so.add_session_config_entry("session.use_env_allocators", "1")
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]), path


CUDA_OOM = [  # onnxruntime-gpu's words when the card itself has no more
    "CUDA failure 2: out of memory ; GPU=0 ; hostname=node ; file=/onnxruntime_src/onnxruntime/"
    "core/providers/cuda/cuda_allocator.cc ; line=48 ; expr=cudaMalloc((void**)&p, size);",
    "Non-zero status code returned while running Conv node. Name:'/stem/conv/Conv' Status "
    "Message: /onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:376 void* onnxruntime::"
    "BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*) Failed to allocate "
    "memory for requested buffer of size 402653184",
    "CUBLAS failure 3: CUBLAS_STATUS_ALLOC_FAILED ; GPU=0 ; hostname=node ; expr=cublasCreate",
]


def test_a_gpu_running_out_of_memory_is_said_as_memory_not_the_model_file(tmp_path, monkeypatch):
    """onnxruntime's own out-of-memory (a real arena at its limit; and the CUDA provider's words,
    in onnxruntime's own exception class) from a session on a GPU: refused as memory, saying
    what the call asked, what the card had (nvidia-smi) and the flags that fit; never "the model
    file is at fault", which the same error on the CPU stays (a model asking 10^12 floats)."""
    fake_cards(tmp_path, monkeypatch, "NVIDIA H200,143771,3174")  # the runner first: telemetry off
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail

    from phoenix_keypoints.extract.families.wholebody.onnx_outputs import (
        ModelRunError,
        quiet_run_options,
        run_model,
    )
    from phoenix_keypoints.extract.keypoints.out_of_memory import GpuMemoryError, note_gpu_session

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    session, path = _arena_limited(tmp_path)
    x = np.zeros((8, 3, 64, 64), np.float32)
    assert session.run(None, {"x": x[:1]}, quiet_run_options())[0].shape == (1, 3, 1024, 1024)

    def call() -> list:
        return session.run(None, {"x": x}, quiet_run_options())

    with pytest.raises(ModelRunError) as cpu:  # a CPU session: the model's own
        run_model(call, "--pose-model", path, 8)
    assert "Available memory of" in str(cpu.value) and "model file is at fault" in str(cpu.value)
    note_gpu_session("--pose-model", path, 32 << 20, 8)
    with pytest.raises(GpuMemoryError) as gpu:
        run_model(call, "--pose-model", path, 8)
    said = str(gpu.value)
    assert "the GPU ran out of memory in a call of 8 input(s) at --batch-size 8" in said
    assert "asked 96.0 MiB more with 20.0 MiB of its session's 32.0 MiB arena left" in said
    assert "GPU 0 (NVIDIA H200, 3.1 of 140.4 GiB free now)" in said
    assert "what fits is --batch-size 2 or fewer --workers-per-gpu" in said
    assert "at fault" not in said and "not the model file" in said

    def raises(text: str) -> list:
        raise Fail(text)

    for text, asked in zip(CUDA_OOM, ["asked more than the card could give",
                                      "asked 384.0 MiB more, which the card could not give",
                                      "asked more than the card could give"], strict=True):
        with pytest.raises(GpuMemoryError) as card:
            run_model(lambda t=text: raises(t), "--pose-model", path, 8)
        assert f"this worker {asked}; GPU 0 (NVIDIA H200" in str(card.value)
        assert "what fits is --batch-size 4 or fewer" in str(card.value)
        assert "at fault" not in str(card.value)
    with pytest.raises(ModelRunError):  # another failure of a GPU session stays the model's
        run_model(lambda: raises("Non-zero status code returned while running Reshape node"),
                  "--pose-model", path, 8)


# --- installing for a GPU node (scripts/gpu_install.py) ------------------------------------------
def _installer(*args: object, env: dict[str, str] | None = None, timeout: float = 120,
               memory: int | None = None) -> subprocess.CompletedProcess:
    """scripts/gpu_install.py run as a user would (`memory`: bytes of address space it may map,
    so a case that reads a huge file fails at once instead of filling this machine)."""
    import resource

    from helpers import REPO

    def cap() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, REPO / "scripts" / "gpu_install.py", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, preexec_fn=cap)


def test_a_wheel_split_for_a_capped_transfer_joins_back_checked(tmp_path):
    """A file cut into parts of at most the cap joins back to the same bytes; a part missing or
    of other bytes is refused, naming it, and leaves no half-joined wheel."""
    from helpers import REPO

    sys.path.insert(0, str(REPO / "scripts"))
    from gpu_install import split

    data = np.random.default_rng(6).integers(0, 256, 5 * 2**20 + 123, np.uint8).tobytes()
    wheel = tmp_path / "onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(data)
    parts = split(wheel, 2 * 2**20)
    assert [p.stat().st_size for p in parts] == [2 * 2**20, 2 * 2**20, 2**20 + 123]
    assert not wheel.exists()
    ok = _installer("--join", tmp_path)
    assert ok.returncode == 0 and wheel.read_bytes() == data, ok.stderr
    wheel.unlink()
    good = parts[1].read_bytes()
    parts[1].write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    bad = _installer("--join", tmp_path)
    assert bad.returncode == 2 and f"{parts[1].name} is not the part that was split" in bad.stderr
    parts[1].unlink()
    gone = _installer("--join", tmp_path)
    assert gone.returncode == 2 and f"part 2 of 3 ({parts[1].name}) is missing" in gone.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [parts[0].name, parts[2].name, wheel.name + ".parts.json"])  # nothing half-written
    parts[1].write_bytes(good)
    assert _installer("--join", tmp_path).returncode == 0 and wheel.read_bytes() == data


WHEEL = "onnxruntime_gpu-1.31.1-py3-none-any.whl"
MANIFEST = WHEEL + ".parts.json"


def fake_gpu_wheel(folder: Path) -> Path:
    """A 3 MiB onnxruntime-gpu wheel as pip finds one: a zip of its dist-info and random bytes."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    dist = "onnxruntime_gpu-1.31.1.dist-info"
    with zipfile.ZipFile(folder / WHEEL, "w", zipfile.ZIP_STORED) as z:
        z.writestr("onnxruntime/blob.bin", np.random.default_rng(52).bytes(3 * 2**20))
        z.writestr(f"{dist}/METADATA", "Metadata-Version: 2.1\nName: onnxruntime-gpu\n"
                                       "Version: 1.31.1\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    return folder / WHEEL


@pytest.fixture(scope="module")
def split_house(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A wheelhouse the command made: the fake wheel downloaded by pip from a local folder
    (no index) and cut into 1 MiB parts; and that pip environment."""
    root = tmp_path_factory.mktemp("house")
    wheel = fake_gpu_wheel(root / "local")
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(root / "local"),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    made = _installer("--wheelhouse", root / "wh", "--only-onnxruntime", "--split-mb", "1", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    assert not (root / "wh" / WHEEL).exists() and len(list((root / "wh").glob("*.part-*"))) == 4
    joined = _installer("--join", root / "wh")
    assert joined.returncode == 0 and (root / "wh" / WHEEL).read_bytes() == wheel.read_bytes()
    (root / "wh" / WHEEL).unlink()
    return root, env


def _manifest(edit: object) -> object:
    """A case that rewrites the manifest: edit(dict) changes it in place."""
    def do(wh: Path) -> None:
        record = json.loads((wh / MANIFEST).read_text())
        edit(record)
        (wh / MANIFEST).write_text(json.dumps(record))
    return do


def _part(wh: Path, i: int = 1) -> Path:
    return wh / f"{WHEEL}.part-{i:03d}"


def _replace(path: Path, make: object) -> None:
    path.unlink()
    make(path)


def _sparse(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(20 * 2**30)


# (case, how the wheelhouse is made hostile, what the refusal says); all `--join`
HOSTILE_HOUSE = [
    ("name empty", _manifest(lambda m: m.update(name="")), "its name is ''"),
    ("name ..", _manifest(lambda m: m.update(name="..")), "its name is '..'"),
    ("name a path", _manifest(lambda m: m.update(name="../x.whl")), "its name is '../x.whl'"),
    ("name another wheel", _manifest(lambda m: m.update(name="numpy-2.0-py3-none-any.whl")),
     "the file it describes"),
    ("name a number", _manifest(lambda m: m.update(name=7)), "its name is 7"),
    ("not JSON", lambda wh: (wh / MANIFEST).write_text("{\"name\": "), "not JSON"),
    ("nested", lambda wh: (wh / MANIFEST).write_text("[" * 200_000), "not JSON"),
    ("a list", lambda wh: (wh / MANIFEST).write_text("[]"), "its content is 'list'"),
    ("no parts", _manifest(lambda m: m.pop("parts")), "its parts is None"),
    ("parts 7", _manifest(lambda m: m.update(parts=7)), "its parts is 7"),
    ("parts empty", _manifest(lambda m: m.update(parts=[])), "its parts is '0 parts'"),
    ("a part a string", _manifest(lambda m: m["parts"].__setitem__(0, "x")), "parts[0] is 'x'"),
    ("a part's name a path", _manifest(lambda m: m["parts"][0].update(name="../../etc/passwd")),
     "parts[0].name is '../../etc/passwd'"),
    ("a part named twice", _manifest(lambda m: m["parts"][1].update(name=m["parts"][0]["name"])),
     "parts[1].name"),
    ("a part's size text", _manifest(lambda m: m["parts"][0].update(size="1048576")),
     "parts[0].size is '1048576'"),
    ("a part's size true", _manifest(lambda m: m["parts"][0].update(size=True)),
     "parts[0].size is True"),
    ("a sha256 not hex", _manifest(lambda m: m["parts"][2].update(sha256="zz")),
     "parts[2].sha256 is 'zz'"),
    ("the total off", _manifest(lambda m: m.update(size=m["size"] + 1)), "its parts add up to"),
    ("the total 0", _manifest(lambda m: m.update(size=0)), "its size is 0"),
    ("a part sparse 20 GB", lambda wh: _sparse(_part(wh)),
     "(21,474,836,480 bytes, 1,048,576 expected)"),
    ("a part short", lambda wh: _part(wh).write_bytes(b"x"), "(1 bytes, 1,048,576 expected)"),
    ("a part a FIFO", lambda wh: _replace(_part(wh), os.mkfifo), "is a FIFO, not a regular file"),
    ("a part a link", lambda wh: _replace(_part(wh), lambda p: p.symlink_to(_part(wh, 0))),
     "is a link, not a regular file"),
    ("the manifest a FIFO", lambda wh: _replace(wh / MANIFEST, os.mkfifo),
     "the manifest is a FIFO"),
    ("the manifest huge", lambda wh: (wh / MANIFEST).write_text(" " * (2 << 20)),
     "more than a manifest holds"),
    ("a folder in the wheel's place", lambda wh: (wh / WHEEL).mkdir(), "a folder where the joined"),
]


@pytest.mark.parametrize(("mutate", "words"), [c[1:] for c in HOSTILE_HOUSE],
                         ids=[c[0] for c in HOSTILE_HOUSE])
def test_a_hostile_wheelhouse_is_refused_unread_and_nothing_is_written(split_house, tmp_path,
                                                                      mutate, words):
    """Every field of a manifest of its type, names plain file names of the wheelhouse, parts
    compared by lstat before a byte is read (a FIFO never opened, a sparse 20 GB part never read:
    the process may map 1 GiB), the total compared: each refused in one line, exit 2, nothing
    written in the wheelhouse or beside it, no part removed."""
    root, _ = split_house
    wh = tmp_path / "wh"
    shutil.copytree(root / "wh", wh)
    mutate(wh)
    before = sorted(os.listdir(wh))
    proc = _installer("--join", wh, timeout=20, memory=2**30)
    _refused(proc, words)
    assert sorted(os.listdir(tmp_path)) == ["wh"] and sorted(os.listdir(wh)) == before


@pytest.mark.parametrize("value", ["0", "1e-9", "nan", "inf", "-1", "0.5", "+5", " 5", "\u0663"])
def test_split_mb_is_a_whole_number_of_mib_or_the_wheel_is_kept(split_house, tmp_path, value):
    """--split-mb that is not 1 or more MiB in ASCII digits is refused before pip runs: the
    wheel in the wheelhouse stays whole (0 or 1e-9 split it into 0 parts and deleted it)."""
    root, env = split_house
    wheel = fake_gpu_wheel(tmp_path / "wh")
    data = wheel.read_bytes()
    proc = _installer("--wheelhouse", tmp_path / "wh", "--only-onnxruntime", "--split-mb", value,
                      env=env)
    _refused(proc, "argument --split-mb: must be a whole number of MiB from 1")
    assert os.listdir(tmp_path / "wh") == [WHEEL] and wheel.read_bytes() == data


def test_one_command_installs_the_pinned_gpu_build_online_or_offline(tmp_path):
    """--dry-run says the one command's steps: the CPU package out, then the `gpu` extra as
    pyproject pins it (onnxruntime-gpu with its CUDA wheels) from the index or, with --from, from
    the wheelhouse with --no-index; --wheelhouse downloads for the node's Python."""
    online = _installer("--dry-run")
    assert online.returncode == 0, online.stderr
    steps = online.stdout.splitlines()
    assert steps[0].endswith("-m pip uninstall -y onnxruntime onnxruntime-gpu")
    assert steps[1].endswith("'onnxruntime-gpu[cuda,cudnn]==1.31.1'") and "constraints.txt" in steps[1]
    offline = _installer("--from", tmp_path, "--dry-run").stdout.splitlines()
    assert f"--no-index --find-links {tmp_path}" in offline[1]
    house = _installer("--wheelhouse", tmp_path / "wh", "--python-version", "3.12",
                       "--only-onnxruntime", "--dry-run").stdout
    assert "download" in house and "--python-version 3.12" in house
    assert "--no-deps onnxruntime-gpu==1.31.1" in house


@pytest.mark.parametrize("visible", ["0", ""])
def test_cuda_libraries_from_the_nvidia_wheels_are_loaded_before_onnxruntime(tmp_path, visible):
    """A site folder laid out as the CUDA 13 nvidia-* wheels lay theirs (nvidia/cu13/lib,
    nvidia/cudnn/lib; stand-in libraries): a process given a GPU loads them by full path before
    onnxruntime, cuBLASLt before cuBLAS; one given none loads nothing."""
    import zlib

    # a real shared library to copy: the system's zlib, else the zlib module's own (absent where
    # the Python has zlib built in, as Debian's has: looked at only when the others are missing)
    candidates = ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1",
                  getattr(zlib, "__file__", None))
    real = next(Path(p) for p in candidates if p and Path(p).is_file())
    site = tmp_path / "site"
    for folder, name in (("nvidia/cu13/lib", "libcublasLt.so.13"),
                         ("nvidia/cu13/lib", "libcublas.so.13"),
                         ("nvidia/cu13/lib", "libcudart.so.13"),
                         ("nvidia/cudnn/lib", "libcudnn.so.9")):
        (site / folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(real, site / folder / name)
    code = ("import sys; from phoenix_keypoints.extract.keypoints import cuda_libs; "
            f"import json; print(json.dumps(cuda_libs.preload([{str(site)!r}, 'relative'])))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": visible}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    want = [str(site / "nvidia/cu13/lib" / n) for n in ("libcublasLt.so.13", "libcublas.so.13",
                                                        "libcudart.so.13")]
    assert loaded == ([*want, str(site / "nvidia/cudnn/lib/libcudnn.so.9")] if visible else [])
