"""The command line's promises: worker pinning, live status, clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_no_traceback, popen_cli, progress, run_cli, wait_for

from phoenix_keypoints.jobs.schedule.devices import visible_gpus, worker_slots


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def _allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list")


def test_slots_follow_gpus_and_cpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert visible_gpus() == ["3", "5"]
    slots = worker_slots(None, 2)
    assert [s.gpu for s in slots] == ["3", "5", "3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    slots = worker_slots(None, None)
    assert all(s.gpu == "" for s in slots) and len(slots) >= 1
    assert worker_slots(0, 3)[2].gpu == ""


def test_workers_pinned_and_status_live(sample_root: Path, tmp_path: Path):
    """Real workers: CUDA_VISIBLE_DEVICES and CPU affinity as planned; status works meanwhile."""
    out = tmp_path / "run"
    proc = popen_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                      "--num-gpus", "2", "--workers-per-gpu", "1"],
                     env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.1"})
    def two_workers_working() -> list[dict]:
        beat = progress(out)
        workers = [w for w in beat.get("workers", []) if w["pid"]]
        return workers if len(workers) == 2 and beat["frames_done"] > 0 else []

    try:
        workers = wait_for(two_workers_working, 120, "two workers reporting frames", proc)
        for w in workers:
            assert _environ(w["pid"])["CUDA_VISIBLE_DEVICES"] == str(w["slot"] % 2)
            assert _allowed_cpus(w["pid"]) == str(w["cpus"][0])
        status = run_cli(["status", "--out", out])
        assert status.returncode == 0, status.stderr
        assert "running:  pid" in status.stdout and "frames/s" in status.stdout
    finally:
        _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    status = run_cli(["status", "--out", out])
    assert "chunks:   5/5 committed" in status.stdout
    assert "merged:   82 rows" in status.stdout


def test_refuses_model_that_would_download(sample_root: Path, tmp_path: Path):
    proc = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "r",
                    "--model-complexity", "2"])
    assert proc.returncode == 2
    assert "pose_landmark_heavy.tflite" in proc.stderr and "--model-complexity 1" in proc.stderr
    assert_no_traceback(proc)
    assert not (tmp_path / "r" / "run.json").exists()


def test_status_and_merge_without_run(tmp_path: Path):
    for cmd in ("status", "merge"):
        proc = run_cli([cmd, "--out", tmp_path / "nothing"])
        assert proc.returncode == 2
        assert "no run" in proc.stderr and "phoenix-keypoints run" in proc.stderr
        assert_no_traceback(proc)


@pytest.mark.parametrize("flag,value", [("--batch-size", "abc"), ("--workers", "1.5"),
                                        ("--num-gpus", "two"), ("--chunk-frames", "")])
def test_a_number_option_given_no_number_says_so_in_words(flag: str, value: str, tmp_path: Path):
    """argparse names the function that parsed a value when it raises ValueError: the user reads
    what is wrong instead."""
    proc = run_cli(["run", "--out", tmp_path / "r", flag, value])
    assert proc.returncode == 2
    assert f"argument {flag}" in proc.stderr, proc.stderr
    assert f"must be a whole number, not {value!r}" in proc.stderr, proc.stderr
    assert "invalid" not in proc.stderr and "_positive" not in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()


def test_sample_command(tmp_path: Path):
    proc = run_cli(["sample", "--out", tmp_path])
    assert proc.returncode == 0
    root = Path(proc.stdout.strip())
    assert (root / "annotations" / "manual" / "PHOENIX-2014-T.train.corpus.csv").is_file()


def test_export_help_words_each_format_as_the_families_that_take_it_do():
    """`export --format`'s help reads each family's words for its formats (EXPORT_HELP) and says
    which families' runs a format takes where not all do; it named the whole-body formats in
    the command line's own text (issue 38)."""
    proc = run_cli(["export", "--help"], env={"COLUMNS": "1000"})  # one line: no wrap at a -
    said = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stderr
    for words in ("pose: .pose files;", "legacy-pkl: the older script's pkl (what run --output_path "
                  "writes) (holistic runs)", "twostream-pkl: TwoStream-SLR's keypoint_file "
                  "(wholebody runs)", "unisign-pkl: Uni-Sign's pose folder (wholebody runs)"):
        assert words in said, said
