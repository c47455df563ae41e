"""MadeUnder (jobs/rundir/made_under.py), the one owner of "how a run's parts were computed": the
comparison every resume, task and worker asks, shown without a process."""

from __future__ import annotations

from phoenix_keypoints.jobs.rundir.made_under import MadeUnder
from phoenix_keypoints.jobs.rundir.parts import PartInfo

CUDA = {"device": "cuda", "gpu": "NVIDIA H200", "provider": "CUDAExecutionProvider",
        "provider_options": {}, "batch_shape": {"frames": 8}}
CPU = {**CUDA, "device": "cpu", "gpu": "", "provider": "CPUExecutionProvider"}
VERSIONS = {"onnxruntime": "1.20.0", "rtmlib": "0.0.16"}


def test_the_same_computation_differs_in_nothing() -> None:
    made = MadeUnder.of_worker(VERSIONS, CUDA)
    assert made.differs(MadeUnder.of_worker(dict(VERSIONS), dict(CUDA))) is None
    assert made.refusal(MadeUnder.of_worker(VERSIONS, CUDA), "worker 0 on here") == ""


def test_other_versions_are_named_with_how_to_get_the_runs_back() -> None:
    made = MadeUnder.of_worker(VERSIONS, CUDA)
    now = MadeUnder.of_worker({**VERSIONS, "onnxruntime": "1.21.0"}, CUDA)
    assert "onnxruntime 1.20.0 made, 1.21.0 now" in (made.differs(now) or "")
    why = made.refusal(now, "worker 3 on node7")
    assert why.startswith("worker 3 on node7 has other versions")
    assert "pip install onnxruntime==1.20.0" in why


def test_another_device_is_refused_and_says_the_runs_flags() -> None:
    made = MadeUnder.of_worker(VERSIONS, CUDA)
    now = MadeUnder.of_worker(VERSIONS, CPU)
    assert (made.differs(now) or "").startswith("device, provider differ: made on cuda")
    why = made.refusal(now, "worker 0 on here")
    assert "would compute the keypoints otherwise" in why
    assert "`--device cuda --batch-size 8`" in why


def test_another_batch_shape_binds_on_a_gpu_not_on_the_cpu() -> None:
    bigger = {**CUDA, "batch_shape": {"frames": 16}}
    assert "batch_shape" in (MadeUnder.of_worker(VERSIONS, CUDA).differs(
        MadeUnder.of_worker(VERSIONS, bigger)) or "")
    cpu16 = {**CPU, "batch_shape": {"frames": 16}}
    assert MadeUnder.of_worker(VERSIONS, CPU).differs(MadeUnder.of_worker(VERSIONS, cpu16)) is None


def test_an_old_part_without_the_record_binds_nothing_but_the_runs_versions() -> None:
    old = PartInfo.of_rows(0, ["v"], ["ok"], {})  # written before parts recorded either
    made = MadeUnder.of_part(old, VERSIONS)
    assert made.versions == VERSIONS and not made.execution
    assert made.differs(MadeUnder.of_worker(VERSIONS, CUDA)) is None
    assert MadeUnder.binding([old, PartInfo.of_rows(1, ["w"], ["ok"], {}, execution=CUDA)]) == CUDA
    assert made.resumed_with(None, None) == (None, None)


def test_a_resume_takes_the_parts_device_and_batch_where_not_given() -> None:
    made = MadeUnder.of_worker(VERSIONS, CUDA)
    assert made.resumed_with(None, None) == ("cuda", 8)
    assert made.resumed_with("auto", 4) == ("cuda", 4)
    assert made.resumed_with("cpu", None) == ("cpu", 8)
